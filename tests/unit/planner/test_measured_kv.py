"""Measured KV capacity (vllm:cache_config_info) joins the estimate in the plan."""

from __future__ import annotations

from inferfleet.autoscaling.policy.figures import figures_from_plan
from inferfleet.catalog import default_catalogs
from inferfleet.planner import MeasuredKvCapacity, plan
from tests.unit.planner.helpers import make_spec

CATALOGS = default_catalogs()


def _spec():  # type: ignore[no-untyped-def]
    return make_spec(
        workload={
            "inputTokens": {"p50": 2000, "p95": 12000, "p99": 16000},
            "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
            "peakRequestsPerSecond": 40,
        },
        tiers=[
            {"name": "h100", "gpu": "H100-SXM-80GB", "costPerGpuHour": 2.5},
            {"name": "l4", "gpu": "L4"},
        ],
    )


def test_a_measurement_below_the_estimate_shrinks_capacity_and_adds_replicas() -> None:
    spec = _spec()
    estimated = plan(spec, CATALOGS, "s").tier("h100")
    half = MeasuredKvCapacity(num_gpu_blocks=estimated.num_gpu_blocks // 8, block_size=16, pods=3)
    measured = plan(spec, CATALOGS, "s", measured_kv={"h100": half}).tier("h100")
    assert measured.measured_kv is not None
    assert measured.measured_kv.estimated_kv_cache_tokens == estimated.kv_cache_tokens
    assert measured.measured_kv.estimated_replicas_for_peak == estimated.replicas_for_peak
    assert measured.kv_cache_tokens == half.num_gpu_blocks * 16
    assert measured.concurrency_at_p95 < estimated.concurrency_at_p95
    assert measured.replicas_for_peak > estimated.replicas_for_peak
    reason = next(r for r in measured.reasons if r.startswith("KV capacity measured"))
    assert "over-promised" in reason and "3 pod(s)" in reason
    # the autoscaler's figures follow the measurement
    assert figures_from_plan(measured).max_concurrency < figures_from_plan(estimated).max_concurrency
    assert figures_from_plan(measured).usable_rps < figures_from_plan(estimated).usable_rps


def test_a_measurement_at_the_estimate_changes_nothing_but_the_record() -> None:
    spec = _spec()
    estimated = plan(spec, CATALOGS, "s").tier("h100")
    same = MeasuredKvCapacity(estimated.num_gpu_blocks, estimated.block_size, 1)
    measured = plan(spec, CATALOGS, "s", measured_kv={"h100": same}).tier("h100")
    assert measured.kv_cache_tokens == estimated.kv_cache_tokens
    assert measured.replicas_for_peak == estimated.replicas_for_peak
    assert not any("over-promised" in r for r in measured.reasons)


def test_unmeasured_and_unknown_tiers_keep_the_estimate() -> None:
    spec = _spec()
    estimated = plan(spec, CATALOGS, "s")
    measured = plan(
        spec,
        CATALOGS,
        "s",
        measured_kv={"gone": MeasuredKvCapacity(10, 16, 1), "l4": MeasuredKvCapacity(0, 16, 1)},
    )
    assert measured == estimated
