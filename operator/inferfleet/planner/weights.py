"""Weight memory: parameters per GPU at a given format, tensor- and pipeline-parallel degree.

The parameter count is split by component from the architecture (embeddings, attention,
dense MLP, routed experts, router) and scaled so the total matches the stated parameter
count. Quantized formats apply only where vLLM applies them: linear layers inside the
decoder (MXFP4: the routed experts only); embeddings, lm_head, norms and the MoE router
stay in the activation dtype. Replicated pieces (MLA's down-projections, the router, KV
projections when TP exceeds the KV head count) are counted on every GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from inferfleet.catalog.models import ModelArch, WeightFormat
from inferfleet.planner.units import ceil_div, round_up

# Bytes per quantized weight element, scales included (vLLM's quantization docs list the
# formats; group sizes are the common checkpoint layouts):
#   fp8/int8: 1 byte + a 4-byte scale per output channel (negligible, folded in below)
#   awq/gptq: 4 bits + an fp16 scale and a 4-bit zero point per group of 128
#   mxfp4: 4 bits + one e8m0 scale byte per 32;  nvfp4: 4 bits + one fp8 scale per 16
QUANT_BYTES_PER_PARAM: dict[str, float] = {
    "fp8": 1.0,
    "int8": 1.0,
    "awq": 0.5 + 2.5 / 128,
    "gptq": 0.5 + 2.5 / 128,
    "mxfp4": 0.5 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
}


@dataclass(frozen=True, slots=True)
class LayerParams:
    """Parameters one GPU holds for one decoder layer."""

    linear: float  # attention + dense/shared MLP linear weights (quantizable)
    experts: float  # routed-expert weights (quantizable)
    unquantized: float  # router and other pieces kept in the activation dtype
    attention: float = 0.0  # the attention share of `linear`


@dataclass(frozen=True, slots=True)
class WeightLayout:
    """Weight bytes of one replica, per pipeline stage."""

    stage_layers: tuple[int, ...]
    stage_bytes_per_gpu: tuple[float, ...]  # what each GPU of the stage holds
    stage_expert_bytes_per_gpu: tuple[float, ...]  # the routed-expert part of it
    checkpoint_bytes: float  # the whole model once (what a cold start reads)

    @property
    def max_bytes_per_gpu(self) -> float:
        return max(self.stage_bytes_per_gpu)


def pipeline_partition(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per stage as vLLM splits them: even shares, the remainder on the middle-late stages."""
    base = num_layers // pp
    parts = [base] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def _mxfp4_padding(family: str) -> tuple[int, int]:
    # vLLM's MXFP4 MoE kernels pad expert shapes: the Marlin path (pre-Hopper GPUs)
    # rounds the per-rank intermediate size to 128 and the hidden size to 256;
    # FlashInfer (Blackwell) rounds both to 256; the Hopper Triton path rounds the
    # intermediate size to 256 (vLLM 0.11 on H100 logged 13.47 and 64.38 GiB for
    # gpt-oss-20b and -120b: 2880 → 3072); ROCm to 128.
    if not family:
        return (1, 1)  # as stored in the checkpoint
    if family in ("turing", "ampere", "ada"):
        return (128, 256)
    if family == "blackwell":
        return (256, 256)
    if family == "cdna3":
        return (128, 1)
    return (256, 1)


def _attention_params(arch: ModelArch, tp: int) -> tuple[float, float]:
    """(sharded-and-quantizable, replicated-but-quantizable) attention params per GPU."""
    hidden = arch.hidden_size
    heads = arch.num_attention_heads
    if arch.mla is not None:
        mla = arch.mla
        qk_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank:
            q_down, q_up = hidden * mla.q_lora_rank, mla.q_lora_rank * heads * qk_dim
        else:
            q_down, q_up = 0, hidden * heads * qk_dim
        kv_down = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim)
        kv_up = mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        out = heads * mla.v_head_dim * hidden
        # q_a_proj and kv_a_proj_with_mqa are replicated linears in vLLM's MLA layers.
        return ((q_up + kv_up + out) / tp, float(q_down + kv_down))
    head_dim = arch.head_dim
    kv_heads_per_gpu = max(1, arch.num_kv_heads // tp)
    q_and_out = 2 * hidden * heads * head_dim / tp
    k_and_v = 2 * hidden * kv_heads_per_gpu * head_dim
    return (q_and_out + k_and_v, 0.0)


def layer_params(
    arch: ModelArch, layer: int, tp: int, weight_format: WeightFormat, family: str
) -> LayerParams:
    """Parameters one of `tp` GPUs holds for decoder layer `layer` (before scaling)."""
    hidden = arch.hidden_size
    sharded_attn, replicated_attn = _attention_params(arch, tp)
    moe = arch.moe
    attention = sharded_attn + replicated_attn
    if moe is None or layer < moe.first_dense_layers:
        return LayerParams(
            linear=attention + 3 * hidden * arch.intermediate_size / tp,
            experts=0.0,
            unquantized=0.0,
            attention=attention,
        )
    shared = 3 * hidden * moe.shared_intermediate_size / tp
    per_rank_width = moe.expert_intermediate_size / tp
    expert_hidden = hidden
    if weight_format == "mxfp4":
        width_multiple, hidden_multiple = _mxfp4_padding(family)
        per_rank_width = round_up(ceil_div(moe.expert_intermediate_size, tp), width_multiple)
        expert_hidden = round_up(hidden, hidden_multiple)
    experts = moe.num_experts * 3 * expert_hidden * per_rank_width
    router = hidden * moe.num_experts
    return LayerParams(linear=attention + shared, experts=experts, unquantized=router, attention=attention)


def _embedding_params(arch: ModelArch) -> tuple[float, float]:
    embed = float(arch.vocab_size * arch.hidden_size)
    return (embed, 0.0 if arch.tie_word_embeddings else embed)


def _dense_layers(arch: ModelArch, first: int, count: int) -> int:
    """How many of layers [first, first + count) use a dense MLP (the rest are MoE)."""
    if arch.moe is None:
        return count
    return max(0, min(first + count, arch.moe.first_dense_layers) - first)


def _stage_params(
    arch: ModelArch, first: int, count: int, *, tp: int, weight_format: WeightFormat, family: str
) -> tuple[LayerParams, LayerParams, int, int]:
    dense = _dense_layers(arch, first, count)
    dense_params = layer_params(arch, 0, tp, weight_format, family)
    last_params = layer_params(arch, arch.num_layers - 1, tp, weight_format, family)
    return (dense_params, last_params, dense, count - dense)


def body_scale(arch: ModelArch) -> float:
    """Factor that makes the computed decoder parameters add up to the stated total.

    Stated counts include what the layer formulas leave out (biases, norms, vision
    towers, MTP heads); spreading the difference over the decoder keeps totals exact.
    """
    embed, head = _embedding_params(arch)
    dense_params, moe_params, dense, moe = _stage_params(
        arch, 0, arch.num_layers, tp=1, weight_format="none", family=""
    )
    computed = sum(
        count * (p.linear + p.experts + p.unquantized)
        for p, count in ((dense_params, dense), (moe_params, moe))
    )
    stated = arch.parameters_billion * 1e9 - embed - head
    if computed <= 0 or stated <= 0:
        return 1.0
    return stated / computed


@functools.lru_cache(maxsize=4096)
def weight_layout(
    arch: ModelArch,
    *,
    weight_format: WeightFormat,
    dtype_bytes: int,
    tp: int,
    pp: int,
    family: str,
    scale: float,
) -> WeightLayout:
    """Per-GPU weight bytes of each pipeline stage."""
    stage_bytes, stage_expert_bytes = _stage_bytes(
        arch, weight_format=weight_format, dtype_bytes=dtype_bytes, tp=tp, pp=pp, family=family, scale=scale
    )
    # Every GPU also holds the rotary embeddings' cos/sin caches, created with the model
    # (so counted in "Model loading took"), never read from the checkpoint.
    rope_bytes = float(arch.rope_cache_elements * dtype_bytes)
    return WeightLayout(
        stage_layers=pipeline_partition(arch.num_layers, pp),
        stage_bytes_per_gpu=tuple(stage + rope_bytes for stage in stage_bytes),
        stage_expert_bytes_per_gpu=stage_expert_bytes,
        checkpoint_bytes=checkpoint_bytes(arch, dtype_bytes, scale),
    )


def _stage_bytes(
    arch: ModelArch,
    *,
    weight_format: WeightFormat,
    dtype_bytes: int,
    tp: int,
    pp: int,
    family: str,
    scale: float,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(bytes per GPU, routed-expert bytes per GPU) of each stage; family "" means the
    checkpoint as stored (no kernel padding)."""
    quant = QUANT_BYTES_PER_PARAM.get(weight_format, float(dtype_bytes))
    # MXFP4 checkpoints quantize only the experts; the other formats every decoder linear
    # except what a pre-quantized checkpoint itself left in 16 bits.
    linear_bytes_per_param = float(dtype_bytes) if weight_format == "mxfp4" else quant
    own_format = weight_format != "none" and weight_format == arch.checkpoint_format
    attention_bytes_per_param = (
        float(dtype_bytes) if own_format and arch.unquantized_attention else linear_bytes_per_param
    )
    skipped_mlp = set(arch.unquantized_mlp_layers) if own_format else set()
    embed, head = _embedding_params(arch)
    layers_per_stage = pipeline_partition(arch.num_layers, pp)
    stage_bytes: list[float] = []
    stage_expert_bytes: list[float] = []
    first = 0
    for stage, count in enumerate(layers_per_stage):
        dense_params, moe_params, dense, moe = _stage_params(
            arch, first, count, tp=tp, weight_format=weight_format, family=family
        )
        total = 0.0
        expert_total = 0.0
        for params, layers in ((dense_params, dense), (moe_params, moe)):
            experts = layers * params.experts * scale * quant
            mlp = params.linear - params.attention
            total += layers * (
                (params.attention * attention_bytes_per_param + mlp * linear_bytes_per_param) * scale
                + params.unquantized * dtype_bytes
            )
            total += experts
            expert_total += experts
        for layer in range(first, first + count):
            if layer in skipped_mlp:
                params = dense_params if layer < first + dense else moe_params
                mlp = params.linear - params.attention + params.experts
                total += mlp * scale * (dtype_bytes - quant)
        if stage == 0:
            total += embed / tp * dtype_bytes  # vocab-parallel embedding
        if stage == pp - 1:
            # lm_head; with tied embeddings a single-stage model shares the embedding,
            # while the last of several stages keeps its own copy.
            lm_head = head if head else (embed if pp > 1 else 0.0)
            total += lm_head / tp * dtype_bytes
        stage_bytes.append(total)
        stage_expert_bytes.append(expert_total)
        first += count
    return (tuple(stage_bytes), tuple(stage_expert_bytes))


@functools.lru_cache(maxsize=512)
def checkpoint_bytes(arch: ModelArch, dtype_bytes: int, scale: float) -> float:
    """The bytes a replica reads from storage: the model once, as stored.

    An on-the-fly quantized tier still reads the float checkpoint, so this follows the
    checkpoint's own format, not the tier's.
    """
    stage_bytes, _ = _stage_bytes(
        arch,
        weight_format=arch.checkpoint_format,
        dtype_bytes=dtype_bytes,
        tp=1,
        pp=1,
        family="",
        scale=scale,
    )
    return stage_bytes[0]
