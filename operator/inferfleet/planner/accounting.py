"""How one vLLM release counts memory before it sizes the KV cache (pure).

`accounting(release, ...)` turns a release (planner.releases) into the handful of
numbers the memory model needs; everything release-specific lives here, so memory.py
stays one formula: `KV = total × utilization − weights − activation peak − non-torch
− CUDA-graph reserve − reserve`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from inferfleet.planner.releases import (
    HYBRID_ALLOCATOR,
    TORCH_ONLY_PEAK_UNTIL,
    V0_MLA_ALIGNMENT,
    Engine,
    Family,
    Release,
    Version,
)
from inferfleet.planner.units import GIB

# Bytes the profiling pass's sampling step holds per logit (max_num_seqs × vocab rows):
# V1's PyTorch top-k/top-p path sorts the float32 logits (values + int64 indices) next to
# probabilities: vLLM 0.11 on H100 logged 4.76, 5.56, 5.64 and 7.38 GiB for 1024 rows of
# 128k, 152k, 152k and 201k vocabularies, 38.5-39 bytes each. FlashInfer's kernels skip
# the sort (about 12 bytes: 0.10.1 on A100 with flashinfer-python installed), but which
# one a release picks depends on what the image installed and on VLLM_USE_FLASHINFER_SAMPLER
# (0.9.2 on H100 logged the larger peak), so the larger is planned: an install with
# FlashInfer gets up to ~1 GiB (256 rows) or ~4 GiB (1024 rows) more KV than planned.
# V0's sampler sorts and also keeps log-probs.
SAMPLER_BYTES_V1 = 39.0
SAMPLER_BYTES_V0 = 32.0
# Non-torch memory per GPU by tensor-parallel degree (CUDA graphs excluded): cuBLAS
# workspaces, NCCL communicators and custom all-reduce buffers. Public logs: 0.13-0.15
# GiB at TP 1, 0.54-0.55 at TP 2, 0.85-1.0 at TP 4, up to 2.2 at TP 8 (the upper end is
# taken there: an under-estimate over-promises KV).
NON_TORCH_BY_TP_GIB = {1: 0.15, 2: 0.55, 4: 1.0, 8: 2.0}
NON_TORCH_PER_EXTRA_RANK_GIB = 0.25  # beyond TP 8 (multi-node TP)
PIPELINE_STAGE_NON_TORCH_GIB = 0.1  # NCCL send/receive buffers between stages
# The V1 worker of 0.8.0-0.9.1 counted all device memory beyond torch's tensors as
# non-torch, the process's own CUDA context (≈0.5 GiB with torch 2.6) included.
CUDA_CONTEXT_GIB = 0.5
# V0 up to 0.6.3 took the drop in free memory, so torch's caching-allocator slack over
# the allocated activation peak counted too.
LEGACY_ALLOCATOR_SLACK = 0.10
# CUDA-graph reserve (0.21+): vLLM estimates the graph pool before sizing the KV cache.
# Public startup logs estimate 0.26-0.36 GiB; capture deltas measured on 0.11 reach
# 1.03 GiB for a 120B MoE. Taken as 0.25 GiB plus up to 0.75 GiB for the largest
# captured batch (512 sequences or more).
GRAPH_RESERVE_BASE_GIB = 0.25
GRAPH_RESERVE_FULL_BATCH_GIB = 0.75
GRAPH_CAPTURE_FULL_BATCH = 512
# vLLM stopped holding all-reduce inputs during the profile after 0.2.x.
ALLREDUCE_FREED = Version(0, 3, 0)
# V0's MLA backends pad each cached latent entry to this many bytes.
MLA_ALIGN_BYTES = 256


@dataclass(frozen=True, slots=True)
class Accounting:
    """What the release counts before KV sizing, for one parallel layout."""

    release: Release
    engine: Engine
    sampler_bytes_per_logit: float
    non_torch_extra_bytes: float
    torch_only_peak: bool
    allocator_slack: float
    graph_reserve: bool
    hybrid_pool: bool
    mla_align_bytes: int
    # 0.2.5-0.2.x counted every all-reduce input of the profile as in use: torch kept
    # them alive until the next synchronisation (vLLM issue #2150).
    retained_allreduce: bool = False

    @property
    def family(self) -> Family:
        return self.release.family

    def non_torch_bytes(self, tp: int, pp: int) -> float:
        if self.torch_only_peak:
            return 0.0
        if tp in NON_TORCH_BY_TP_GIB:
            gib = NON_TORCH_BY_TP_GIB[tp]
        elif tp < 8:
            below = max(k for k in NON_TORCH_BY_TP_GIB if k < tp)
            above = min(k for k in NON_TORCH_BY_TP_GIB if k > tp)
            share = (tp - below) / (above - below)
            gib = NON_TORCH_BY_TP_GIB[below] + share * (
                NON_TORCH_BY_TP_GIB[above] - NON_TORCH_BY_TP_GIB[below]
            )
        else:
            gib = NON_TORCH_BY_TP_GIB[8] + NON_TORCH_PER_EXTRA_RANK_GIB * (tp - 8)
        if pp > 1:
            gib += PIPELINE_STAGE_NON_TORCH_GIB
        return gib * GIB + self.non_torch_extra_bytes

    def graph_reserve_bytes(self, max_num_seqs: int, enforce_eager: bool) -> float:
        if not self.graph_reserve or enforce_eager:
            return 0.0
        share = min(1.0, max_num_seqs / GRAPH_CAPTURE_FULL_BATCH)
        return (GRAPH_RESERVE_BASE_GIB + GRAPH_RESERVE_FULL_BATCH_GIB * share) * GIB


@functools.lru_cache(maxsize=512)
def accounting(release: Release, *, pipeline_parallel: int = 1, vendor: str = "nvidia") -> Accounting:
    engine = release.engine(pipeline_parallel)
    return Accounting(
        release=release,
        engine=engine,
        sampler_bytes_per_logit=SAMPLER_BYTES_V0 if engine == "v0" else SAMPLER_BYTES_V1,
        retained_allreduce=release.at_least(TORCH_ONLY_PEAK_UNTIL) and release.before(ALLREDUCE_FREED),
        non_torch_extra_bytes=CUDA_CONTEXT_GIB * GIB
        if release.family == "v1-early" and engine == "v1"
        else 0.0,
        torch_only_peak=release.before(TORCH_ONLY_PEAK_UNTIL),
        allocator_slack=LEGACY_ALLOCATOR_SLACK if release.family == "v0-legacy" else 0.0,
        graph_reserve=release.family == "v1-graph-reserve" and engine == "v1",
        hybrid_pool=engine == "v1" and release.at_least(HYBRID_ALLOCATOR),
        mla_align_bytes=MLA_ALIGN_BYTES if engine == "v0" and release.at_least(V0_MLA_ALIGNMENT) else 0,
    )
