"""Host memory a serving pod asks for (pure): its request, its limit, its host KV tier.

The request holds a base for the engine's host side plus a share per GPU, and the pod's
share of a host-memory KV tier (planner.host_kv); the limit adds one host-side copy of
the pod's weights, since loading streams each worker's shard through host memory (and
online quantization, e.g. fp8 from a bf16 checkpoint, holds the unquantized tensors
there first). The planner sizes the host tier against these, and the renderer writes
them into the pod; one place, so the two agree.
"""

from __future__ import annotations

import math

from inferfleet.api.plan import TierPlan

CPU_PER_GPU = 4
MEMORY_BASE_GIB = 16
MEMORY_PER_GPU_GIB = 8


def gpus_per_pod(plan: TierPlan) -> int:
    return max(1, plan.gpus_per_replica // max(1, plan.nodes_per_replica))


def host_kv_per_pod_gib(plan: TierPlan) -> int:
    """Each pod's share of the replica's host KV tier (whole GiB, rounded up)."""
    return math.ceil(plan.host_kv_cache_gi_b / max(1, plan.nodes_per_replica))


def memory_request_gib(plan: TierPlan) -> int:
    return MEMORY_BASE_GIB + MEMORY_PER_GPU_GIB * gpus_per_pod(plan) + host_kv_per_pod_gib(plan)


def memory_limit_gib(plan: TierPlan) -> int:
    """Default memory limit: the request plus one host-side copy of this pod's weights."""
    weights_gib = plan.memory_gi_b.weights * gpus_per_pod(plan)
    return memory_request_gib(plan) + math.ceil(weights_gib)
