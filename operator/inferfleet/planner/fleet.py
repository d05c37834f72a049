"""Fleet sizing, cold start and cost of one tier."""

from __future__ import annotations

import math

from inferfleet.api.spec import CacheSpec
from inferfleet.planner.units import GB

# Effective read bandwidth of the weight source, GB/s (typical published figures):
# local NVMe (PCIe Gen4) ~12.5, network-attached storage (10 GbE) ~1.1, object storage
# or the Hub with container init ~0.5-1.0 (0.75 taken).
STORAGE_GBPS = {"nvme": 12.5, "pvc": 1.1, "none": 0.75}
STORAGE_NAMES = {"nvme": "node-local NVMe", "pvc": "a network volume", "none": "object storage / the Hub"}
# Fixed start-up work around the weight load: container start, Python and CUDA init,
# memory profiling (about 30 s together); torch.compile and CUDA-graph capture unless
# eager (about 30 s: ~20 s compiling, Dynamo 4.6-15 s plus Inductor ~15-70 s the first
# time, and ~10 s capturing, 10-60 s in public logs); multi-node replicas add worker
# rendezvous (about 20 s). These are our estimates of typical vLLM start-up logs, not
# measured figures. With a warm compile cache the compile part shrinks (planner.startup).
INIT_S = 30.0
COMPILE_S = 20.0
CUDA_GRAPHS_S = 10.0
GRAPH_CAPTURE_S = COMPILE_S + CUDA_GRAPHS_S
MULTI_NODE_S = 20.0
# Default safety factor over peak when spec.scaling.headroom is unset: 20 %, for peaks
# that exceed their estimate, rolling restarts and longer prompts than planned. It is
# the operator's default `headroom` setting, which the live autoscaler uses only as a
# prior until it has measured a service's own forecast error
# (docs/concepts/autoscaling.md, "Headroom from the measured forecast error").
DEFAULT_HEADROOM = 0.2


def storage_bandwidth_gbps(cache: CacheSpec | None) -> tuple[float, str]:
    mode = cache.mode if cache is not None else "nvme"
    if cache is not None and cache.storage_bandwidth_g_bps is not None:
        return (cache.storage_bandwidth_g_bps, f"the cache's stated {cache.storage_bandwidth_g_bps:g} GB/s")
    return (STORAGE_GBPS[mode], f"{STORAGE_NAMES[mode]} at ~{STORAGE_GBPS[mode]:g} GB/s")


def cold_start_seconds(
    checkpoint_bytes: float, nodes: int, bandwidth_gbps: float, enforce_eager: bool
) -> float:
    # Each node of a multi-node replica reads only its own stages' share.
    load_s = checkpoint_bytes / max(1, nodes) / (bandwidth_gbps * GB)
    return (
        load_s + INIT_S + (0.0 if enforce_eager else GRAPH_CAPTURE_S) + (MULTI_NODE_S if nodes > 1 else 0.0)
    )


def replicas_for_peak(peak_rps: float, usable_rps: float, headroom: float) -> int:
    if peak_rps <= 0:
        return 0
    if usable_rps <= 0:
        return 0
    return max(1, math.ceil(peak_rps * (1 + headroom) / usable_rps - 1e-9))


def cost_per_million_tokens(
    cost_per_gpu_hour: float | None, gpus: int, usable_rps: float, tokens_per_request: float
) -> float | None:
    if cost_per_gpu_hour is None or usable_rps <= 0 or tokens_per_request <= 0:
        return None
    tokens_per_hour = usable_rps * tokens_per_request * 3600
    return cost_per_gpu_hour * gpus / tokens_per_hour * 1e6
