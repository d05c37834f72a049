"""How one vLLM release counts memory before it sizes the KV cache (pure).

`accounting(release, ...)` turns a release (planner.releases) into the handful of
numbers the memory model needs; everything release-specific lives here, so memory.py
stays one formula: `KV = total × utilization − weights − activation peak − non-torch
− CUDA-graph reserve − reserve`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from inferfleet.catalog.models import ModelArch
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
SAMPLER_BYTES_FLASHINFER = 12.0  # the lower end above; what a plan may leave unused
SAMPLER_BYTES_V0 = 32.0
# Model Runner V2's profile (vllm/v1/worker/gpu/model_runner.py `_dummy_sampler_run`,
# 0.22-0.32) samples its dummy batch greedily with every request's default parameters:
# no fp32 copy, no top-k/top-p sort, only the logits in the model's 16-bit dtype. From
# 0.33 it also runs the warm-up's fp32 pipeline (`v2ProfilePaysFp32Logits`), which
# holds what V1's sampler holds.
SAMPLER_BYTES_V2_PROFILE = 2.0
# The architectures vLLM lists for Model Runner V2 by default, by config.json
# model_type (the catalog keeps model_type, not the architecture class).
ARCHITECTURE_OF_MODEL_TYPE = {
    "qwen3": "Qwen3ForCausalLM",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "granitemoe": "GraniteMoeForCausalLM",
}
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
# After the KV cache is sized, the V1 worker captures CUDA graphs (outside the budget
# where the release does not estimate them first) and then warms the sampler up with
# min(max_num_seqs, max_num_batched_tokens) rows (vllm/v1/worker/gpu_worker.py
# compile_or_warm_up_model, every V1 release in catalog/data/vllm_releases.json). That
# warm-up holds the fp32 logits (4 B per logit) and the top-k/top-p sort's float32 values
# and int64 indices (12 B: the "Tried to allocate 1.74 GiB" of the sampler-warm-up OOMs
# in vLLM issue #15105 is 1024 × 151,936 × 12 B). The profile runs the same sampler, but
# the graph pool and the allocator's split blocks can take the freed activation reserve
# first (starts at 0.95 with 1024 rows OOM there: llm-d/llm-d#787, issue 30's gpt-oss-20b
# runs), so the planner wants that peak to fit outside the budget too.
WARMUP_BYTES_PER_LOGIT = 16.0
# Outside the budget besides: the CUDA context created before vLLM's first memory
# snapshot (so never counted, V1 from 0.10), and the redundancy buffer vLLM itself asks
# to leave (150 MiB, "profiling may slightly underestimate": gpu_worker.py).
DEFAULT_REDUNDANCY_MIB = 150
# Below this much room after the warm-up a start is flagged at risk: the OOM reports
# show 0.19-0.6 GiB reserved-but-unallocated (allocator fragmentation) at the failure.
WARMUP_MARGIN_GIB = 0.5
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
    # V1: the sampler warm-up and (when not reserved) the graph pool come after the KV
    # cache is sized; what else sits outside the budget (CUDA context, vLLM's buffer).
    warmup_after_kv: bool = False
    # The warm-up's sampler peak is not covered by the activation reserve: the default
    # model runner's profile skipped the fp32 sampling pipeline (0.22-0.32), or the graph
    # pool is captured after KV sizing and may take the freed reserve first (V1 < 0.20).
    warmup_outside_reserve: bool = False
    warmup_unprofiled: bool = False  # the profile skipped the warm-up's fp32 pipeline
    outside_budget_fixed_bytes: float = 0.0
    # The largest captured batch is min(2 × max_num_seqs, cap) (the release's config;
    # reported beside the plan, the pool estimate above stays a fit to logged pools).
    graph_capture_cap: int = GRAPH_CAPTURE_FULL_BATCH
    # Hybrid KV grouping: the larger layer count is the group size when it is within
    # this ratio of the smaller (None: always the smaller; kv_cache_utils/planning.py).
    group_larger_within_ratio: float | None = 1.25
    # Model Runner V2 runs this model: its sampler keeps penalty state for every sequence
    # slot (max_num_seqs × vocabulary entries, this many bytes each) on the last stage,
    # allocated after the worker's first memory snapshot, so counted as used memory.
    model_runner_v2: bool = False
    runner_state_bytes_per_logit: float = 0.0

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

    def runner_state_bytes(self, max_num_seqs: int, vocab_size: int) -> float:
        """What the model runner keeps allocated per sequence slot (last stage)."""
        return self.runner_state_bytes_per_logit * max_num_seqs * vocab_size

    def graph_pool_bytes(self, max_num_seqs: int, enforce_eager: bool) -> float:
        """The CUDA-graph pool of the captured batch sizes (0 when eager)."""
        if enforce_eager:
            return 0.0
        share = min(1.0, max_num_seqs / GRAPH_CAPTURE_FULL_BATCH)
        return (GRAPH_RESERVE_BASE_GIB + GRAPH_RESERVE_FULL_BATCH_GIB * share) * GIB

    def graph_reserve_bytes(self, max_num_seqs: int, enforce_eager: bool) -> float:
        if not self.graph_reserve:
            return 0.0
        return self.graph_pool_bytes(max_num_seqs, enforce_eager)

    def graphs_outside_budget_bytes(self, max_num_seqs: int, enforce_eager: bool) -> float:
        """V1 releases that capture graphs after KV sizing without estimating them."""
        if self.graph_reserve or self.engine != "v1":
            return 0.0
        return self.graph_pool_bytes(max_num_seqs, enforce_eager)


def runs_model_runner_v2(
    release: Release, *, model_type: str, moe: bool, weight_format: str, pipeline_parallel: int = 1
) -> bool:
    """Whether the release runs this model on Model Runner V2 by default (the release's
    `use_v2_model_runner` / `_is_default_v2_model_runner_model`, read into the release
    table). Features that send a model back to V1 (ngram speculation before 0.33, custom
    logits processors, prompt embeds, ...) are not modelled."""
    if not release.modelled or release.engine(pipeline_parallel) != "v1":
        return False
    facts = release.facts
    if facts is None:
        return False
    listed = ARCHITECTURE_OF_MODEL_TYPE.get(model_type, "") in facts.v2_default_architectures
    scope = facts.v2_default_scope
    if scope == "all":
        return True
    if scope == "dense-or-listed":
        return listed or not moe
    if scope == "listed-dense-unquantized":
        return listed and not moe and weight_format == "none"
    if scope == "listed":
        return listed
    return False


@functools.lru_cache(maxsize=512)
def accounting(
    release: Release, *, pipeline_parallel: int = 1, vendor: str = "nvidia", model_runner_v2: bool = False
) -> Accounting:
    """`model_runner_v2`: the model runs on Model Runner V2 (runs_model_runner_v2)."""
    engine = release.engine(pipeline_parallel)
    facts = release.facts if release.modelled else None
    graph_reserve = release.family == "v1-graph-reserve" and engine == "v1"
    ratio: float | None = 1.25
    cap = GRAPH_CAPTURE_FULL_BATCH
    redundancy_mib = DEFAULT_REDUNDANCY_MIB
    if facts is not None and engine == "v1":
        # The release's own source decides (catalog/data/vllm_releases.json).
        graph_reserve = facts.graph_estimated_before_kv
        ratio = facts.group_larger_within_ratio
        cap = facts.graph_capture_cap or cap
        redundancy_mib = facts.redundancy_buffer_mib or redundancy_mib
    context_outside = engine == "v1" and release.family != "v1-early"
    runner_v2 = model_runner_v2 and facts is not None and engine == "v1"
    sampler_bytes = SAMPLER_BYTES_V0 if engine == "v0" else SAMPLER_BYTES_V1
    unprofiled_logits = False
    runner_state = 0.0
    if runner_v2 and facts is not None:
        # Model Runner V2: its profile estimates no graph pool up to 0.28
        # (`profile_cudagraph_memory` returns 0), and samples with 16-bit logits only
        # unless the release's profile also pays the warm-up's fp32 pipeline.
        graph_reserve = graph_reserve and facts.v2_graph_estimate
        unprofiled_logits = facts.sampler_warmup_after_kv and not facts.v2_profile_pays_fp32_logits
        if unprofiled_logits:
            sampler_bytes = SAMPLER_BYTES_V2_PROFILE
        runner_state = facts.v2_penalty_state_bytes_per_logit
    return Accounting(
        release=release,
        engine=engine,
        sampler_bytes_per_logit=sampler_bytes,
        retained_allreduce=release.at_least(TORCH_ONLY_PEAK_UNTIL) and release.before(ALLREDUCE_FREED),
        non_torch_extra_bytes=CUDA_CONTEXT_GIB * GIB
        if release.family == "v1-early" and engine == "v1"
        else 0.0,
        torch_only_peak=release.before(TORCH_ONLY_PEAK_UNTIL),
        allocator_slack=LEGACY_ALLOCATOR_SLACK if release.family == "v0-legacy" else 0.0,
        graph_reserve=graph_reserve,
        warmup_after_kv=engine == "v1",
        warmup_outside_reserve=engine == "v1" and (unprofiled_logits or not graph_reserve),
        warmup_unprofiled=engine == "v1" and unprofiled_logits,
        outside_budget_fixed_bytes=(CUDA_CONTEXT_GIB * GIB if context_outside else 0.0)
        + redundancy_mib * (1 << 20),
        graph_capture_cap=cap,
        group_larger_within_ratio=ratio,
        hybrid_pool=engine == "v1" and release.at_least(HYBRID_ALLOCATOR),
        mla_align_bytes=MLA_ALIGN_BYTES if engine == "v0" and release.at_least(V0_MLA_ALIGNMENT) else 0,
        model_runner_v2=runner_v2,
        runner_state_bytes_per_logit=runner_state,
    )


def model_accounting(
    release: Release,
    arch: ModelArch,
    *,
    weight_format: str,
    pipeline_parallel: int = 1,
    vendor: str = "nvidia",
) -> Accounting:
    """The accounting of `release` for this model in this weight format (which model
    runner the release picks for it included)."""
    runner_v2 = runs_model_runner_v2(
        release,
        model_type=arch.model_type,
        moe=arch.moe is not None,
        weight_format=weight_format,
        pipeline_parallel=pipeline_parallel,
    )
    return accounting(release, pipeline_parallel=pipeline_parallel, vendor=vendor, model_runner_v2=runner_v2)
