"""The planner reproduces real vLLM startup logs (hack/bench/data/vllm_startup_logs.csv).

The same evaluation as hack/bench/planner_accuracy.py. Issue 30's targets (strict ±10% on
≥ 90% of the held-out V1-era runs, no plan promising a start vLLM refused, the newest
family's held-out median within ±2%) are reported by the benchmark; they are not all met
(docs/benchmarks/planner-accuracy.md). What is held here: every weight figure within ±5%,
no run that started planned as refused, every held-out run outside ±10%, every
over-promise and every failed start the plan lets through is one of the documented
misses below, so a new miss fails; and on dedicated GPUs (rows without an environment
class) the held-out V1-era share stays at or above the 90% target.
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
ENGINRECT = "https://github.com/enginrect/llmso/blob/"
ENGINRECT_06 = ENGINRECT + "06bc0e5821294198e2b574a35a113bcfaa1316b3/labs/"
ENGINRECT_OPT = (
    ENGINRECT
    + "068f7f454e7e9185d05a0c56e76b9b84bbef36c5/labs/optimization-in-practice-and-emerging-directions.md"
)
TIM_235B = "https://github.com/tim-roethig/ai-platform/blob/main/platform/docs/qwen3_235b_on_8xl40s.md"
HASH_SPLIT_SOURCES = {
    "https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/",
    "https://github.com/vllm-project/vllm/issues/23278",
    "https://github.com/vllm-project/vllm/issues/33155",
    TIM_235B,
    "https://github.com/tim-roethig/ai-platform/blob/main/platform/docs/ollama_vs_vllm.md",
    ENGINRECT_06 + "model-serving-and-llm-basics.md",
    ENGINRECT_06 + "serving-bottlenecks-and-optimization.md",
    ENGINRECT_06 + "advanced-optimization-and-serving-frameworks.md",
    ENGINRECT_OPT,
    "https://github.com/kubesimplify/website/blob/00b7452215ee797ddc20c5ed57144396d7cc301b/"
    "content/blog/running-a-big-llm-across-multiple-gpus-with-vllm.md",
    # issue 30, third round: logs committed to their authors' repositories
    "https://github.com/Logicrithm/orbit-ai/blob/09b4c1945e5d39c15167c959dac9247376149d3f/evidence/vllm.log",
    "https://github.com/abinavChandar/demo_env_l4/blob/097d5ab2cbe19e49c91325bbca531f50d76b419e/vllm.log",
    "https://github.com/faradawn/bench3/blob/446e08ca8bba29ccab26de8ec8a8986643b0a975/logs/vllm_server.log",
    "https://github.com/eslam-ahmed43/llm-lab/blob/0f01b470480ca624a0347b642d7d53897e085f31/logs/vllm_server.log",
}
# Environment classes a row may name (`environment` column), with why the planner, which
# plans dedicated cluster GPUs, is scored a second time without them.
ENVIRONMENT_CLASSES = {
    # vLLM charges every change of the device's non-torch memory since the worker started
    # to its own non-torch figure (vllm/utils/mem_utils.py, MemorySnapshot/memory_profiling);
    # a GPU that also drives a Windows desktop through WDDM, or serves a second vLLM, moves it
    "wsl2-shared-gpu",
}
# Held-out misses, reported in docs/benchmarks/planner-accuracy.md and not tuned away.
# vLLM 0.14.1 ran out of memory for gpt-oss-120b on one H100 at 0.97 with one sequence
# (vllm#33155); the failing allocation is not in the quoted log, the plan lets it start.
KNOWN_HELD_OUT_MISSES = {("https://github.com/vllm-project/vllm/issues/33155", "0.14.1")}
# Held-out KV figures outside ±10% (source, release, model): 0.10.2 on 8 PCIe L40S logged
# 0.21 GiB of non-torch memory where the TP 8 figure fitted to NVLink H100s plans 2.0
# (under-promise, dedicated GPUs); three runs of 0.27.1 on one WSL2 RTX 4090 (environment
# class wsl2-shared-gpu) counted 0.9-1.8 GiB more non-KV memory than the release's
# accounting and the same machine's other runs show (over-promise; run-to-run: the same
# AWQ model logged 1 GiB apart at 0.90 and 0.85; the 1.5B ran beside a second server).
KNOWN_HELD_OUT_KV_MISSES = {
    (TIM_235B, "0.10.2", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"),
    (ENGINRECT_06 + "serving-bottlenecks-and-optimization.md", "0.27.1", "Qwen/Qwen2.5-7B-Instruct"),
    (ENGINRECT_06 + "advanced-optimization-and-serving-frameworks.md", "0.27.1", "Qwen/Qwen3-14B-FP8"),
    (ENGINRECT_OPT, "0.27.1", "Qwen/Qwen2.5-1.5B-Instruct"),
}


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
        assert row["environment"] in ENVIRONMENT_CLASSES | {""}, row
        # the WSL2 lab machine is one environment, whatever its rows' errors
        assert (row["environment"] == "wsl2-shared-gpu") == ("enginrect/llmso" in row["source_url"]), row
        # a figure to compare, or only whether the plan lets it start (a run that started),
        # or refuses it (a failed start whose quoted failure the notes give)
        figures = any(row[key] for key in ("kv_cache_gib", "kv_cache_tokens", "weights_gib"))
        assert figures or row["start_failed"] == "false" or "memory" in row["notes"], row


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
    aggregate = report["aggregate"]
    v1_era = aggregate["heldOutV1Era"]
    assert v1_era["kv"]["rows"] >= 22
    overall = aggregate["overall"]
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
    assert overall["failedStart"]["promised"] == len(missed)
    assert overall["failedStart"]["rows"] >= 4
    # every held-out KV figure outside strict ±10% (and so every over-promise) is documented
    kv_missed = {
        (row["source"], row["vllmVersion"], row["model"])
        for row in report["rows"]
        if row["split"] == "holdout" and "kv" in row and not row["kv"]["withinTarget"]
    }
    assert kv_missed <= KNOWN_HELD_OUT_KV_MISSES
    over = {
        (row["source"], row["vllmVersion"], row["model"])
        for row in report["rows"]
        if "kv" in row and row["kv"]["overPromise"]
    }
    assert over <= KNOWN_HELD_OUT_KV_MISSES
    assert overall["v1OverPromises"] == len(missed) + len(over)
    assert v1_era["kv"]["withinTarget"] >= v1_era["kv"]["rows"] - len(KNOWN_HELD_OUT_KV_MISSES)
    # the strict targets are computed and reported, met or not
    results = aggregate["targetResults"]
    assert set(results) == set(aggregate["targets"])
    assert aggregate["targetsMet"] == all(t["met"] for t in results.values())
    assert results["holdoutV1EraKvShare"]["value"] == v1_era["kv"]["share"]
    assert results["promisedRefusedStarts"]["value"] == len(missed)


def test_dedicated_gpus_are_scored_without_the_environment_class(report: dict[str, Any]) -> None:
    """The same targets without the wsl2-shared-gpu rows: the held-out V1-era share is at
    the target there (the one miss left is the PCIe L40S TP 8 run), and it must stay."""
    aggregate = report["aggregate"]
    dedicated = aggregate["dedicatedGpuTargetResults"]
    assert set(dedicated) == set(aggregate["targets"])
    assert dedicated["holdoutV1EraKvShare"]["rows"] >= 11
    assert dedicated["holdoutV1EraKvShare"]["met"]
    assert dedicated["weights"]["met"] and dedicated["startedRefused"]["met"]
    # vllm#33155 is on a dedicated H100: not explained by the environment
    assert dedicated["promisedRefusedStarts"]["value"] == len(KNOWN_HELD_OUT_MISSES)
    assert aggregate["dedicatedGpuTargetsMet"] == all(t["met"] for t in dedicated.values())
    environments = aggregate["byEnvironment"]
    assert set(environments) == {"dedicated"} | ENVIRONMENT_CLASSES
    rows = sum(summary["rows"] for summary in environments.values())
    assert rows == aggregate["overall"]["rows"]


def test_the_newest_family_has_held_out_rows(report: dict[str, Any]) -> None:
    newest = report["aggregate"]["targetResults"]["newestFamilyMedian"]
    assert newest["family"] == "v1-graph-reserve"
    assert newest["rows"] >= 13
    # ±2% is the target (not met: docs/benchmarks/planner-accuracy.md); this bounds a regression
    assert abs(newest["value"]) <= 0.08


def test_accuracy_is_reported_for_every_release_family(report: dict[str, Any]) -> None:
    families = report["aggregate"]["byReleaseFamily"]
    assert {"v0-legacy", "v0", "v1-early", "v1", "v1-graph-reserve"} <= set(families)
    for row in report["rows"]:
        assert row["releaseFamily"] in families
        if "kv" in row and row["releaseFamily"].startswith("v1") and row["kv"]["overPromise"]:
            assert (row["source"], row["vllmVersion"], row["model"]) in KNOWN_HELD_OUT_KV_MISSES, row
