"""hack/bench/autoscale_case.py: one benchmark case minute by minute, per setting, and our
policy's replica changes with their reasons. Its minutes must add up to the run the
benchmark judges, or it would explain a difference that is not there."""

from __future__ import annotations

import itertools
from types import ModuleType
from typing import Any

import pytest

from tests.toolkit.scripts import load_script


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_script("hack/bench/autoscale_case.py", "bench_autoscale_case")


@pytest.fixture(scope="module")
def replayed(tool: ModuleType) -> dict[str, Any]:
    bench = tool._bench()
    spec = next(p for p in bench.SPECS.glob("*.yaml") if "8b" in p.name)
    trace = bench.find_traces(bench.BUNDLED_TRACES, None)[0]
    result: dict[str, Any] = tool.replay(spec, trace, "honest", 10, ["inferfleet", "static-peak:0.55"])
    return result


def test_the_minutes_add_up_to_the_judged_run(tool: ModuleType, replayed: dict[str, Any]) -> None:
    span_min = int(replayed["trace"].span_s // 60.0) + 1
    doc = tool.document(replayed, range(span_min), why=False)
    assert sum(row["arrivalsPerSecond"] * 60.0 for row in doc["minutes"]) == pytest.approx(
        replayed["trace"].arrival_s.shape[0], abs=0.5
    )
    for text, (_, summary, _) in replayed["runs"].items():
        late = sum(row[text]["late"] for row in doc["minutes"])
        assert late == summary["sloViolations"]
        assert doc["settings"][text]["gpuHours"] == summary["gpuHours"]


def test_a_constant_fleet_holds_and_ours_moves_for_its_reasons(
    tool: ModuleType, replayed: dict[str, Any]
) -> None:
    span_min = int(replayed["trace"].span_s // 60.0) + 1
    doc = tool.document(replayed, range(span_min), why=True)
    held = {
        row["static-peak:0.55"]["desired"]["l4"]
        for row in doc["minutes"]
        if "desired" in row["static-peak:0.55"]
    }
    assert len(held) == 1 and held.pop() > 0
    assert set(doc["decisions"]) == {"inferfleet"}  # only our policy gives reasons
    changes = doc["decisions"]["inferfleet"]
    assert changes, "the code hour's bursts move our fleet"
    for tier in {c["tier"] for c in changes}:
        mine = [c for c in changes if c["tier"] == tier]
        for before, after in itertools.pairwise(mine):
            assert after["from"] == before["to"] and after["timeSeconds"] >= before["timeSeconds"]
        assert all(c["from"] != c["to"] and c["reason"] for c in mine)
    # A change shows in the minute it was made (the minute's last tick, unless changed again).
    last = changes[-1]
    minute = int(last["timeSeconds"] // 60)
    later = [c for c in changes if c["tier"] == last["tier"] and int(c["timeSeconds"] // 60) == minute]
    assert doc["minutes"][minute]["inferfleet"]["desired"][last["tier"]] == later[-1]["to"]
    # A window of minutes keeps only its own rows and changes.
    window = tool.document(replayed, range(3, 9), why=True)
    assert [row["minute"] for row in window["minutes"]] == list(range(3, 9))
    assert all(180.0 <= c["timeSeconds"] < 540.0 for c in window["decisions"]["inferfleet"])
    text = tool.table(window)
    assert sum("->" in line for line in text.splitlines()) == len(window["decisions"]["inferfleet"])
    assert "inferfleet: within TTFT" in text and "static-peak:0.55: within TTFT" in text


def test_settings_and_minutes_are_checked_before_replaying(tool: ModuleType) -> None:
    assert tool.parse_setting("inferfleet") == ("inferfleet", None)
    assert tool.parse_setting("reactive-util:0.7") == ("reactive-util", 0.7)
    for bad, says in (
        ("oracle:1", "unknown policy 'oracle'"),
        ("static-peak:x", "must be a number"),
        ("queue-only:-1", "at least 0"),
        ("queue-only:nan", "finite"),
    ):
        with pytest.raises(ValueError, match=says):
            tool.parse_setting(bad)
    assert tool.parse_minutes("3-8", 6) == range(3, 6)
    assert tool.parse_minutes("4", 60) == range(4, 5)
    assert tool.parse_minutes(None, 3) == range(3)
    for bad in ("5-2", "a-b", "-3"):
        with pytest.raises(ValueError, match="--minutes"):
            tool.parse_minutes(bad, 60)
    with pytest.raises(SystemExit) as exited:
        tool.main(["--setting", "bogus"])
    assert exited.value.code == 2
