"""What a tier's vLLM build needs from its pod (pure); which build it is, design.images."""

from __future__ import annotations

from inferfleet.catalog.gpus import GpuSpec
from inferfleet.config import OperatorSettings
from inferfleet.design.images import AMD


def supplemental_groups(gpu: GpuSpec | None, settings: OperatorSettings) -> list[int]:
    """Extra groups a non-root vLLM process needs to open its GPU's device nodes.

    AMD: the device plugin hands the container /dev/kfd and /dev/dri/renderD<N> with their
    host ownership (root:render 0660; card nodes root:video), and ROCm opens both
    (ROCm docs, "Running ROCm Docker containers": --device /dev/kfd --device /dev/dri
    --group-add video; ROCm/ROCm-docker#90: non-root users also need render). The GIDs
    are the hosts' (settings.amd_supplemental_groups). NVIDIA's container toolkit gives
    the container device nodes it can open, so no groups there. Root needs none.
    """
    if settings.vllm_run_as_root or gpu is None or gpu.vendor != AMD:
        return []
    return list(settings.amd_supplemental_groups)
