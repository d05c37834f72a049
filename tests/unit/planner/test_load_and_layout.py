"""Load-time peak, pre-quantized checkpoints, block-FP8 layouts and known-bad KV dtypes."""

from __future__ import annotations

from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan
from inferfleet.planner.parallel import tp_options, valid_tensor_parallel

CATALOGS = default_catalogs()
WORKLOAD = {
    "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
    "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
    "peakRequestsPerSecond": 4,
}


def _plan(model: str, gpu: str, gpus_per_node: int = 8, **extra: Any) -> Any:
    tier: dict[str, Any] = {"name": "t", "gpu": gpu, "gpusPerNode": gpus_per_node}
    tier.update(extra.pop("tier", {}))
    doc = {"model": {"name": model}, "workload": WORKLOAD, "tiers": [tier], **extra}
    return plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "t").tiers[0]


def _gpu_gib(name: str) -> float:
    gpu = CATALOGS.gpu(name)
    assert gpu is not None
    return gpu.memory_gib


def _names(tier: Any, checkpoint: str) -> bool:
    return any(checkpoint in reason for reason in tier.reasons)


def test_bf16_405b_is_not_planned_on_one_h100_node_and_the_fp8_checkpoint_is_named() -> None:
    tier = _plan("meta-llama/Llama-3.1-405B-Instruct", "H100-SXM-80GB")
    # online FP8 would load 94.5 GiB of BF16 per GPU at TP 8: more than an H100 holds
    assert not (tier.feasible and tier.nodes_per_replica == 1)
    if tier.feasible:
        assert tier.load_peak_gi_b <= _gpu_gib("H100-SXM-80GB")
    assert _names(tier, "meta-llama/Llama-3.1-405B-Instruct-FP8")


def test_forcing_one_node_for_bf16_405b_is_refused_for_its_load_peak() -> None:
    tier = _plan(
        "meta-llama/Llama-3.1-405B-Instruct",
        "H100-SXM-80GB",
        tier={"overrides": {"tensorParallelSize": 8, "pipelineParallelSize": 1, "quantization": "fp8"}},
    )
    assert not tier.feasible
    assert "loading needs" in tier.reasons[0] and "16-bit checkpoint" in tier.reasons[0]
    assert _names(tier, "meta-llama/Llama-3.1-405B-Instruct-FP8")


def test_bf16_qwen3_235b_on_4_h100s_and_2_mi300x_is_planned_differently_with_the_fp8_checkpoint() -> None:
    h100 = _plan("Qwen/Qwen3-235B-A22B", "H100-SXM-80GB", gpus_per_node=4)
    assert not (h100.feasible and h100.gpus_per_replica == 4)  # 109 GiB per GPU at load on 4
    assert _names(h100, "Qwen/Qwen3-235B-A22B-FP8")
    mi300 = _plan("Qwen/Qwen3-235B-A22B", "MI300X")
    assert not (mi300.feasible and mi300.gpus_per_replica == 2)  # 219 GiB per GPU at load on 2
    assert mi300.load_peak_gi_b <= _gpu_gib("MI300X")
    assert _names(mi300, "Qwen/Qwen3-235B-A22B-FP8")


def test_pre_quantized_checkpoints_load_as_stored() -> None:
    tier = _plan("Qwen/Qwen3-235B-A22B-FP8", "H100-SXM-80GB")
    assert tier.feasible and tier.quantization == "fp8"
    # no 16-bit peak: loading takes the stored weights plus the CUDA context
    assert tier.load_peak_gi_b < tier.memory_gi_b.weights + 1
    online = _plan("Qwen/Qwen3-30B-A3B", "H100-SXM-80GB")
    assert online.quantization == "fp8" and online.load_peak_gi_b > 1.8 * online.memory_gi_b.weights


def test_block_fp8_checkpoints_refuse_tp_degrees_their_blocks_cannot_split() -> None:
    qwen = CATALOGS.model("Qwen/Qwen3-235B-A22B-FP8")
    assert qwen is not None
    problem = valid_tensor_parallel(qwen, 8, "fp8")
    assert problem is not None and "1536 / 8 = 192" in problem
    assert valid_tensor_parallel(qwen, 4, "fp8") is None
    # online FP8 of the BF16 model is per tensor: no block constraint
    bf16 = CATALOGS.model("Qwen/Qwen3-235B-A22B")
    assert bf16 is not None and valid_tensor_parallel(bf16, 8, "fp8") is None
    small = CATALOGS.model("Qwen/Qwen3-30B-A3B-FP8")
    assert small is not None and tp_options(small, 8, "fp8") == [1, 2]
    deepseek = CATALOGS.model("deepseek-ai/DeepSeek-V3")
    assert deepseek is not None and valid_tensor_parallel(deepseek, 8, "fp8") is None
    forced = _plan("Qwen/Qwen3-235B-A22B-FP8", "H100-SXM-80GB", tier={"overrides": {"tensorParallelSize": 8}})
    assert not forced.feasible and "192, not a multiple of 128" in forced.reasons[0]
    auto = _plan("Qwen/Qwen3-235B-A22B-FP8", "H100-SXM-80GB")
    assert auto.tensor_parallel_size != 8


def test_fp8_kv_is_avoided_for_gpt_oss_on_hopper_with_the_source_cited() -> None:
    tier = _plan("openai/gpt-oss-120b", "H100-SXM-80GB")
    assert tier.feasible and tier.kv_cache_dtype == "auto"
    assert any("#17442" in reason for reason in tier.reasons)
    forced = _plan("openai/gpt-oss-120b", "H100-SXM-80GB", tier={"overrides": {"kvCacheDtype": "fp8"}})
    assert not forced.feasible and "#17442" in forced.reasons[0]
    # Blackwell does not run gpt-oss through FlashAttention 3
    assert _plan("openai/gpt-oss-120b", "B200").kv_cache_dtype == "fp8"


def test_lora_slots_and_a_draft_head_are_counted_with_the_weights() -> None:
    base = _plan(
        "meta-llama/Llama-3.1-8B-Instruct", "H100-SXM-80GB", tier={"overrides": {"tensorParallelSize": 1}}
    )
    adapters = [{"name": f"a{i}", "source": f"hf://org/adapter-{i}", "rank": 64} for i in range(4)]
    lora = plan(
        InferenceServiceSpec.model_validate(
            {
                "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "adapters": adapters},
                "workload": WORKLOAD,
                "tiers": [{"name": "t", "gpu": "H100-SXM-80GB", "overrides": {"tensorParallelSize": 1}}],
            }
        ),
        CATALOGS,
        "t",
    ).tiers[0]
    # 4 adapters × rank 64 × (A + B of q, k, v, o, gate, up, down: 81,920 per rank) × 32
    # layers = 671M parameters, 1.25 GiB at 16 bits
    assert abs(lora.memory_gi_b.weights - base.memory_gi_b.weights - 1.25) < 0.05
    assert lora.load_peak_gi_b > base.load_peak_gi_b and any("LoRA" in r for r in lora.reasons)
    eagle = _plan(
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100-SXM-80GB",
        serving={"speculativeDecoding": {"method": "eagle3", "model": "org/eagle3-head"}},
        tier={"overrides": {"tensorParallelSize": 1}},
    )
    assert eagle.memory_gi_b.weights > base.memory_gi_b.weights
    assert eagle.kv_cache_tokens < base.kv_cache_tokens  # the head's layer shares the KV pool
