"""The planner reproduces real vLLM startup logs (hack/bench/data/vllm_startup_logs.csv).

The same evaluation as hack/bench/planner_accuracy.py, held to the issue's targets: on
the held-out runs at least 90% within ±10% of the KV budget (or 1 GiB per GPU), every
weight figure within ±5%, no over-promise on a V1 release, every failed start infeasible.
"""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.toolkit.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "hack" / "bench" / "planner_accuracy.py"
DATA = ROOT / "hack" / "bench" / "data"


def _bench() -> ModuleType:
    return load_script(str(BENCH.relative_to(ROOT)), "planner_accuracy")


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    result: dict[str, Any] = _bench().evaluate(DATA / "vllm_startup_logs.csv", DATA / "model_arch.csv")
    return result


def test_every_row_is_a_sourced_real_log() -> None:
    with (DATA / "vllm_startup_logs.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) >= 20
    for row in rows:
        assert row["source_url"].startswith("https://github.com/"), row
        assert row["split"] in ("calibration", "holdout")
        assert any(row[key] for key in ("kv_cache_gib", "kv_cache_tokens", "weights_gib")), row


def test_held_out_runs_meet_the_targets(report: dict[str, Any]) -> None:
    holdout = report["aggregate"]["bySplit"]["holdout"]
    assert holdout["kv"]["rows"] >= 8
    assert holdout["kv"]["share"] >= 0.9
    overall = report["aggregate"]["overall"]
    assert overall["weights"]["withinTarget"] == overall["weights"]["rows"]
    assert overall["failedStart"]["infeasible"] == overall["failedStart"]["rows"] >= 3
    assert overall["v1OverPromises"] == 0
    assert report["aggregate"]["targetsMet"]


def test_accuracy_is_reported_for_every_release_family(report: dict[str, Any]) -> None:
    families = report["aggregate"]["byReleaseFamily"]
    assert {"v0-legacy", "v0", "v1-early", "v1"} <= set(families)
    for row in report["rows"]:
        assert row["releaseFamily"] in families
        if "kv" in row and row["releaseFamily"].startswith("v1"):
            assert not row["kv"]["overPromise"], row
