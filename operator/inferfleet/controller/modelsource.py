"""config.json of a model the catalog lacks, read from its source with the spec's own
credentials (the ones its pre-cache uses). I/O: the Secret through the cluster port, the
source through `cache.modelconfig`.

Only models the planner cannot otherwise size are fetched: one with an inline
`spec.model.config` or a catalog entry never costs a request. The Secret is read by name
in the InferenceService's own namespace, never listed; its resourceVersion is part of the
cache key, so a rotated token is tried at once.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inferfleet.api import InferenceService
from inferfleet.catalog import Catalogs
from inferfleet.cluster import Cluster
from inferfleet.cluster.errors import PermanentApiError
from inferfleet.fetcher.modelconfig import Access, ModelConfigCache
from inferfleet.fetcher.remote import AWS_CREDENTIAL_KEYS
from inferfleet.kubedata import ObjectRef
from inferfleet.planner import FetchedModel


def needs_fetch(service: InferenceService, catalogs: Catalogs) -> bool:
    model = service.spec.model
    return model.config is None and catalogs.model(model.name) is None


def source_uri(service: InferenceService) -> str:
    model = service.spec.model
    return model.source or f"hf://{model.name}"


def _decoded(secret: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8").strip()
        except (binascii.Error, UnicodeDecodeError):
            continue
    for key, value in (secret.get("stringData") or {}).items():
        out[str(key)] = str(value).strip()
    return out


class ClusterModelSource:
    """Fetches for the operator: credentials from the spec's Secret, answers cached."""

    def __init__(self, cluster: Cluster, catalogs: Catalogs, cache: ModelConfigCache | None = None) -> None:
        self.cluster = cluster
        self.catalogs = catalogs
        self.cache = cache or ModelConfigCache()

    def __call__(self, service: InferenceService) -> tuple[FetchedModel | None, str | None]:
        if not needs_fetch(service, self.catalogs):
            return (None, None)
        model = service.spec.model
        uri = source_uri(service)
        revision = model.revision or "main"
        need_parameters = model.parameters_billion is None
        ref = model.credentials_secret_ref
        if ref is None:
            return self.cache.get(uri, revision, Access(), need_parameters=need_parameters)
        try:
            secret = self.cluster.get(ObjectRef("v1", "Secret", service.namespace, ref.name))
        except PermanentApiError as error:
            # Forbidden and the like: the user's to fix (transient errors retry the pass).
            return (None, f"cannot read Secret {service.namespace}/{ref.name} for {uri}: {error}")
        if secret is None:
            where = f"Secret {service.namespace}/{ref.name}"
            return (None, f"{where} (spec.model.credentialsSecretRef) does not exist")
        values = _decoded(secret)
        identity = (ref.name, ref.key, str((secret.get("metadata") or {}).get("resourceVersion", "")))
        if uri.startswith("s3://"):
            with tempfile.TemporaryDirectory(prefix="inferfleet-creds-") as directory:
                for key in AWS_CREDENTIAL_KEYS:
                    if key in values:
                        path = Path(directory) / key
                        path.write_text(values[key], encoding="utf-8")
                        path.chmod(0o600)
                access = Access(credentials_dir=Path(directory))
                return self.cache.get(
                    uri, revision, access, need_parameters=need_parameters, identity=identity
                )
        access = Access(token=values.get(ref.key)) if uri.startswith("hf://") else Access()
        return self.cache.get(uri, revision, access, need_parameters=need_parameters, identity=identity)
