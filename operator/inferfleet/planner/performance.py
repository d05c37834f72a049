"""Roofline serving model of one replica: prefill from compute, decode from bandwidth.

Prefill is compute bound: tokens/s = GPUs × peak FLOPS × utilization / FLOPs per token.
Decode is bandwidth bound: every step streams the weights once (the base) and each
running sequence adds its KV reads and its share of the math (the per-sequence slope),
so the step at batch b takes `base + per_seq × b` (a roofline; docs/concepts/planning.md).
Tensor parallelism pays two all-reduces per layer per step, one after attention and one
after the MLP (Megatron-LM: Shoeybi et al. 2019, arXiv:1909.08053). Over PCIe (Gen5 x16:
128 GB/s, against NVLink 4's 900 GB/s on NVIDIA's H100 datasheet) the planner takes that
to cost 8% of step time at TP=2, 25% at TP=4 and 38% at TP=8, over NVLink 2-9%
(`PCIE_TP_OVERHEAD`, `FAST_TP_OVERHEAD`: the planner's estimates, not measurements).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.planner.kv import KvPool
from inferfleet.planner.weights import WeightLayout

# Fraction of peak tensor FLOPS a well-batched prefill reaches in vLLM.
PREFILL_FLOPS_UTILIZATION = 0.45
# Fraction of peak FLOPS the small decode GEMMs reach.
DECODE_FLOPS_UTILIZATION = 0.3
# Fraction of HBM bandwidth decode kernels sustain.
BANDWIDTH_EFFICIENCY = 0.75
# Per-step host work (scheduling, sampling, launches): CUDA graphs hide most of it.
STEP_OVERHEAD_MS = 2.0
STEP_OVERHEAD_EAGER_MS = 6.0
# One all-reduce of a decode step's activations, by link (latency dominated).
ALLREDUCE_US = {"fast": 8.0, "pcie": 25.0, "network": 40.0}
# Prefill time lost to all-reduce on PCIe and on a fast link, by TP degree (estimates,
# see the module docstring).
PCIE_TP_OVERHEAD = {1: 0.0, 2: 0.08, 4: 0.25, 8: 0.38}
FAST_TP_OVERHEAD = {1: 0.0, 2: 0.02, 4: 0.05, 8: 0.09}
# Pipeline bubbles: stages wait on each other for part of every prefill.
PIPELINE_EFFICIENCY = 0.85
# A roofline is a ceiling; schedulers lose throughput to uneven lengths, preemption
# and queueing, so usable capacity is taken as this share of it.
USABLE_SHARE_OF_ROOFLINE = 0.75


@dataclass(frozen=True, slots=True)
class Roofline:
    prefill_tokens_per_second: float
    decode_step_base_ms: float
    decode_step_per_seq_ms: float

    def step_ms(self, batch: float) -> float:
        return self.decode_step_base_ms + self.decode_step_per_seq_ms * batch

    def max_batch_within(self, step_budget_ms: float) -> int:
        room = step_budget_ms - self.decode_step_base_ms
        if room <= 0:
            return 0
        return int(room / max(self.decode_step_per_seq_ms, 1e-9))

    def requests_per_second(
        self,
        concurrency: float,
        mean_input_tokens: float,
        mean_output_tokens: float,
        prefill_tokens_per_second: float | None = None,
    ) -> float:
        """Requests/s at `concurrency` running sequences, prefill and decode sharing the GPUs.

        `prefill_tokens_per_second`: the rate chunked prefill really leaves (planner.batching),
        below the roofline when small chunks re-read the weights every step."""
        concurrency = max(1.0, concurrency)
        decode_tokens_per_s = concurrency / (self.step_ms(concurrency) / 1000)
        prefill = prefill_tokens_per_second or self.prefill_tokens_per_second
        seconds_per_request = mean_output_tokens / decode_tokens_per_s + mean_input_tokens / max(
            prefill, 1e-9
        )
        return USABLE_SHARE_OF_ROOFLINE / seconds_per_request


def compute_tflops(gpu: GpuSpec, weight_format: str) -> float:
    """Peak dense TFLOPS the matmuls run at: W8A8 formats use the 8-bit tensor cores."""
    if weight_format == "fp8" and gpu.fp8_native and gpu.fp8_tflops:
        return gpu.fp8_tflops
    if weight_format == "int8" and gpu.int8_tops:
        return gpu.int8_tops
    if weight_format == "nvfp4" and gpu.fp4_native and gpu.fp4_tflops:
        return gpu.fp4_tflops
    return gpu.bf16_tflops


def active_parameters(arch: ModelArch) -> float:
    """Parameters one token touches (all of them for dense models)."""
    if arch.moe is None:
        return arch.parameters_billion * 1e9
    moe = arch.moe
    moe_layers = arch.num_layers - moe.first_dense_layers
    idle_experts = moe.num_experts - moe.experts_per_token
    idle = moe_layers * idle_experts * 3 * arch.hidden_size * moe.expert_intermediate_size
    return max(arch.parameters_billion * 1e9 - idle, arch.parameters_billion * 1e9 * 0.02)


def _tp_overhead(gpu: GpuSpec, tp: int) -> float:
    table = FAST_TP_OVERHEAD if gpu.fast_link(tp) else PCIE_TP_OVERHEAD
    return table.get(tp, table[8] if tp > 8 else 0.0)


def _experts_touched(arch: ModelArch, batch: float) -> float:
    """Share of a layer's routed experts one decode step reads at `batch` sequences."""
    if arch.moe is None:
        return 1.0
    picked = arch.moe.experts_per_token / arch.moe.num_experts
    return float(1.0 - (1.0 - picked) ** max(1.0, batch))


def roofline(
    arch: ModelArch,
    gpu: GpuSpec,
    layout: WeightLayout,
    pool: KvPool,
    *,
    weight_format: str,
    tp: int,
    pp: int,
    multi_node: bool,
    mean_context_tokens: float,
    mean_prompt_tokens: float,
    reference_batch: int,
    enforce_eager: bool,
) -> Roofline:
    gpus = tp * pp
    peak_flops = compute_tflops(gpu, weight_format) * 1e12
    active = active_parameters(arch)
    attention_width = arch.num_attention_heads * (
        arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim if arch.mla else arch.head_dim
    )
    # Per prompt token: 2 FLOPs per active weight, plus attention over half the prompt.
    prefill_flops_per_token = 2 * active + 2 * arch.num_layers * mean_prompt_tokens * attention_width
    efficiency = (1 - _tp_overhead(gpu, tp)) * (PIPELINE_EFFICIENCY if pp > 1 else 1.0)
    prefill_tps = gpus * peak_flops * PREFILL_FLOPS_UTILIZATION * efficiency / prefill_flops_per_token

    bandwidth = gpu.bandwidth_t_bs * 1e12 * BANDWIDTH_EFFICIENCY
    # Stages run one after another within a step, so their reads add up.
    dense_bytes = sum(layout.stage_bytes_per_gpu) - sum(layout.stage_expert_bytes_per_gpu)
    expert_bytes = sum(layout.stage_expert_bytes_per_gpu)
    base_read_ms = (dense_bytes + expert_bytes * _experts_touched(arch, 1)) / bandwidth * 1000
    if tp > 1:
        link = "fast" if gpu.fast_link(tp) else "pcie"
        allreduce_ms = 2 * arch.num_layers * ALLREDUCE_US[link] / 1000
    else:
        allreduce_ms = 0.0
    hop_ms = (pp - 1) * (ALLREDUCE_US["network"] if multi_node else ALLREDUCE_US["fast"]) / 1000
    overhead_ms = STEP_OVERHEAD_EAGER_MS if enforce_eager else STEP_OVERHEAD_MS
    base_ms = base_read_ms + allreduce_ms + hop_ms + overhead_ms

    # Each running sequence reads its KV (sliding layers only their window) ...
    per_layer_token_bytes = pool.page_bytes / pool.block_size
    sliding = arch.sliding_layers
    full = arch.num_layers - sliding
    window = arch.sliding_window_tokens or mean_context_tokens
    kv_bytes = per_layer_token_bytes * (
        full * mean_context_tokens + sliding * min(window, mean_context_tokens)
    )
    kv_ms = kv_bytes / bandwidth * 1000
    # ... does its share of the math ...
    compute_ms = 2 * active / tp / (peak_flops * DECODE_FLOPS_UTILIZATION) * 1000
    # ... and, in an MoE, wakes experts that no other sequence in the batch picked.
    moe_ms = 0.0
    if arch.moe is not None and reference_batch > 1:
        extra_share = (_experts_touched(arch, reference_batch) - _experts_touched(arch, 1)) / (
            reference_batch - 1
        )
        moe_ms = expert_bytes * extra_share / bandwidth * 1000
    # With PP, vLLM keeps one micro-batch per stage in flight: each running sequence
    # advances once per pipeline traversal, but only 1/PP of them share a traversal.
    return Roofline(
        prefill_tokens_per_second=prefill_tps,
        decode_step_base_ms=base_ms,
        decode_step_per_seq_ms=(kv_ms + compute_ms + moe_ms) / pp,
    )


def power_of_two_at_most(value: float, low: int, high: int) -> int:
    if value < low:
        return low
    return max(low, min(high, 1 << int(math.log2(value))))
