"""The memory model: weights, KV geometry and the startup budget, as vLLM computes them."""

from __future__ import annotations

from inferfleet.catalog import default_catalogs
from inferfleet.planner.accounting import accounting
from inferfleet.planner.kv import bytes_per_token_per_layer, kv_groups, kv_pool
from inferfleet.planner.memory import estimate, forward_activation_bytes
from inferfleet.planner.releases import resolve_release
from inferfleet.planner.units import GIB
from inferfleet.planner.weights import body_scale, pipeline_partition, weight_layout

V0_6_4 = accounting(resolve_release(None, "0.6.4"))
V0_11 = accounting(resolve_release("vllm/vllm-openai:v0.11.0", None))


def _arch(name: str):  # type: ignore[no-untyped-def]
    arch = default_catalogs().model(name)
    assert arch is not None
    return arch


def test_kv_bytes_per_token_by_attention_type() -> None:
    llama70 = _arch("meta-llama/Llama-3.3-70B-Instruct")
    # 2 (K and V) × 8 KV heads × 128 dims × 2 bytes per layer; 80 layers ≈ 0.33 MB per token
    assert bytes_per_token_per_layer(llama70, 1, 2) == 4096
    assert bytes_per_token_per_layer(llama70, 1, 2) * llama70.num_layers == 327_680
    assert bytes_per_token_per_layer(llama70, 1, 1) == 2048  # fp8 halves it
    assert bytes_per_token_per_layer(llama70, 8, 2) == 512  # one KV head per rank
    assert bytes_per_token_per_layer(llama70, 16, 2) == 512  # replicated beyond the KV head count
    deepseek = _arch("deepseek-ai/DeepSeek-V3")
    assert bytes_per_token_per_layer(deepseek, 1, 2) == 576 * 2
    assert bytes_per_token_per_layer(deepseek, 8, 2) == 576 * 2  # MLA latents are not split by TP


def test_hybrid_models_group_layers_like_vllm() -> None:
    oss = _arch("openai/gpt-oss-120b")
    groups = kv_groups(oss.kinds)
    assert (groups.group_size, groups.full_groups, groups.sliding_groups) == (18, 1, 1)
    gemma = _arch("google/gemma-3-27b-it")
    groups = kv_groups(gemma.kinds)
    assert (groups.group_size, groups.full_groups, groups.sliding_groups) == (10, 1, 6)
    dense = kv_groups(_arch("meta-llama/Llama-3.1-8B-Instruct").kinds)
    assert (dense.group_size, dense.num_groups) == (32, 1)


def test_hybrid_pool_reports_tokens_per_group_and_window_capped_concurrency() -> None:
    oss = _arch("openai/gpt-oss-120b")
    pool = kv_pool(oss, oss.kinds, 4, 2, 16)
    blocks = 1000
    assert pool.tokens(blocks) == 500 * 16  # num_blocks // groups × block size
    # a 16k request needs 1024 full-attention blocks but only ~137 for the 128-token window
    assert pool.blocks_per_request(16384, 2048) == 1024 + 137
    assert pool.concurrency(blocks, 16384, 2048) > pool.tokens(blocks) / 16384


def test_weights_split_over_tp_with_embeddings_and_stage_imbalance() -> None:
    llama8 = _arch("meta-llama/Llama-3.1-8B-Instruct")
    scale = body_scale(llama8)
    one = weight_layout(llama8, weight_format="none", dtype_bytes=2, tp=1, pp=1, family="hopper", scale=scale)
    # the parameters plus the RoPE cos/sin cache (131072 positions × 128, 16-bit)
    rope = 131072 * 128 * 2
    assert llama8.rope_cache_elements * 2 == rope
    assert abs(one.max_bytes_per_gpu - (8.03e9 * 2 + rope)) / 16.06e9 < 0.001
    assert abs(one.checkpoint_bytes - 8.03e9 * 2) / 16.06e9 < 0.001  # never read from storage
    two = weight_layout(llama8, weight_format="none", dtype_bytes=2, tp=2, pp=1, family="hopper", scale=scale)
    assert abs(two.max_bytes_per_gpu * 2 - one.max_bytes_per_gpu) / one.max_bytes_per_gpu < 0.01
    fp8 = weight_layout(llama8, weight_format="fp8", dtype_bytes=2, tp=1, pp=1, family="hopper", scale=scale)
    # embeddings and lm_head (1.05B params) stay 16-bit: more than half of the 16-bit size
    assert 0.5 < fp8.max_bytes_per_gpu / one.max_bytes_per_gpu < 0.6
    assert pipeline_partition(126, 4) == (31, 32, 32, 31)
    staged = weight_layout(
        llama8, weight_format="none", dtype_bytes=2, tp=1, pp=2, family="hopper", scale=scale
    )
    assert staged.stage_layers == (16, 16) and len(staged.stage_bytes_per_gpu) == 2


def test_gemma3_rope_caches_are_loaded_with_the_model() -> None:
    """vLLM keeps one cos/sin cache per distinct RoPE on every GPU: Gemma 3's global
    layers stretch theirs by the linear factor (8 × 131072 positions), its sliding
    layers add an unscaled one; 0.5625 GiB for a head size of 256 (vLLM 0.23.0 on an
    MI300X logged 8.58 GiB for gemma-3-4b-it's 8.01 GiB checkpoint)."""
    gemma = _arch("google/gemma-3-12b-it")
    assert gemma.rope_cache_elements == (8 * 131072 + 131072) * 256
    assert gemma.max_position_embeddings == 131072  # vLLM does not stretch Gemma 3 again
    layout = weight_layout(
        gemma, weight_format="none", dtype_bytes=2, tp=2, pp=1, family="hopper", scale=body_scale(gemma)
    )
    assert layout.max_bytes_per_gpu - layout.checkpoint_bytes / 2 > 0.56 * 2**30  # replicated, not split


def test_mxfp4_quantizes_experts_only_and_pads_on_marlin() -> None:
    oss = _arch("openai/gpt-oss-120b")
    scale = body_scale(oss)
    hopper = weight_layout(
        oss, weight_format="mxfp4", dtype_bytes=2, tp=4, pp=1, family="hopper", scale=scale
    )
    ampere = weight_layout(
        oss, weight_format="mxfp4", dtype_bytes=2, tp=4, pp=1, family="ampere", scale=scale
    )
    assert ampere.max_bytes_per_gpu > hopper.max_bytes_per_gpu  # hidden 2880 → 3072 on Marlin
    assert hopper.stage_expert_bytes_per_gpu[0] / hopper.max_bytes_per_gpu > 0.8


def test_budget_is_total_times_utilization_minus_the_rest() -> None:
    llama8 = _arch("meta-llama/Llama-3.1-8B-Instruct")
    layout = weight_layout(
        llama8, weight_format="none", dtype_bytes=2, tp=1, pp=1, family="hopper", scale=body_scale(llama8)
    )
    result = estimate(
        llama8,
        layout,
        tp=1,
        total_memory_gib=79.18,
        gpu_memory_utilization=0.9,
        kv_element_bytes=2,
        act_bytes=2,
        block_size=16,
        max_model_len=16000,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        accounting=V0_11,
    )
    b = result.binding
    rest = b.weights_bytes + b.activation_bytes + b.non_torch_bytes + b.graph_reserve_bytes + b.reserve_bytes
    assert abs(79.18 * 0.9 * GIB - rest - b.kv_bytes) < 1
    assert result.kv_tokens % 16 == 0
    assert result.kv_tokens == b.kv_bytes // (131072 * 16) * 16
    # vLLM's v0.11 log for this configuration: 51.38 GiB of KV cache
    assert abs(b.kv_bytes / GIB - 51.38) / 51.38 < 0.05
    assert result.starts and abs(result.max_concurrency - result.kv_tokens / 16000) < 0.01


def test_activation_peak_grows_with_batched_tokens_and_overhead_with_tp() -> None:
    llama8 = _arch("meta-llama/Llama-3.1-8B-Instruct")
    small = forward_activation_bytes(llama8, 1, 2048, 2)
    large = forward_activation_bytes(llama8, 1, 20000, 2)
    assert large > small
    assert abs(large / GIB - 2.07) < 0.2  # V0 profile of 20k tokens logged 2.07 GiB
    assert V0_11.non_torch_bytes(1, 1) < V0_11.non_torch_bytes(2, 1) < V0_11.non_torch_bytes(8, 1)


def test_failed_start_when_one_request_does_not_fit() -> None:
    llama8 = _arch("meta-llama/Llama-3.1-8B-Instruct")
    layout = weight_layout(
        llama8, weight_format="none", dtype_bytes=2, tp=1, pp=1, family="ampere", scale=body_scale(llama8)
    )
    # RTX 3090 (23.58 GiB), V0 profiling 29k tokens: vLLM refused to start
    result = estimate(
        llama8,
        layout,
        tp=1,
        total_memory_gib=23.58,
        gpu_memory_utilization=0.9,
        kv_element_bytes=2,
        act_bytes=2,
        block_size=16,
        max_model_len=29000,
        max_num_seqs=256,
        max_num_batched_tokens=29000,
        accounting=V0_6_4,
    )
    assert not result.starts and result.kv_tokens < 29000
