"""The per-GPU memory budget as vLLM computes it at startup.

`available KV = total × gpu_memory_utilization − (weights + activation peak + non-torch
+ CUDA-graph reserve)` per worker, and the engine sizes every worker from the smallest
(docs/concepts/planning.md, "What the figures mean"). What each term holds depends on the release:
planner.accounting says how the tier's vLLM counts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.catalog.models import LayerKind, ModelArch
from inferfleet.planner.accounting import (
    SAMPLER_BYTES_FLASHINFER,
    WARMUP_BYTES_PER_LOGIT,
    WARMUP_MARGIN_GIB,
    Accounting,
)
from inferfleet.planner.kv import KvPool, kv_pool
from inferfleet.planner.units import GIB
from inferfleet.planner.weights import WeightLayout

# Activation peak of the profiling pass. vLLM profiles a forward pass over
# max_num_batched_tokens tokens (V0 spreads them over max_num_seqs sequences, without
# chunked prefill that is the whole max_model_len) and then a dummy sampling step over
# max_num_seqs rows; the peak is the larger of the two (the forward pass's tensors are
# freed before sampling). Per forward token, the MLP holds its input, the fused gate/up
# output and the activated output (3 × intermediate / TP) plus about three hidden-width
# buffers. Fitted to V0 profiles of Llama-3.1-8B at 20k and 29k batched tokens (2.07 and
# 2.99 GiB, vLLM issue #10517), i.e. ≈108 KiB per token.
FORWARD_HIDDEN_BUFFERS = 3
FORWARD_MLP_BUFFERS = 3


def forward_activation_bytes(arch: ModelArch, tp: int, batched_tokens: int, act_bytes: int) -> float:
    hidden = arch.hidden_size
    if arch.moe is not None:
        moe = arch.moe
        width = moe.experts_per_token * moe.expert_intermediate_size + moe.shared_intermediate_size
        # fused MoE keeps one hidden-width output per routed copy of each token
        extra = moe.experts_per_token * hidden
    else:
        width = arch.intermediate_size
        extra = 0
    per_token = act_bytes * (FORWARD_MLP_BUFFERS * width / tp + FORWARD_HIDDEN_BUFFERS * hidden + extra)
    return batched_tokens * per_token


def sampler_activation_bytes(
    arch: ModelArch, max_num_seqs: int, batched_tokens: int, act_bytes: int, bytes_per_logit: float
) -> float:
    # The sampling step runs with the forward pass's final hidden states still alive.
    rows = min(max_num_seqs, batched_tokens)
    return bytes_per_logit * rows * arch.vocab_size + batched_tokens * arch.hidden_size * act_bytes


@dataclass(frozen=True, slots=True)
class StageMemory:
    weights_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    graph_reserve_bytes: float
    reserve_bytes: float  # held back for a release outside the modelled range
    kv_bytes: float
    num_blocks: int
    pool: KvPool


@dataclass(frozen=True, slots=True)
class Warmup:
    """What a V1 worker allocates after the KV cache is sized, against what the budget
    leaves outside itself (`total × (1 − gpu_memory_utilization)`), on the last stage."""

    rows: int  # min(max_num_seqs, max_num_batched_tokens), as the worker warms up
    vocab_size: int
    sampler_bytes: float  # the sampler warm-up's peak the activation reserve may not hold
    graphs_bytes: float  # the CUDA-graph pool, where captured outside the budget
    fixed_bytes: float  # CUDA context + vLLM's redundancy buffer
    outside_bytes: float  # what the budget leaves of the GPU
    activation_bytes: float  # the freed activation reserve (a last resort for the peak)
    # False where the profile never ran the warm-up's pipeline (0.22-0.32's Model Runner
    # V2): the reserve was sized without it, so it cannot be counted on.
    reserve_usable: bool = True

    @property
    def leftover_bytes(self) -> float:
        return self.outside_bytes - self.fixed_bytes - self.graphs_bytes - self.sampler_bytes

    @property
    def fails(self) -> bool:
        """It cannot fit even by reusing the whole activation reserve: vLLM OOMs."""
        reserve = self.activation_bytes if self.reserve_usable else 0.0
        return self.leftover_bytes + reserve < 0

    @property
    def at_risk(self) -> bool:
        return self.sampler_bytes + self.graphs_bytes > 0 and self.leftover_bytes < WARMUP_MARGIN_GIB * GIB


NO_WARMUP = Warmup(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)


def warmup_after_kv(
    arch: ModelArch,
    accounting: Accounting,
    *,
    total_bytes: float,
    budget_bytes: float,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    activation_bytes: float,
    enforce_eager: bool,
) -> Warmup:
    if not accounting.warmup_after_kv:
        return NO_WARMUP
    rows = min(max_num_seqs, max_num_batched_tokens)
    sampler = rows * arch.vocab_size * WARMUP_BYTES_PER_LOGIT if accounting.warmup_outside_reserve else 0.0
    return Warmup(
        rows=rows,
        vocab_size=arch.vocab_size,
        sampler_bytes=sampler,
        graphs_bytes=accounting.graphs_outside_budget_bytes(max_num_seqs, enforce_eager),
        fixed_bytes=accounting.outside_budget_fixed_bytes,
        outside_bytes=total_bytes - budget_bytes,
        activation_bytes=activation_bytes,
        reserve_usable=not accounting.warmup_unprofiled,
    )


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """What vLLM will report at startup for one replica."""

    binding: StageMemory  # the worker with the fewest blocks (it sizes the engine)
    num_blocks: int
    kv_tokens: int
    max_concurrency: float  # at max_model_len, as vLLM prints it
    max_model_len: int
    max_num_batched_tokens: int
    warmup: Warmup = NO_WARMUP
    # How much of the planned activation peak is the sampler's sort path beyond what
    # FlashInfer's sampler holds: KV vLLM may report on top of the plan (never less).
    sampler_spread_bytes: float = 0.0

    @property
    def starts(self) -> bool:
        """vLLM refuses to start when one max-length request does not fit, and OOMs when
        its warm-up after KV sizing cannot be held."""
        return self.binding.kv_bytes > 0 and self.max_concurrency >= 1.0 and not self.warmup.fails

    def concurrency_at(self, tokens: int) -> float:
        return self.binding.pool.concurrency(
            self.num_blocks, min(tokens, self.max_model_len), self.max_num_batched_tokens
        )


def _stage_pool(  # noqa: PLR0917 - the pool's geometry, passed through from estimate
    arch: ModelArch,
    kinds: tuple[LayerKind, ...],
    tp: int,
    kv_element_bytes: int,
    block_size: int,
    accounting: Accounting,
) -> KvPool:
    """One stage's pool, grouped as the release's hybrid KV-cache manager groups it."""
    return kv_pool(
        arch,
        kinds,
        tp,
        kv_element_bytes,
        block_size,
        hybrid=accounting.hybrid_pool,
        mla_align_bytes=accounting.mla_align_bytes,
        group_ratio=accounting.group_larger_within_ratio,
    )


def _activation_peaks(
    arch: ModelArch,
    accounting: Accounting,
    tp: int,
    act_bytes: int,
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> tuple[float, float, float]:
    """The profile's forward and sampler peaks (allocator slack included), and how much of
    the sampler's may be the sort path's surplus over FlashInfer's (the tight-fit note)."""
    slack = 1.0 + accounting.allocator_slack
    forward = forward_activation_bytes(arch, tp, max_num_batched_tokens, act_bytes) * slack
    sampler = (
        sampler_activation_bytes(
            arch, max_num_seqs, max_num_batched_tokens, act_bytes, accounting.sampler_bytes_per_logit
        )
        * slack
    )
    spread = 0.0
    if accounting.engine == "v1" and sampler > forward:
        rows = min(max_num_seqs, max_num_batched_tokens)
        per_logit = max(0.0, accounting.sampler_bytes_per_logit - SAMPLER_BYTES_FLASHINFER)
        spread = min(sampler - forward, rows * arch.vocab_size * per_logit * slack)
    return forward, sampler, spread


def _non_torch_bytes(  # noqa: PLR0917 - the layout's figures, passed through from estimate
    arch: ModelArch,
    layout: WeightLayout,
    accounting: Accounting,
    tp: int,
    batched_tokens: int,
    act_bytes: int,
) -> float:
    """Non-torch memory of every stage (the last stage's runner state comes on top)."""
    overhead = accounting.non_torch_bytes(tp, len(layout.stage_layers))
    if accounting.retained_allreduce and tp > 1:
        # two all-reduces per layer, each holding the step's hidden states
        overhead += 2 * max(layout.stage_layers) * batched_tokens * arch.hidden_size * act_bytes
    return overhead


def estimate(
    arch: ModelArch,
    layout: WeightLayout,
    *,
    tp: int,
    total_memory_gib: float,
    gpu_memory_utilization: float,
    kv_element_bytes: int,
    act_bytes: int,
    block_size: int,
    max_model_len: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    accounting: Accounting,
    enforce_eager: bool = False,
    extra_weight_bytes: float = 0.0,
    extra_kv_layers: int = 0,
) -> MemoryEstimate:
    """`extra_weight_bytes`: per-GPU memory loaded with the model (LoRA slots, a draft
    model), which vLLM counts in its "model loading took" line; `extra_kv_layers`: a
    drafter's attention layers, which share the last stage's KV pool."""
    budget = total_memory_gib * GIB * gpu_memory_utilization
    stages: list[StageMemory] = []
    forward, sampler, spread = _activation_peaks(
        arch,
        accounting,
        tp,
        act_bytes,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    pp = len(layout.stage_layers)
    overhead = _non_torch_bytes(arch, layout, accounting, tp, max_num_batched_tokens, act_bytes)
    graphs = accounting.graph_reserve_bytes(max_num_seqs, enforce_eager)
    reserve = budget * accounting.release.reserve_fraction
    first = 0
    last_stage = pp - 1
    runner_state = accounting.runner_state_bytes(max_num_seqs, arch.vocab_size)
    for stage, count in enumerate(layout.stage_layers):
        activation = max(forward, sampler) if stage == last_stage else forward
        stage_overhead = overhead + (runner_state if stage == last_stage else 0.0)
        stage_kinds = arch.kinds[first : first + count]
        if stage == last_stage and extra_kv_layers:
            full: LayerKind = "full"
            stage_kinds = stage_kinds + (full,) * extra_kv_layers
        pool = _stage_pool(arch, stage_kinds, tp, kv_element_bytes, block_size, accounting)
        weights = layout.stage_bytes_per_gpu[stage] + extra_weight_bytes
        kv_bytes = budget - weights - activation - stage_overhead - graphs - reserve
        stages.append(
            StageMemory(
                weights_bytes=weights,
                activation_bytes=activation,
                non_torch_bytes=stage_overhead,
                graph_reserve_bytes=graphs,
                reserve_bytes=reserve,
                kv_bytes=kv_bytes,
                num_blocks=pool.num_blocks(kv_bytes),
                pool=pool,
            )
        )
        first += count
    binding = min(stages, key=lambda s: (s.num_blocks, s.kv_bytes))
    warmup = warmup_after_kv(
        arch,
        accounting,
        total_bytes=total_memory_gib * GIB,
        budget_bytes=budget,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        activation_bytes=stages[-1].activation_bytes,
        enforce_eager=enforce_eager,
    )
    return MemoryEstimate(
        binding=binding,
        num_blocks=binding.num_blocks,
        kv_tokens=binding.pool.tokens(binding.num_blocks),
        max_concurrency=binding.pool.concurrency(binding.num_blocks, max_model_len, max_num_batched_tokens),
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        warmup=warmup,
        sampler_spread_bytes=spread,
    )
