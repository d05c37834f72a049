"""Property tests: monotonicity of the planner's choices and the supremacy of overrides."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan

CATALOGS = default_catalogs()
MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "google/gemma-3-27b-it",
    "microsoft/phi-4",
]
ARCHETYPES = ["chat", "code", "rag", "agentic", "batch"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Counter-examples found by INFERFLEET_HYPOTHESIS=explore. The first (more memory gave
# TP=4 where less gave TP=2) was a planner bug: a wider layout had to beat only the
# layout kept so far by the 10 % margin, so with TP=1 fitting TP=4 won against TP=1
# while losing to TP=2; it must now beat every narrower layout that serves, and the
# example stays as a regression. The second is the margin's own edge: TP=2 serves
# 61.55 req/s per GPU against TP=1's 55.96 (just over 10 % more, so TP=2), and one layer
# more makes it just under 10 % (so TP=1): a threshold on a continuous ratio has a
# boundary, and both plans fit and are sized for their TP. Kept as an xfail example: it
# fails the suite the day it passes. (The draw was 9.0765 B parameters; counting the
# RoPE cos/sin cache in the weights moved the edge, the smallest flipping size is now
# 9.127 B.)
NEAR_TIE = "the wider-TP margin's edge: just over vs just under 10 % more per GPU flips the choice"


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    p50_in = draw(st.integers(50, 4000))
    p50_out = draw(st.integers(20, 1000))
    return {
        "archetype": draw(st.sampled_from(ARCHETYPES)),
        "inputTokens": {"p50": p50_in, "p95": p50_in * 2, "p99": p50_in * 3},
        "outputTokens": {"p50": p50_out, "p95": p50_out * 2, "p99": p50_out * 3},
        "peakRequestsPerSecond": draw(st.floats(0.1, 500)),
        "slo": {
            "ttftP99Ms": draw(st.sampled_from([500, 2000, 10000])),
            "itlP99Ms": draw(st.sampled_from([50, 100])),
        },
    }


def _inline_gpu(memory_gib: float, fp8: bool, nvlink: bool) -> dict[str, Any]:
    return {
        "name": "probe",
        "memoryGiB": memory_gib,
        "memoryBandwidthTBs": 2.0,
        "bf16Tflops": 400,
        "fp8": fp8,
        "interconnect": "nvlink" if nvlink else "pcie",
    }


def _tier_plan(doc: dict[str, Any]) -> Any:
    return plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "p").tiers[0]


@SETTINGS
@example(
    model="Qwen/Qwen3-30B-A3B",
    workload={
        "archetype": "chat",
        "inputTokens": {"p50": 121, "p95": 242, "p99": 363},
        "outputTokens": {"p50": 151, "p95": 302, "p99": 453},
        "peakRequestsPerSecond": 1.0,
        "slo": {"ttftP99Ms": 2000, "itlP99Ms": 50},
    },
    small=34.0,
    extra=31.0,
    fp8=False,
    nvlink=True,
    quantization="none",
)
@given(
    model=st.sampled_from(MODELS),
    workload=workloads(),
    small=st.floats(16, 160),
    extra=st.floats(1, 160),
    fp8=st.booleans(),
    nvlink=st.booleans(),
    quantization=st.sampled_from(["auto", "none", "fp8"]),
)
def test_more_memory_never_yields_a_higher_tp(  # noqa: PLR0917 (hypothesis passes keywords)
    model: str,
    workload: dict[str, Any],
    small: float,
    extra: float,
    fp8: bool,
    nvlink: bool,
    quantization: str,
) -> None:
    def tp_for(memory: float) -> tuple[bool, int]:
        doc = {
            "model": {"name": model},
            "workload": workload,
            "quantization": quantization,
            "tiers": [{"name": "t", "gpu": _inline_gpu(memory, fp8, nvlink), "gpusPerNode": 8}],
        }
        tier = _tier_plan(doc)
        return (tier.feasible, tier.tensor_parallel_size * tier.pipeline_parallel_size)

    feasible_small, gpus_small = tp_for(small)
    feasible_large, gpus_large = tp_for(small + extra)
    if feasible_small:
        assert feasible_large
        assert gpus_large <= gpus_small


@st.composite
def dense_configs(draw: st.DrawFn) -> tuple[dict[str, Any], float]:
    heads = draw(st.sampled_from([16, 32, 64]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8) if heads % h == 0]))
    hidden = heads * 128
    layers = draw(st.integers(8, 96))
    config = {
        "hidden_size": hidden,
        "intermediate_size": hidden * 3,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": 128000,
        "max_position_embeddings": 131072,
    }
    params_b = (layers * (4 * hidden * hidden + 9 * hidden * hidden) + 2 * 128000 * hidden) / 1e9
    return (config, params_b)


@SETTINGS
@example(
    base=(
        {
            "hidden_size": 8192,
            "intermediate_size": 24576,
            "num_hidden_layers": 8,
            "num_attention_heads": 64,
            "num_key_value_heads": 1,
            "vocab_size": 128000,
            "max_position_embeddings": 131072,
        },
        9.127,
    ),
    more_layers=1,
    gpu="H100-SXM-80GB",
    workload={
        "archetype": "chat",
        "inputTokens": {"p50": 241, "p95": 482, "p99": 723},
        "outputTokens": {"p50": 20, "p95": 40, "p99": 60},
        "peakRequestsPerSecond": 6.0,
        "slo": {"ttftP99Ms": 10000, "itlP99Ms": 50},
    },
).xfail(raises=AssertionError, reason=NEAR_TIE)
@given(
    base=dense_configs(),
    more_layers=st.integers(1, 64),
    gpu=st.sampled_from(["L4", "L40S", "A100-SXM-80GB", "H100-SXM-80GB"]),
    workload=workloads(),
)
def test_a_larger_model_never_needs_fewer_gpus(
    base: tuple[dict[str, Any], float], more_layers: int, gpu: str, workload: dict[str, Any]
) -> None:
    config, params_b = base
    per_layer_b = (params_b - 2 * 128000 * config["hidden_size"] / 1e9) / config["num_hidden_layers"]
    bigger = {**config, "num_hidden_layers": config["num_hidden_layers"] + more_layers}

    def gpus_for(cfg: dict[str, Any], params: float) -> tuple[bool, int]:
        doc = {
            "model": {"name": "probe/model", "config": cfg, "parametersBillion": params},
            "workload": workload,
            "tiers": [{"name": "t", "gpu": gpu}],
        }
        tier = _tier_plan(doc)
        return (tier.feasible, tier.gpus_per_replica)

    small_ok, small_gpus = gpus_for(config, params_b)
    large_ok, large_gpus = gpus_for(bigger, params_b + more_layers * per_layer_b)
    if small_ok and large_ok:
        assert large_gpus >= small_gpus
    if not small_ok:
        assert not large_ok


@st.composite
def overrides(draw: st.DrawFn) -> dict[str, Any]:
    candidates: dict[str, Any] = {
        "tensorParallelSize": st.sampled_from([1, 2, 4, 8]),
        "pipelineParallelSize": st.sampled_from([1, 2]),
        "dtype": st.sampled_from(["bfloat16", "float16"]),
        "quantization": st.sampled_from(["none", "fp8", "awq"]),
        "kvCacheDtype": st.sampled_from(["auto", "fp8", "bf16"]),
        "gpuMemoryUtilization": st.floats(0.5, 0.95),
        "maxModelLen": st.integers(1024, 32768),
        "maxNumSeqs": st.integers(1, 512),
        "maxNumBatchedTokens": st.integers(512, 32768),
        "blockSize": st.sampled_from([16, 32, 64]),
        "enforceEager": st.booleans(),
    }
    chosen = draw(st.sets(st.sampled_from(sorted(candidates)), min_size=1))
    return {key: draw(candidates[key]) for key in chosen}


FIELDS = {
    "tensorParallelSize": "tensor_parallel_size",
    "pipelineParallelSize": "pipeline_parallel_size",
    "dtype": "dtype",
    "quantization": "quantization",
    "kvCacheDtype": "kv_cache_dtype",
    "gpuMemoryUtilization": "gpu_memory_utilization",
    "maxModelLen": "max_model_len",
    "maxNumSeqs": "max_num_seqs",
    "maxNumBatchedTokens": "max_num_batched_tokens",
    "blockSize": "block_size",
    "enforceEager": "enforce_eager",
}


@SETTINGS
@given(
    model=st.sampled_from(MODELS),
    workload=workloads(),
    forced=overrides(),
    gpu=st.sampled_from(["L40S", "A100-SXM-80GB", "H100-SXM-80GB"]),
)
def test_overrides_always_win(model: str, workload: dict[str, Any], forced: dict[str, Any], gpu: str) -> None:
    doc = {
        "model": {"name": model},
        "workload": workload,
        "tiers": [{"name": "t", "gpu": gpu, "gpusPerNode": 8, "overrides": forced}],
    }
    tier = _tier_plan(doc)
    invalid_tp = not tier.feasible and "tensorParallelSize" in tier.reasons[0]
    for key, value in forced.items():
        assert getattr(tier, FIELDS[key]) == value, (key, tier.reasons[:2])
    if not invalid_tp:
        assert any("override" in reason for reason in tier.reasons)


@SETTINGS
@given(
    model=st.sampled_from([*MODELS, "meta-llama/Llama-3.1-405B-Instruct", "Qwen/Qwen3-235B-A22B"]),
    workload=workloads(),
    gpu=st.sampled_from(["L4", "L40S", "A100-SXM-80GB", "H100-SXM-80GB", "MI300X", "B200"]),
    gpus_per_node=st.sampled_from([2, 4, 8]),
    quantization=st.sampled_from(["auto", "none", "fp8"]),
    image=st.sampled_from(["vllm/vllm-openai:v0.6.4", "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:latest"]),
)
def test_no_feasible_plan_exceeds_the_gpu_while_loading(  # noqa: PLR0917 (hypothesis passes keywords)
    model: str, workload: dict[str, Any], gpu: str, gpus_per_node: int, quantization: str, image: str
) -> None:
    doc = {
        "model": {"name": model},
        "workload": workload,
        "quantization": quantization,
        "serving": {"image": image},
        "tiers": [{"name": "t", "gpu": gpu, "gpusPerNode": gpus_per_node}],
    }
    tier = _tier_plan(doc)
    memory = CATALOGS.gpu(gpu)
    assert memory is not None
    if tier.feasible:
        assert 0 < tier.load_peak_gi_b <= memory.memory_gib
        assert tier.memory_gi_b.kv_cache > 0 and tier.max_concurrency >= 1
        budget = memory.memory_gib * tier.gpu_memory_utilization
        used = tier.memory_gi_b
        parts = (
            used.weights + used.activations + used.overhead + used.cuda_graphs + used.reserve + used.kv_cache
        )
        assert abs(parts - budget) < 0.01
