"""hack/bench/autoscale.py judges every run against the autoscaling issue's bounds:
the verdicts docs/benchmarks/autoscaler.md quotes come from here, so they are tested like code."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.toolkit.scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("hack/bench/autoscale.py", "bench_autoscale")


def a_run(
    policy: str, *, attainment: float, gpu_hours: float, violations: int, **extra: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "policy": policy,
        "spec": "bench-spec",
        "traceFile": "trace.csv",
        "case": "honest",
        "replicasAtPeak": 10,
        "headroom": None,
        "rateSeries": False,
        "requests": 1000,
        "sloAttainment": attainment,
        "gpuHours": gpu_hours,
        "sloViolations": violations,
        "rejected": 0,
    }
    row.update(extra)
    return row


def verdicts(bench: ModuleType, rows: list[dict[str, Any]]) -> dict[str, bool]:
    judged = bench.targets(bench.compare(rows))
    assert judged["judged"] == len(judged["bounds"])
    assert judged["met"] == sum(b["met"] for b in judged["bounds"])
    assert judged["missed"] == [b for b in judged["bounds"] if not b["met"]]
    return {b["target"]: b["met"] for b in judged["bounds"]}


def test_an_honest_hour_needs_99_percent_at_most_0_9_of_static_peak(bench: ModuleType) -> None:
    rows = [
        a_run("inferfleet", attainment=0.995, gpu_hours=8.0, violations=5),
        a_run("static-peak", attainment=1.0, gpu_hours=10.0, violations=0),
    ]
    assert verdicts(bench, rows) == {"within SLO": True, "GPU-hours vs static-peak": True}
    rows[0].update(sloAttainment=0.98, gpuHours=9.5)
    assert verdicts(bench, rows) == {"within SLO": False, "GPU-hours vs static-peak": False}


def test_a_misdeclared_hour_is_judged_against_reactive_util(bench: ModuleType) -> None:
    rows = [
        a_run("inferfleet", attainment=0.97, gpu_hours=10.9, violations=30, case="misdeclared"),
        a_run("reactive-util", attainment=0.97, gpu_hours=10.0, violations=30, case="misdeclared"),
    ]
    assert verdicts(bench, rows) == {"within SLO vs reactive-util": True, "GPU-hours vs reactive-util": True}
    rows[0].update(sloAttainment=0.969, gpuHours=11.2)
    assert verdicts(bench, rows) == {
        "within SLO vs reactive-util": False,
        "GPU-hours vs reactive-util": False,
    }


def test_a_bound_whose_baseline_did_not_run_is_not_judged(bench: ModuleType) -> None:
    rows = [a_run("inferfleet", attainment=0.9, gpu_hours=1.0, violations=100, case="misdeclared")]
    assert verdicts(bench, rows) == {}


def _part(start_s: float, attainment: float, violations: int, gpu_hours: float) -> dict[str, Any]:
    return {
        "startS": start_s,
        "sloAttainment": attainment,
        "sloViolations": violations,
        "gpuHours": gpu_hours,
    }


def test_a_multi_day_series_is_judged_on_its_held_out_part(bench: ModuleType) -> None:
    day = bench.DAY_S

    def series(
        policy: str, dev: tuple[float, int, float], held_out: tuple[float, int, float]
    ) -> dict[str, Any]:
        return a_run(
            policy,
            attainment=0.99,
            gpu_hours=dev[2] + held_out[2],
            violations=dev[1] + held_out[1],
            rateSeries=True,
            parts=[_part(0.0, *dev), _part(7 * day, *held_out)],
        )

    # Ours is worse than every baseline on the first part and better on the held-out one.
    rows = [
        series("inferfleet", (0.95, 500, 100.0), (0.995, 50, 60.0)),
        series("reactive-util", (0.999, 10, 50.0), (0.99, 100, 61.0)),
        series("queue-only", (0.999, 10, 50.0), (0.8, 2000, 300.0)),
        series("static-peak", (1.0, 0, 100.0), (1.0, 0, 100.0)),
    ]
    judged = bench.targets(bench.compare(rows))
    assert {b["part"] for b in judged["bounds"]} == {"from day 7"}
    assert judged["missed"] == []
    assert {b["target"] for b in judged["bounds"]} == {
        "within SLO",
        "GPU-hours vs static-peak",
        "violations vs reactive-util",
        "GPU-hours vs reactive-util",
        "violations vs queue-only",
        "GPU-hours vs queue-only",
    }
    # One GPU-hour more than reactive-util on the held-out part is a miss, named.
    rows[0]["parts"][1]["gpuHours"] = 62.0
    missed = bench.targets(bench.compare(rows))["missed"]
    assert [(b["target"], b["value"], b["bound"]) for b in missed] == [
        ("GPU-hours vs reactive-util", round(62.0 / 61.0, 6), 1.0)
    ]


def test_a_multi_day_series_without_a_split_is_judged_whole(bench: ModuleType) -> None:
    rows = [
        a_run("inferfleet", attainment=0.992, gpu_hours=70.0, violations=80, rateSeries=True),
        a_run("reactive-util", attainment=0.99, gpu_hours=70.0, violations=100, rateSeries=True),
        a_run("static-peak", attainment=1.0, gpu_hours=100.0, violations=0, rateSeries=True),
    ]
    assert verdicts(bench, rows) == {
        "within SLO": True,
        "GPU-hours vs static-peak": False,  # 0.7 > 0.65
        "violations vs reactive-util": True,
        "GPU-hours vs reactive-util": True,  # equal is no more
    }


def test_a_case_is_dominated_only_by_a_baseline_no_worse_on_both_axes(bench: ModuleType) -> None:
    rows = [
        a_run("inferfleet", attainment=0.90, gpu_hours=8.0, violations=100),
        a_run("static-peak", attainment=0.99, gpu_hours=16.0, violations=10),
        a_run("reactive-util", attainment=0.60, gpu_hours=4.0, violations=400),
        a_run("queue-only", attainment=0.70, gpu_hours=30.0, violations=300),
    ]
    judged = bench.targets(bench.compare(rows))
    assert judged["cases"] == 1
    assert judged["dominated"] == []  # each baseline pays on one axis for the other
    rows[2].update(sloAttainment=0.90)  # as good within SLO, for half the GPU-hours
    assert [d["by"] for d in bench.targets(bench.compare(rows))["dominated"]] == [["reactive-util"]]
    rows[2].update(sloAttainment=0.90, gpuHours=8.0)  # a tie on both axes dominates nothing
    assert bench.targets(bench.compare(rows))["dominated"] == []


def test_a_split_rate_series_is_judged_for_dominance_on_its_held_out_part(bench: ModuleType) -> None:
    def part(attainment: float, gpu_hours: float) -> dict[str, Any]:
        return {"startS": 0.0, "sloAttainment": attainment, "sloViolations": 0, "gpuHours": gpu_hours}

    def series(policy: str, held_out: dict[str, Any]) -> dict[str, Any]:
        first = part(0.99, 10.0)
        return a_run(
            policy, attainment=0.99, gpu_hours=20.0, violations=0, rateSeries=True, parts=[first, held_out]
        )

    held_out = {**part(0.99, 10.0), "startS": 7 * 86_400.0}
    rows = [series("inferfleet", held_out), series("reactive-util", {**held_out, "gpuHours": 9.0})]
    dominated = bench.targets(bench.compare(rows))["dominated"]
    assert [(d["part"], d["by"]) for d in dominated] == [("from day 7", ["reactive-util"])]


def test_with_itl_the_bounds_are_judged_on_requests_within_both_slos(bench: ModuleType) -> None:
    rows = [
        a_run("inferfleet", attainment=0.97, gpu_hours=10.0, violations=30, case="misdeclared"),
        a_run("reactive-util", attainment=0.98, gpu_hours=10.0, violations=20, case="misdeclared"),
    ]
    rows[0].update(sloAttainmentWithItl=0.90, sloViolationsWithItl=100)
    rows[1].update(sloAttainmentWithItl=0.60, sloViolationsWithItl=400)  # fast first tokens, slow decode
    ttft_only = bench.targets(bench.compare(rows))
    with_itl = bench.targets(bench.compare(rows, with_itl=True))
    assert [b["target"] for b in ttft_only["missed"]] == ["within SLO vs reactive-util"]
    assert with_itl["missed"] == []
    assert [b["value"] for b in with_itl["bounds"]][:1] == [0.90]
