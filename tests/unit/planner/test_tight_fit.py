"""Tight fits say that their KV figure is planned on the safe side (issue 30)."""

from __future__ import annotations

from tests.unit.planner.test_warmup import _tier


def _memory_reason(reasons: list[str]) -> str:
    return next(r for r in reasons if r.startswith("per GPU: weights"))


def test_a_72b_at_tp2_on_h100_at_095_names_the_kv_it_may_leave_unused() -> None:
    tier = _tier(
        "Qwen/Qwen2.5-72B-Instruct", "vllm/vllm-openai:v0.33.0", 2, gpuMemoryUtilization=0.95, maxNumSeqs=1024
    )
    reason = _memory_reason(tier.reasons)
    assert tier.feasible, tier.reasons
    assert "tight fit" in reason and "GiB more KV per GPU" in reason, reason


def test_a_roomy_fit_says_nothing_of_it() -> None:
    tier = _tier("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.33.0")
    assert "tight fit" not in _memory_reason(tier.reasons)
