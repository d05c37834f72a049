"""Where vLLM reads the weights from, derived from `spec.model.source` and `spec.cache`.

One place decides the model argument, the volumes that hold weights and the
environment that goes with them, so the cache work (issue 5) changes one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService
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

    cache = spec.cache
    cache_mode = cache.mode if cache is not None else "nvme"
    if scheme == "hf" and cache_mode in {"nvme", "pvc"}:
        # Weights are pre-cached (node-local NVMe or a shared claim); vLLM reads that
        # copy and never reaches out to the hub, so a hub outage cannot stop a start.
        if cache_mode == "nvme":
            node_path = settings.cache_node_path
            if cache is not None and cache.node_path:
                node_path = cache.node_path
            host_path = {"path": node_path, "type": "DirectoryOrCreate"}
            volumes.append({"name": CACHE_VOLUME, "hostPath": host_path})
        else:
            cache_claim = {"claimName": cache.pvc_name if cache is not None else None, "readOnly": True}
            volumes.append({"name": CACHE_VOLUME, "persistentVolumeClaim": cache_claim})
        mounts.append({"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH, "readOnly": True})
        download_dir = CACHE_MOUNT_PATH
        env.append(("HF_HUB_OFFLINE", "1"))

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
    )
