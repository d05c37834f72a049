"""Warm-up peaks after KV sizing enter feasibility (issue 30)."""

from __future__ import annotations

from typing import Any

from inferfleet.api.plan import TierPlan
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan


def _tier(model: str, image: str, tp: int = 1, **overrides: Any) -> TierPlan:
    spec = InferenceServiceSpec.model_validate(
        {
            "model": {"name": model},
            "workload": {
                "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
                "outputTokens": {"p50": 100, "p95": 500, "p99": 1000},
                "peakRequestsPerSecond": 1,
            },
            "serving": {"image": image},
            "tiers": [
                {
                    "name": "t",
                    "gpu": "H100-SXM-80GB",
                    "overrides": {"tensorParallelSize": tp, "maxModelLen": 16000, **overrides},
                }
            ],
        }
    )
    return plan(spec, default_catalogs(), "x").tiers[0]


def _risk(tier: TierPlan) -> list[str]:
    return [w for w in tier.warnings if w.startswith("start at risk")]


def test_qwen3_8b_at_096_with_512_seqs_is_flagged_with_the_number() -> None:
    # 0.22-0.32's Model Runner V2 (dense models from 0.25.1) warms the fp32 sampler up after
    # KV sizing without having profiled it, and up to 0.28 captures its CUDA graphs there
    # without an estimate: 0.65 + ~1.00 GiB + 512 × 151,936 × 16 B = 1,187 MiB against
    # 3.17 GiB left outside.
    for tp in (1, 2):
        tier = _tier(
            "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.28.0", tp, gpuMemoryUtilization=0.96, maxNumSeqs=512
        )
        risk = _risk(tier)
        assert risk, tier.warnings
        assert "1,187 MiB" in risk[0] and "512 rows × 151,936" in risk[0]
        assert "CUDA graphs ~1.00 GiB (captured after the KV cache" in risk[0]
        assert "gpu-memory-utilization ≤ 0.95" in risk[0]
        assert any(r.startswith("SLO at risk: start at risk") for r in tier.reasons)


def test_the_release_that_profiles_the_warm_up_is_not_flagged() -> None:
    tier = _tier("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.33.0", gpuMemoryUtilization=0.96, maxNumSeqs=512)
    assert tier.feasible and not _risk(tier)


def test_a_moe_model_on_the_v1_runner_is_not_flagged() -> None:
    # 0.25.1-0.28 run MoE models (gpt-oss) on the V1 model runner, whose profile sampled
    # with the fp32 pipeline and estimated the graph pool.
    tier = _tier("openai/gpt-oss-20b", "vllm/vllm-openai:v0.28.0", gpuMemoryUtilization=0.95, maxNumSeqs=1024)
    assert tier.feasible and not _risk(tier)


def test_planner_defaults_leave_room_for_the_warm_up() -> None:
    for image in ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.33.0"):
        for model in ("openai/gpt-oss-20b", "Qwen/Qwen3-8B"):
            tier = _tier(model, image)
            assert tier.feasible and not _risk(tier), (model, image)


def test_an_override_that_cannot_hold_the_unprofiled_warm_up_is_refused() -> None:
    tier = _tier("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.28.0", gpuMemoryUtilization=0.99, maxNumSeqs=1024)
    assert not tier.feasible
    assert "sampler warm-up" in tier.reasons[0] and "gpu-memory-utilization ≤" in tier.reasons[0]


def test_graphs_outside_the_budget_count_too() -> None:
    # llm-d/llm-d#787: Qwen3-32B TP 2 at 0.95 on vLLM 0.11.0 OOMed warming the sampler up.
    tier = _tier("Qwen/Qwen3-32B", "vllm/vllm-openai:v0.11.0", 2, gpuMemoryUtilization=0.95, maxNumSeqs=1024)
    risk = _risk(tier)
    assert risk and "CUDA graphs" in risk[0]
