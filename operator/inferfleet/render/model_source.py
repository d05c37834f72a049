"""Where vLLM reads the weights from, derived from `spec.model.source` and `spec.cache`.

One place decides the model argument, the volumes that hold weights and the
environment that goes with them, so the cache work (issue 5) changes one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.config import OperatorSettings

# Mount points inside the vLLM container.
CACHE_MOUNT_PATH = "/var/cache/inferfleet"
SOURCE_MOUNT_PATH = "/mnt/model-source"
CACHE_VOLUME = "model-cache"
SOURCE_VOLUME = "model-source"


@dataclass(frozen=True)
class ModelSource:
    """How one InferenceService's pods get their weights."""

    model_arg: str
    scheme: str
    revision: str | None = None
    download_dir: str | None = None
    load_format: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()
    credentials_as_env_from: bool = False
    # Local paths of LoRA adapters when they are pre-cached (adapter name -> path).
    lora_paths: tuple[tuple[str, str], ...] = ()


def _split(source: str) -> tuple[str, str]:
    scheme, _, rest = source.partition("://")
    return scheme, rest


def resolve(service: InferenceService, settings: OperatorSettings) -> ModelSource:
    """The model argument, cache mount and environment for vLLM."""
    spec = service.spec
    scheme, location = _split(spec.model.source) if spec.model.source else ("hf", spec.model.name)
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    env: list[tuple[str, str]] = []
    revision = None
    load_format = None
    download_dir = None
    credentials_as_env_from = False

    if scheme == "hf":
        model_arg = location
        revision = spec.model.revision
    elif scheme == "pvc":
        claim, _, sub_path = location.partition("/")
        claim_source = {"claimName": claim, "readOnly": True}
        volumes.append({"name": SOURCE_VOLUME, "persistentVolumeClaim": claim_source})
        mounts.append({"name": SOURCE_VOLUME, "mountPath": SOURCE_MOUNT_PATH, "readOnly": True})
        model_arg = f"{SOURCE_MOUNT_PATH}/{sub_path}".rstrip("/")
    elif scheme in {"s3", "gs"}:
        # vLLM streams safetensors straight from object storage with the Run:ai
        # streamer; the credentials secret's keys (AWS_* / GOOGLE_*) become env vars.
        model_arg = f"{scheme}://{location}"
        load_format = "runai_streamer"
        credentials_as_env_from = spec.model.credentials_secret_ref is not None
    else:  # file://: a path already present in the image or on the node
        model_arg = "/" + location.lstrip("/")

    cached = cache_objects.serving(service, settings)
    if cached is not None:
        # Weights are pre-cached (node-local NVMe or a shared claim, issue 5): vLLM loads
        # the verified local revision and never reaches out to a hub or a bucket.
        model_arg, revision, load_format, credentials_as_env_from = cached.model_path, None, None, False
        volumes, mounts = list(cached.volumes), list(cached.mounts)
        env.extend(cached.env)

    return ModelSource(
        model_arg=model_arg,
        scheme=scheme,
        revision=revision,
        download_dir=download_dir,
        load_format=load_format,
        env=tuple(env),
        volumes=tuple(volumes),
        mounts=tuple(mounts),
        credentials_as_env_from=credentials_as_env_from,
        lora_paths=tuple(sorted(cached.adapter_paths.items())) if cached is not None else (),
    )
