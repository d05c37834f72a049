"""Plans per release, layouts judged with the settings they deploy, latency trade-offs."""

from __future__ import annotations

from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan
from inferfleet.planner.accounting import model_accounting
from inferfleet.planner.memory import estimate
from inferfleet.planner.releases import resolve_release
from inferfleet.planner.weights import body_scale, weight_layout

CATALOGS = default_catalogs()


def _doc(model: str, gpu: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": {"name": model},
        "workload": {
            "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
            "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
            "peakRequestsPerSecond": 10,
        },
        "tiers": [{"name": "t", "gpu": gpu, "gpusPerNode": 8}],
    }
    for key, value in extra.items():
        if key == "tier":
            doc["tiers"][0].update(value)
        elif key == "workload":
            doc["workload"].update(value)
        else:
            doc[key] = value
    return doc


def _tier(doc: dict[str, Any], **kwargs: Any) -> Any:
    return plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "t", **kwargs).tiers[0]


FIXED = {"overrides": {"tensorParallelSize": 1, "maxNumSeqs": 256, "maxNumBatchedTokens": 8192,
                       "maxModelLen": 8192, "quantization": "none", "kvCacheDtype": "auto"}}  # fmt: skip


def test_the_plan_models_the_release_the_image_names() -> None:
    doc = _doc("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM-80GB", tier=FIXED)
    by_image = {
        image: _tier({**doc, "serving": {"image": image}})
        for image in ("vllm/vllm-openai:v0.6.4", "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.21.0")
    }
    v0, v1, graphs = by_image.values()
    assert (v0.vllm_release, v0.release_family) == ("0.6.4", "v0")
    assert (v1.vllm_release, v1.release_family) == ("0.11.0", "v1")
    assert graphs.release_family == "v1-graph-reserve" and graphs.memory_gi_b.cuda_graphs > 0
    assert graphs.kv_cache_tokens < v1.kv_cache_tokens  # graphs come out of the budget before KV
    assert any("vLLM 0.6.4" in reason for reason in v0.reasons)
    # the operator's default image when the spec names none
    assert _tier(doc, default_image="vllm/vllm-openai:v0.6.4").vllm_release == "0.6.4"
    assert _tier(doc).vllm_release == "0.33.0"
    # per-tier images (a vendor's own build) win over the service's
    tiered = _tier(
        {**doc, "serving": {"image": "vllm/vllm-openai:v0.11.0"}}, tier_images={"t": "rocm/vllm:x_vllm0.8.3"}
    )
    assert tiered.vllm_release == "0.8.3"


def test_a_v0_release_profiles_all_batched_tokens_without_chunked_prefill() -> None:
    long = {"overrides": {**FIXED["overrides"], "maxModelLen": 32768, "maxNumBatchedTokens": 32768}}
    doc = _doc(
        "meta-llama/Llama-3.1-8B-Instruct", "A100-SXM-80GB", tier=long, serving={"vllmVersion": "0.5.4"}
    )
    tier = _tier(doc)
    assert tier.release_family == "v0-legacy"
    assert tier.memory_gi_b.activations > 3.0  # ≈108 KiB per profiled token


def test_an_unknown_release_holds_budget_back_and_says_how_to_fix_it() -> None:
    doc = _doc("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM-80GB", tier=FIXED)
    tagged = _tier({**doc, "serving": {"image": "vllm/vllm-openai:v0.11.0"}})
    latest = _tier({**doc, "serving": {"image": "vllm/vllm-openai:latest"}})
    assert latest.vllm_release == "unknown" and latest.memory_gi_b.reserve > 3
    assert latest.kv_cache_tokens < tagged.kv_cache_tokens
    assert any("spec.serving.vllmVersion" in reason for reason in latest.reasons)
    pinned = _tier({**doc, "serving": {"image": "vllm/vllm-openai:latest", "vllmVersion": "0.11.0"}})
    assert pinned.kv_cache_tokens == tagged.kv_cache_tokens


def test_v0_mla_pads_latents_and_pre_0_10_releases_give_windows_full_caches() -> None:
    lite = _doc("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", "A100-SXM-80GB", tier=FIXED)
    v0 = _tier({**lite, "serving": {"vllmVersion": "0.7.3"}})
    v1 = _tier({**lite, "serving": {"vllmVersion": "0.11.0"}})
    # 576 latent values × 2 bytes = 1152 B per layer, padded to 1280 B in V0
    per_token_v0 = v0.memory_gi_b.kv_cache * 2**30 / v0.kv_cache_tokens
    per_token_v1 = v1.memory_gi_b.kv_cache * 2**30 / v1.kv_cache_tokens
    assert abs(per_token_v0 / per_token_v1 - 1280 / 1152) < 0.01
    oss = _doc("openai/gpt-oss-20b", "H100-SXM-80GB", tier={"overrides": {"tensorParallelSize": 1}})
    before = _tier({**oss, "serving": {"vllmVersion": "0.9.2"}})
    after = _tier({**oss, "serving": {"vllmVersion": "0.10.1"}})
    assert before.max_concurrency < after.max_concurrency


def test_each_layout_is_judged_with_the_batch_settings_it_deploys() -> None:
    tier = _tier(_doc("meta-llama/Llama-3.3-70B-Instruct", "H100-SXM-80GB"))
    arch = CATALOGS.model("meta-llama/Llama-3.3-70B-Instruct")
    assert arch is not None and tier.feasible
    layout = weight_layout(
        arch, weight_format="fp8", dtype_bytes=2, tp=tier.tensor_parallel_size, pp=1, family="hopper",
        scale=body_scale(arch),
    )  # fmt: skip
    again = estimate(
        arch,
        layout,
        tp=tier.tensor_parallel_size,
        total_memory_gib=79.18,
        gpu_memory_utilization=tier.gpu_memory_utilization,
        kv_element_bytes=1,
        act_bytes=2,
        block_size=tier.block_size,
        max_model_len=tier.max_model_len,
        max_num_seqs=tier.max_num_seqs,
        max_num_batched_tokens=tier.max_num_batched_tokens,
        accounting=model_accounting(resolve_release(None, tier.vllm_release), arch, weight_format="fp8"),
    )
    # the memory the plan reports is the one its own flags produce
    assert again.kv_tokens == tier.kv_cache_tokens
    assert round(again.binding.activation_bytes / 2**30, 3) == tier.memory_gi_b.activations


def test_gpt_oss_120b_takes_one_h100_when_one_meets_the_target() -> None:
    doc = _doc(
        "openai/gpt-oss-120b",
        "H100-SXM-80GB",
        workload={
            "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
            "outputTokens": {"p50": 200, "p95": 600, "p99": 1000},
            "peakRequestsPerSecond": 1,
        },
    )
    # vLLM 0.11 sizes the KV cache before capturing CUDA graphs (0.20+ takes the graph
    # pool out of the budget first, and one H100 then holds fewer than the target).
    doc["serving"] = {"image": "vllm/vllm-openai:v0.11.0"}
    tier = _tier(doc)
    # ~36 requests in flight at peak; one H100 holds ~37 with the 2048-token chunk it
    # deploys (it would not with vLLM's default 8192-token profile)
    assert tier.feasible and tier.tensor_parallel_size == 1
    assert tier.concurrency_at_p95 >= 1 and tier.memory_gi_b.kv_cache > 0


def test_a_70b_chat_tier_at_30_rps_gets_prefill_chunks_larger_than_512() -> None:
    tier = _tier(
        _doc("meta-llama/Llama-3.3-70B-Instruct", "H100-SXM-80GB", workload={"peakRequestsPerSecond": 30})
    )
    assert tier.feasible and tier.max_num_batched_tokens > 512
    chunk_reason = next(r for r in tier.reasons if r.startswith("max-num-batched-tokens"))
    assert "P99 prompt" in chunk_reason and "ms" in chunk_reason  # TTFT weighed beside ITL


def test_slos_no_degree_meets_become_warnings_with_numbers() -> None:
    doc = _doc(
        "meta-llama/Llama-3.3-70B-Instruct",
        "H100-SXM-80GB",
        workload={
            "inputTokens": {"p50": 60000, "p95": 100000, "p99": 100000},
            "outputTokens": {"p50": 200, "p95": 400, "p99": 500},
            "peakRequestsPerSecond": 1,
            "archetype": "rag",
            "slo": {"ttftP99Ms": 2000, "itlP99Ms": 100},
        },
    )
    tier = _tier(doc)
    assert tier.feasible and tier.warnings
    assert any("TTFT" in w and "100,000 tokens" in w and "ms" in w for w in tier.warnings)
    assert any(reason.startswith("SLO at risk") for reason in tier.reasons)
    offline = _tier(_doc("meta-llama/Llama-3.1-8B-Instruct", "L4", workload={"mode": "offline"}))
    assert offline.warnings == []
