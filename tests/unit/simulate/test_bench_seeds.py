"""hack/bench/autoscale_seeds.py: per case, on how many seeds a baseline setting dominated
our default, and which settings did on every one; documents that are not seeds of one
sweep are refused, not combined."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.toolkit.scripts import load_script


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_script("hack/bench/autoscale_seeds.py", "bench_autoscale_seeds")


def frontier(case: str, ttft_by: list[str], both_by: list[str]) -> dict[str, Any]:
    return {
        "spec": "llama-8b-l4-a100",
        "trace": "azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
        "case": case,
        "replicasAtPeak": 10,
        "headroom": None,
        "part": "all",
        "ttft": {"dominated": bool(ttft_by), "dominatedBy": ttft_by},
        "ttftAndItl": {"dominated": bool(both_by), "dominatedBy": both_by},
    }


def document(seed: int, *frontiers: dict[str, Any], capacity_slos: str | None = None) -> dict[str, Any]:
    return {
        "benchmark": "autoscale",
        "seed": seed,
        "interruptionHoldMinutes": 10,
        "capacitySlos": capacity_slos,
        "frontiers": list(frontiers),
    }


def test_cases_are_counted_per_seed_and_settings_kept_only_when_on_every_seed(tool: ModuleType) -> None:
    combined = tool.combine(
        [
            (
                "a",
                document(
                    0, frontier("honest", ["RU 0.8", "SP 0.4"], ["RU 0.8"]), frontier("misdeclared", [], [])
                ),
            ),
            ("b", document(1, frontier("honest", ["RU 0.8"], []), frontier("misdeclared", ["QO 8"], []))),
            ("c", document(2, frontier("honest", ["RU 0.8", "SP 0.4"], []), frontier("misdeclared", [], []))),
        ]
    )
    assert combined["seeds"] == [0, 1, 2]
    honest, misdeclared = combined["cases"]
    assert honest["ttft"] == {"dominatedOn": [0, 1, 2], "byOnEverySeed": ["RU 0.8"]}
    assert honest["ttftAndItl"] == {"dominatedOn": [0], "byOnEverySeed": []}
    assert misdeclared["ttft"] == {"dominatedOn": [1], "byOnEverySeed": []}
    assert misdeclared["ttftAndItl"] == {"dominatedOn": [], "byOnEverySeed": []}
    assert combined["summary"] == {
        "ttft": {"everySeed": 1, "someSeed": 2},
        "ttftAndItl": {"everySeed": 0, "someSeed": 1},
    }
    assert combined["dominatedPerSeed"] == {
        "0": {"ttft": 1, "ttftAndItl": 1},
        "1": {"ttft": 2, "ttftAndItl": 0},
        "2": {"ttft": 1, "ttftAndItl": 0},
    }
    text = tool.table(combined)
    assert "3 / 1" in text and "every seed: RU 0.8" in text
    assert "ttft: 1 case on every seed, 2 on some" in text


@pytest.mark.parametrize(
    ("documents", "reason"),
    [
        ([document(0, frontier("honest", [], []))], "at least two"),
        ([document(0, frontier("honest", [], [])), document(0, frontier("honest", [], []))], "seed 0 twice"),
        (
            [document(0, frontier("honest", [], [])), document(1, frontier("misdeclared", [], []))],
            "not the same cases",
        ),
        (
            [
                document(0, frontier("honest", [], [])),
                document(1, frontier("honest", [], []), capacity_slos="ttft"),
            ],
            "capacitySlos",
        ),
        ([document(0, frontier("honest", [], [])), {"frontiers": []}], "no seed recorded"),
        (
            [
                document(0, frontier("honest", [], [])),
                {"seed": 1, "interruptionHoldMinutes": 10, "capacitySlos": None},
            ],
            "no frontiers",
        ),
        (
            [document(0, frontier("honest", [], []), frontier("honest", [], [])), document(1)],
            "judged twice",
        ),
        (
            [
                document(0, frontier("honest", [], [])),
                document(1, {**frontier("honest", [], []), "ttft": {}}),
            ],
            "no dominatedBy",
        ),
    ],
)
def test_documents_that_are_not_seeds_of_one_sweep_are_refused(
    tool: ModuleType, documents: list[dict[str, Any]], reason: str
) -> None:
    with pytest.raises(tool.SeedsError, match=reason):
        tool.combine([(f"doc{i}", doc) for i, doc in enumerate(documents)])


def test_the_command_prints_json_and_exits_2_with_the_reason(
    tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for seed in (0, 1):
        path = tmp_path / f"seed{seed}.json"
        path.write_text(json.dumps(document(seed, frontier("honest", ["RU 0.8"], []))), encoding="utf-8")
        paths.append(str(path))
    assert tool.main(paths) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"]["ttft"] == {"everySeed": 1, "someSeed": 1}
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    assert tool.main([paths[0], str(broken)]) == 2
    assert "broken.json" in capsys.readouterr().err


def reach(ours: int, **oracle: int) -> dict[str, Any]:
    """A document's `oracleDominance`: the same counts under both definitions."""
    entry = {"cases": 24, "ours": ours, "oracle": {name.replace("_", " "): n for name, n in oracle.items()}}
    return {"ttft": entry, "ttftAndItl": entry}


def test_the_oracle_margins_are_counted_per_seed_and_the_fewest_overall_named(tool: ModuleType) -> None:
    first = document(0, frontier("honest", ["RU 0.8"], [])) | {"oracleDominance": reach(3, u09=0, u1=1)}
    second = document(1, frontier("honest", [], [])) | {"oracleDominance": reach(5, u09=2, u1=0, u12=0)}
    oracle = tool.combine([("a", first), ("b", second)])["oracle"]
    assert oracle["ours"] == {"ttft": [3, 5], "ttftAndItl": [3, 5]}
    assert oracle["settings"]["u09"] == {"ttft": [0, 2], "ttftAndItl": [0, 2]}
    # u1: 1 + 0 under each definition; u12 ran on one seed only and is not judged overall.
    assert oracle["fewestOverall"] == 2
    assert oracle["bestOverall"] == ["u1"]
    assert oracle["medianPerSeed"] == {"ttft": [0.5, 0.0], "ttftAndItl": [0.5, 0.0]}
    text = tool.table(tool.combine([("a", first), ("b", second)]))
    assert "ours: 3 / 3, 5 / 5" in text
    assert "u1 (fewest over all seeds): 1 / 1, 0 / 0" in text


def test_documents_without_the_oracle_count_have_no_oracle_section_and_a_mix_is_refused(
    tool: ModuleType,
) -> None:
    old = [document(seed, frontier("honest", [], [])) for seed in (0, 1)]
    assert tool.combine([("a", old[0]), ("b", old[1])])["oracle"] is None
    new = old[1] | {"oracleDominance": reach(0, u1=0)}
    with pytest.raises(tool.SeedsError, match="a: no oracleDominance"):
        tool.combine([("a", old[0]), ("b", new)])
