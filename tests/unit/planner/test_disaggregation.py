"""Prefill on one tier, decode on another: the pools and the ratio by hand-worked
arithmetic, when the split pays and when it does not, and what the plan says."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet import planner
from inferfleet.catalog import default_catalogs
from inferfleet.planner import disaggregation
from inferfleet.planner.performance import USABLE_SHARE_OF_ROOFLINE
from tests.toolkit import a_service, a_tier_plan

CATALOGS = default_catalogs()
GPUS = {"big": CATALOGS.gpu("H100-SXM-80GB"), "small": CATALOGS.gpu("L40S")}

# Two hand-made tiers: "big" prefills 40,000 tokens/s on 2 GPUs; "small" prefills only
# 2,000 and decodes with a 20 ms + 0.5 ms/sequence step on 1 GPU, 64 slots and 400,000
# tokens of KV. Both keep FP8 KV on one TP rank (big spans its 2 GPUs by pipeline), so
# vLLM's NixlConnector could join them.
BIG = a_tier_plan("big").with_(
    gpu="H100-SXM-80GB",
    tensorParallelSize=1,
    pipelineParallelSize=2,
    gpusPerReplica=2,
    kvCacheDtype="fp8",
    usableRps=1.0,
    maxNumSeqs=64,
    performance={"prefillTokensPerSecond": 40_000.0, "decodeStepBaseMs": 30.0, "decodeStepPerSeqMs": 1.0},
)
SMALL = a_tier_plan("small").with_(
    gpu="L40S",
    gpusPerReplica=1,
    tensorParallelSize=1,
    kvCacheDtype="fp8",
    usableRps=0.5,
    maxNumSeqs=64,
    kvCacheTokens=400_000,
    memoryGiB={"weights": 30, "activations": 2, "overhead": 2, "kvCache": 8},
    performance={"prefillTokensPerSecond": 2_000.0, "decodeStepBaseMs": 20.0, "decodeStepPerSeqMs": 0.5},
)


def service(mode: str = "auto", **workload: Any) -> Any:
    """Mean prompt (2 x 3,000 + 6,000) / 3 = 4,000 tokens, mean output (2 x 150 + 300) / 3 = 200;
    peak 10 req/s with the default 20 % headroom: 12 req/s to plan for."""
    fields = {
        "archetype": "rag",
        "inputTokens": {"p50": 3000, "p95": 6000, "p99": 8000},
        "outputTokens": {"p50": 150, "p95": 300, "p99": 400},
        "peakRequestsPerSecond": 10,
        "slo": {"ttftP99Ms": 5000, "itlP99Ms": 40},
        **workload,
    }
    return (
        a_service("rag")
        .workload(**fields)
        .tiers(
            {"name": "big", "gpu": "H100-SXM-80GB", "costPerGpuHour": 2.5},
            {"name": "small", "gpu": "L40S", "costPerGpuHour": 1.0},
        )
        .with_spec(serving={"disaggregation": {"mode": mode}})
        .spec()
    )


def test_the_pools_and_the_ratio_by_hand() -> None:
    spec = service()
    split = disaggregation.plan_disaggregation(spec, [BIG.build(), SMALL.build()], GPUS)
    assert split is not None and split.enabled
    # Prefill on big: 12 req/s x 4,000 tokens = 48,000 tokens/s at 40,000 x 0.75 = 30,000
    # a replica: 2 replicas, 4 GPUs (on small, 1,500 a replica: 32 of them). Decode on
    # small: the 40 ms ITL allows (40 - 20) / 0.5 = 40 sequences (within 64 slots and
    # 400,000 / 4,100 = 97 contexts), a 40 ms step: 40 x 1000 / 40 x 0.75 = 750 tokens/s a
    # replica; 12 x 200 = 2,400 tokens/s: 4 replicas.
    assert (split.prefill_tier, split.prefill_replicas) == ("big", 2)
    assert (split.decode_tier, split.decode_replicas) == ("small", 4)
    assert split.ratio == "1:1"  # 4 prefill GPUs : 4 decode GPUs
    assert disaggregation.prefill_tokens_per_s(BIG.build()) == 40_000 * USABLE_SHARE_OF_ROOFLINE
    assert disaggregation.decode_tokens_per_s(SMALL.build(), 40, 4100) == pytest.approx(750.0)
    # 4 GPUs x 2.5 + 4 x 1.0 = 14 $/h against the cheapest colocated fleet: small at
    # 0.5 req/s needs 24 replicas (24 $/h), big at 1.0 req/s 12 replicas of 2 GPUs (60 $/h).
    assert split.reasons[-1] == "pays: 14.00 $/h against 24.00 colocated on small"
    # The transfer: 4,000 tokens x 0.0005 GiB (50 GiB x 2 GPUs / 200,000 tokens) = 2 GiB over
    # the L40S's 6.25 GB/s (the slower link): 344 ms.
    assert split.transfer_ms == pytest.approx(2 * 2**30 / 6.25e9 * 1000, abs=0.01)
    assert "P:D 1:1 in GPUs" in split.reasons[0]


def test_short_prompts_stay_colocated_and_say_why() -> None:
    spec = service(inputTokens={"p50": 200, "p95": 400, "p99": 600})
    split = disaggregation.plan_disaggregation(spec, [BIG.build(), SMALL.build()], GPUS)
    assert split is not None and not split.enabled
    assert split.reasons[-1].startswith("does not pay: mean prompts of 267 tokens are below 500")


def test_a_transfer_the_ttft_slo_cannot_absorb_does_not_pay() -> None:
    spec = service(slo={"ttftP99Ms": 2000, "itlP99Ms": 40})  # 344 ms > 10 % of 2,000 ms
    split = disaggregation.plan_disaggregation(spec, [BIG.build(), SMALL.build()], GPUS)
    assert split is not None and not split.enabled
    assert "the KV transfer takes more than 10% of the 2000 ms TTFT SLO" in split.reasons[-1]


def test_on_splits_anyway_and_says_it_does_not_pay() -> None:
    spec = service(mode="on", inputTokens={"p50": 200, "p95": 400, "p99": 600})
    split = disaggregation.plan_disaggregation(spec, [BIG.build(), SMALL.build()], GPUS)
    assert split is not None and split.enabled
    assert split.reasons[-1].startswith("on as asked, though does not pay")


def _allowing(prefill: list[str] | None, decode: list[str] | None) -> Any:
    spec = service()
    serving = spec.serving
    wanted = serving.disaggregation.model_copy(update={"prefill_tiers": prefill, "decode_tiers": decode})
    return spec.model_copy(update={"serving": serving.model_copy(update={"disaggregation": wanted})})


def test_off_plans_nothing_and_allowed_tiers_are_kept() -> None:
    tiers = [BIG.build(), SMALL.build()]
    assert disaggregation.plan_disaggregation(service(mode="off"), tiers, GPUS) is None
    split = disaggregation.plan_disaggregation(_allowing(["small"], ["big"]), tiers, GPUS)
    assert split is not None and (split.prefill_tier, split.decode_tier) == ("small", "big")
    # A pool is a tier: one tier never plays both roles.
    alone = disaggregation.plan_disaggregation(_allowing(["small"], ["small"]), tiers, GPUS)
    assert alone is not None and not alone.enabled
    assert alone.reasons == [
        "no pair of two feasible tiers with prefill and decode rates (prefillTiers x decodeTiers)"
    ]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"tensorParallelSize": 2}, "their tensor-parallel sizes differ (2 and 1;"),
        ({"kvCacheDtype": "auto", "dtype": "bfloat16"}, "their KV caches differ in type (bf16 and fp8;"),
        ({"vllmRelease": "0.32.0"}, "they run different vLLM releases (0.32.0 and unknown)"),
    ],
)
def test_only_tiers_whose_engines_can_pass_kv_are_paired(change: dict[str, Any], why: str) -> None:
    """vLLM's NixlConnector refuses a peer of another release or KV type, and a different TP
    size needs a KV layout the operator does not set: such a pair is never chosen."""
    tiers = [BIG.with_(**change).build(), SMALL.build()]
    split = disaggregation.plan_disaggregation(service(), tiers, GPUS)
    assert split is not None and not split.enabled and split.prefill_tier is None
    assert split.reasons[0].startswith("no pair of tiers can pass the KV cache between them (prefill on big")
    assert why in split.reasons[0]


def test_the_planner_and_the_cli_contract_carry_it() -> None:
    from inferfleet.cli.plan import plan_document

    spec = service()
    plan = planner.plan(spec, CATALOGS, "rag")
    assert plan.disaggregation is not None
    document = plan_document(plan)
    assert document["disaggregation"]["reasons"] == plan.disaggregation.reasons
    assert "disaggregation" not in plan_document(planner.plan(service(mode="off"), CATALOGS, "rag"))
