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


# --- issue 34: every baseline setting against our default, under both SLO definitions ---


def a_setting(
    policy: str, setting: str | None, attainment: float, gpu_hours: float, **extra: Any
) -> dict[str, Any]:
    """One run of the sweep; `setting` None is the policy as shipped."""
    row = a_run(policy, attainment=attainment, gpu_hours=gpu_hours, violations=0, **extra)
    row.update(
        setting=setting or f"{policy} (default)",
        default=setting is None,
        sloAttainmentWithItl=extra.get("sloAttainmentWithItl", attainment),
        sloViolationsWithItl=0,
    )
    return row


def test_a_baseline_setting_that_is_as_good_and_cheaper_dominates(bench: ModuleType) -> None:
    rows = [
        a_setting("inferfleet", None, 0.99, 10.0),
        a_setting("inferfleet", "inferfleet headroom=0", 0.995, 9.0),  # ours: never a rival
        a_setting("reactive-util", None, 0.98, 9.0),
        a_setting("reactive-util", "reactive-util target=0.6", 0.99, 9.5),  # dominates
        a_setting("reactive-util", "reactive-util target=0.5", 0.995, 10.0),  # dominates
        a_setting("queue-only", "queue-only threshold=1", 0.999, 10.5),  # pays more for more
        a_setting("static-peak", "static-peak x peak=0.4", 0.99, 10.0),  # a tie on both
        a_setting("oracle", "oracle u=0.9 bin=60s", 0.995, 5.0),  # the limit, not a rival
    ]
    (entry,) = bench.frontiers(rows)
    judged = entry["ttft"]
    assert judged["dominated"] is True
    assert judged["dominatedBy"] == ["reactive-util target=0.6", "reactive-util target=0.5"]
    summary = bench.dominance([entry])["trace.csv"]["ttft"]
    assert summary["dominated"] is True
    assert summary["dominatedCases"] == [
        {
            "spec": "bench-spec",
            "case": "honest",
            "replicasAtPeak": 10,
            "part": "all",
            "by": ["reactive-util target=0.6", "reactive-util target=0.5"],
        }
    ]


def test_the_criterion_is_put_to_every_oracle_setting_beside_ours(bench: ModuleType) -> None:
    rows = [
        a_setting("inferfleet", None, 0.99, 10.0),
        a_setting("reactive-util", "reactive-util target=0.8", 0.99, 8.0),  # dominates ours
        a_setting("oracle", "oracle u=0.9 bin=15s", 0.995, 6.0),  # the limit: none beats it
        a_setting("oracle", "oracle u=0.5 bin=5s", 0.99, 12.0),  # costly: reactive-util wins it
        a_setting("oracle", "oracle u=1.2 bin=60s", 0.90, 7.9, sloAttainmentWithItl=0.95),
    ]
    (entry,) = bench.frontiers(rows)
    assert entry["ttft"]["oracleDominated"] == ["oracle u=0.5 bin=5s"]
    reach = bench.oracle_dominance([entry, entry])["ttft"]
    assert reach["cases"] == 2 and reach["ours"] == 2
    assert reach["oracle"] == {"oracle u=0.5 bin=5s": 2, "oracle u=0.9 bin=15s": 0, "oracle u=1.2 bin=60s": 0}
    assert reach["oracleFewest"] == 0
    assert reach["oracleBest"] == ["oracle u=0.9 bin=15s", "oracle u=1.2 bin=60s"]


def test_each_slo_definition_is_judged_on_its_own_share(bench: ModuleType) -> None:
    # Reactive-util reaches our TTFT share for less by letting decode steps crawl.
    rows = [
        a_setting("inferfleet", None, 0.99, 10.0, sloAttainmentWithItl=0.98),
        a_setting("reactive-util", "reactive-util target=0.8", 0.99, 9.0, sloAttainmentWithItl=0.80),
    ]
    (entry,) = bench.frontiers(rows)
    assert entry["ttft"]["dominatedBy"] == ["reactive-util target=0.8"]
    assert entry["ttftAndItl"]["dominated"] is False


def test_a_split_series_is_judged_on_its_held_out_part_in_the_sweep_too(bench: ModuleType) -> None:
    def held_out(attainment: float, gpu_hours: float) -> list[dict[str, Any]]:
        first = _part(0.0, 0.999, 1, 1.0)  # every baseline would win here
        last = _part(7 * bench.DAY_S, attainment, 0, gpu_hours) | {"sloAttainmentWithItl": attainment}
        return [first | {"sloAttainmentWithItl": 0.999}, last]

    rows = [
        a_setting("inferfleet", None, 0.9, 100.0, rateSeries=True, parts=held_out(0.99, 50.0)),
        a_setting("reactive-util", "reactive-util target=0.9", 0.99, 50.0, rateSeries=True,
                  parts=held_out(0.98, 49.0)),
    ]  # fmt: skip
    (entry,) = bench.frontiers(rows)
    assert entry["part"] == "from day 7"
    assert entry["ttft"]["ours"]["gpuHours"] == 50.0
    assert entry["ttft"]["dominated"] is False


def test_a_request_trace_with_a_warm_up_is_judged_from_that_minute(bench: ModuleType) -> None:
    # The bundled code hour through the 8B spec: the first ten minutes, where no policy
    # has any history, are reported apart and left out of the verdicts.
    spec = bench.SPECS / "llama-8b-l4-a100.yaml"
    trace = bench.BUNDLED_TRACES / "azure-llm-2023-code.csv"
    rows = bench.run_case(spec, trace, 10, ["static-peak", "inferfleet"], 0, warm_up_min=10)
    for row in rows:
        first, rest = row["parts"]
        assert (first["startS"], first["endS"], rest["startS"]) == (0.0, 600.0, 600.0)
        assert first["requests"] + rest["requests"] == row["requests"]
        assert first["gpuHours"] + rest["gpuHours"] == pytest.approx(row["gpuHours"], abs=0.002)
    (entry,) = bench.frontiers(rows)
    assert entry["part"] == "from minute 10"
    ours = next(r for r in rows if r["policy"] == "inferfleet")
    assert entry["ttft"]["ours"]["sloAttainment"] == ours["parts"][-1]["sloAttainment"]
    assert entry["ttft"]["ours"]["sloAttainment"] != ours["sloAttainment"]
    # --split-day is for rate series: a request trace without a warm-up is judged whole.
    (whole, _) = bench.run_case(spec, trace, 10, ["inferfleet", "static-peak"], 0, split_day=7)
    assert "parts" not in whole
    assert bench.part_label(7 * bench.DAY_S) == "from day 7"


def test_documents_judged_from_another_minute_are_not_merged(bench: ModuleType, tmp_path: Any) -> None:
    earlier = tmp_path / "base.json"
    earlier.write_text('{"warmUpMinutes": 10, "runs": [{"spec": "s"}]}', encoding="utf-8")
    with pytest.raises(SystemExit, match="judged with --warm-up-minutes 10, this run with None"):
        bench.merged([], [earlier])
    with pytest.raises(SystemExit, match="warm-up-minutes None, this run with 10"):
        whole = tmp_path / "whole.json"
        whole.write_text('{"runs": []}', encoding="utf-8")
        bench.merged([], [whole], 10)


def test_the_oracle_front_gives_its_gpu_hours_at_our_share(bench: ModuleType) -> None:
    oracle = [
        {"sloAttainment": 0.90, "gpuHours": 4.0},
        {"sloAttainment": 0.95, "gpuHours": 5.0},
        {"sloAttainment": 0.94, "gpuHours": 6.0},  # dominated: not on the front
        {"sloAttainment": 0.99, "gpuHours": 9.0},
    ]
    front = bench.pareto(oracle)
    assert [p["gpuHours"] for p in front] == [4.0, 5.0, 9.0]
    assert bench.gpu_hours_at(front, 0.97) == (pytest.approx(7.0), "interpolated")
    assert bench.gpu_hours_at(front, 0.99) == (9.0, "interpolated")
    assert bench.gpu_hours_at(front, 0.80) == (4.0, "atMost")  # it might need even less
    assert bench.gpu_hours_at(front, 0.995) == (None, "unreached")
    rows = [a_setting("inferfleet", None, 0.97, 10.5)] + [
        a_setting("oracle", f"oracle {i}", p["sloAttainment"], p["gpuHours"]) for i, p in enumerate(oracle)
    ]
    (entry,) = bench.frontiers(rows)
    assert entry["ttft"]["vsOracle"] == 1.5  # 10.5 / 7.0
    assert bench.dominance([entry])["trace.csv"]["ttft"]["vsOracleRange"] == [1.5, 1.5]


def test_the_sweep_covers_every_knob_and_the_oracle(bench: ModuleType) -> None:
    policies = ["inferfleet", "static-peak", "reactive-util", "queue-only", "oracle"]
    settings = bench.sweep_settings(policies, rate_series=False, sweep=True)
    labels = [s.label for s in settings]
    assert labels[:4] == [f"{p} (default)" for p in policies[:4]]
    grid = bench.SWEEP_REQUESTS
    for policy in policies[:4]:
        assert sum(s.policy == policy and s.knob is not None for s in settings) == len(grid[policy])
    oracles = [s for s in settings if s.policy == "oracle"]
    assert len(oracles) == len(grid["oracle"]) * len(bench.ORACLE_BINS_REQUESTS) * 2  # with and without ITL
    assert bench.sweep_settings(policies, rate_series=False, sweep=False) == settings[:4]
