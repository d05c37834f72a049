"""The per-GPU memory budget as vLLM computes it at startup.

`available KV = total × gpu_memory_utilization − (weights + activation peak + non-torch)`
per worker, and the engine sizes every worker from the smallest
(shared/reference/vllm-kv-budget.md §2.2). CUDA graphs are captured after the KV cache
is allocated in the releases we target, so they sit outside this budget (§3.2); the
headroom left by gpu-memory-utilization has to hold them.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.catalog.models import ModelArch
from inferfleet.planner.kv import KvPool, kv_pool
from inferfleet.planner.units import GIB
from inferfleet.planner.weights import WeightLayout

# Activation peak of the profiling pass. vLLM profiles a forward pass over
# max_num_batched_tokens tokens and then a dummy sampling step over max_num_seqs rows;
# the peak is the larger of the two (the forward pass's tensors are freed before
# sampling). Per forward token, the MLP holds its input, the fused gate/up output and
# the activated output (3 × intermediate / TP) plus about three hidden-width buffers.
# Fitted to the V0 profiles in shared/data/vllm_kv_calibration.csv (Llama-3.1-8B at
# 20k and 29k batched tokens: 2.07 and 2.99 GiB, i.e. ≈108 KiB per token).
FORWARD_HIDDEN_BUFFERS = 3
FORWARD_MLP_BUFFERS = 3
# The sampling step keeps float32 logits, top-k/top-p sort values and int64 indices,
# and probabilities for max_num_seqs × vocab entries. v0.11 H100 logs show ≈39 bytes
# per entry (Llama-3.1-8B 4.76 GiB, Qwen3-32B 5.64 GiB at 1024 seqs), v0.10 A100 logs
# ≈12 (FlashInfer sampling, no sort); 32 sits between, nearer the current releases.
SAMPLER_BYTES_PER_LOGIT = 32.0
# Non-torch memory (CUDA context, cuBLAS workspaces, NCCL and custom all-reduce
# buffers): 0.05-0.35 GiB at TP=1, ≈0.5 GiB at TP=2, 0.9-2.2 GiB at TP 4-8 (§3.4).
NON_TORCH_SINGLE_GIB = 0.15
NON_TORCH_BASE_GIB = 0.25
NON_TORCH_PER_RANK_GIB = 0.15


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
    arch: ModelArch, max_num_seqs: int, batched_tokens: int, act_bytes: int
) -> float:
    # The sampling step runs with the forward pass's final hidden states still alive.
    rows = min(max_num_seqs, batched_tokens)
    return SAMPLER_BYTES_PER_LOGIT * rows * arch.vocab_size + batched_tokens * arch.hidden_size * act_bytes


def non_torch_bytes(tp: int) -> float:
    if tp <= 1:
        return NON_TORCH_SINGLE_GIB * GIB
    return (NON_TORCH_BASE_GIB + NON_TORCH_PER_RANK_GIB * tp) * GIB


@dataclass(frozen=True, slots=True)
class StageMemory:
    weights_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    kv_bytes: float
    num_blocks: int
    pool: KvPool


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """What vLLM will report at startup for one replica."""

    binding: StageMemory  # the worker with the fewest blocks (it sizes the engine)
    num_blocks: int
    kv_tokens: int
    max_concurrency: float  # at max_model_len, as vLLM prints it
    max_model_len: int
    max_num_batched_tokens: int

    @property
    def starts(self) -> bool:
        """vLLM refuses to start when one max-length request does not fit."""
        return self.binding.kv_bytes > 0 and self.max_concurrency >= 1.0

    def concurrency_at(self, tokens: int) -> float:
        return self.binding.pool.concurrency(
            self.num_blocks, min(tokens, self.max_model_len), self.max_num_batched_tokens
        )


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
) -> MemoryEstimate:
    budget = total_memory_gib * GIB * gpu_memory_utilization
    kinds = arch.kinds
    stages: list[StageMemory] = []
    forward = forward_activation_bytes(arch, tp, max_num_batched_tokens, act_bytes)
    sampler = sampler_activation_bytes(arch, max_num_seqs, max_num_batched_tokens, act_bytes)
    overhead = non_torch_bytes(tp)
    first = 0
    last_stage = len(layout.stage_layers) - 1
    for stage, count in enumerate(layout.stage_layers):
        activation = max(forward, sampler) if stage == last_stage else forward
        pool = kv_pool(arch, kinds[first : first + count], tp, kv_element_bytes, block_size)
        kv_bytes = budget - layout.stage_bytes_per_gpu[stage] - activation - overhead
        stages.append(
            StageMemory(
                weights_bytes=layout.stage_bytes_per_gpu[stage],
                activation_bytes=activation,
                non_torch_bytes=overhead,
                kv_bytes=kv_bytes,
                num_blocks=pool.num_blocks(kv_bytes),
                pool=pool,
            )
        )
        first += count
    binding = min(stages, key=lambda s: (s.num_blocks, s.kv_bytes))
    num_blocks = binding.num_blocks
    return MemoryEstimate(
        binding=binding,
        num_blocks=num_blocks,
        kv_tokens=binding.pool.tokens(num_blocks),
        max_concurrency=binding.pool.concurrency(num_blocks, max_model_len, max_num_batched_tokens),
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
    )
