"""`inferfleet simulate`: the JSON contract, tables, plots, and exit 2 on bad input."""

from __future__ import annotations

import importlib
import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferfleet.cli import COMMAND_MODULES, app
from tests.conftest import EXAMPLES_DIR
from tests.toolkit import a_tier_plan

for _module in COMMAND_MODULES:  # register every subcommand, as main() does
    importlib.import_module(_module)

SPEC = EXAMPLES_DIR / "llama-70b-chat.yaml"
CONTRACT = (
    "policy",
    "requests",
    "sloAttainment",
    "ttftP50Ms",
    "ttftP99Ms",
    "gpuHours",
    "costUsd",
    "scaleUps",
    "scaleDowns",
)


def tier(name: str, usable_rps: float) -> dict[str, object]:
    """A plan tier with the serving figures the replay reads, on a GPU no catalog knows."""
    return (
        a_tier_plan(name)
        .on("X")
        .with_(
            maxModelLen=16384, maxNumSeqs=64, maxNumBatchedTokens=8192,
            memoryGiB={"weights": 1, "activations": 1, "overhead": 1, "kvCache": 1},
            kvCacheTokens=400000, maxConcurrency=24.0, concurrencyAtP95=64.0, reasons=["test"],
            performance={"prefillTokensPerSecond": 12000, "decodeStepBaseMs": 15, "decodeStepPerSeqMs": 0.2},
        )
        .capacity(usable_rps=usable_rps, cold_start_s=90.0, peak=10)
        .wire_dict()
    )  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"name": "llama-70b-chat", "tiers": [tier("h100", 2.5), tier("a100", 1.5)]}))
    rows = "".join(f"{i * 0.5},M,800,150,950,Conversation log\n" for i in range(2400))
    trace = tmp_path / "trace.csv"
    trace.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + rows)
    return plan, trace


def test_json_contract(files: tuple[Path, Path]) -> None:
    plan, trace = files
    args = ["simulate", "-f", str(SPEC), "--trace", str(trace), "--plan", str(plan), "-o", "json"]
    result = CliRunner().invoke(app, [*args, "--policy", "inferfleet"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert all(key in document for key in CONTRACT)
    assert document["policy"] == "inferfleet"
    assert document["requests"] == 2400
    # The replay's run time, by the clock the command (not the pure replay) reads.
    assert isinstance(document["wallSeconds"], float) and document["wallSeconds"] >= 0.0
    every = CliRunner().invoke(app, [*args, "--policy", "all", "--rate-scale", "2"])
    assert [row["policy"] for row in json.loads(every.stdout)] == [
        "inferfleet", "static-peak", "reactive-util", "queue-only",
    ]  # fmt: skip


def test_table_and_plot(files: tuple[Path, Path], tmp_path: Path) -> None:
    plan, trace = files
    png = tmp_path / "out.png"
    args = ["simulate", "-f", str(SPEC), "--trace", str(trace), "--plan", str(plan), "--plot", str(png)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "inferfleet" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "hpa"], "unknown policy"),
        (["--format", "parquet"], "unknown trace format"),
        (["--rate-scale", "0"], "must be > 0"),
    ],
)
def test_bad_flags_exit_2(files: tuple[Path, Path], extra: list[str], message: str) -> None:
    plan, trace = files
    result = CliRunner().invoke(
        app, ["simulate", "-f", str(SPEC), "--trace", str(trace), "--plan", str(plan), *extra]
    )
    assert result.exit_code == 2
    assert message in result.output


def test_missing_trace_exits_2(files: tuple[Path, Path], tmp_path: Path) -> None:
    plan, _ = files
    result = CliRunner().invoke(
        app, ["simulate", "-f", str(SPEC), "--trace", str(tmp_path / "nope.csv"), "--plan", str(plan)]
    )
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_drift_report_and_replan_from_the_observed_workload(tmp_path: Path) -> None:
    """The 8B example declares prompts of 600 tokens; replay prompts of 6,000: the table
    says the plan is wrong, the JSON carries the verdict, and the observed workload the
    simulated engines reported plans with `plan --observed-workload`."""
    spec = EXAMPLES_DIR / "llama-8b-chat.yaml"
    rows = "".join(f"{i * 0.5},M,{6000 if i % 2 else 3000},150,0,Conversation log\n" for i in range(1200))
    trace = tmp_path / "long.csv"
    trace.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + rows)
    observed = tmp_path / "observed.json"
    args = ["simulate", "-f", str(spec), "--trace", str(trace), "--policy", "inferfleet"]
    table = CliRunner().invoke(app, [*args, "--observed-workload-out", str(observed)])
    assert table.exit_code == 0, table.output
    assert "WorkloadDrift=True (PromptsRejected)" in table.stdout
    assert f"inferfleet plan -f {spec} --observed-workload {observed}" in table.stdout
    document = json.loads(CliRunner().invoke(app, [*args, "-o", "json"]).stdout)
    verdict = document["workloadDrift"]
    assert verdict["drifted"] is True and verdict["reason"] == "PromptsRejected"
    # Half the prompts (6,000) are beyond max-model-len 5,120: none reach the histograms.
    assert verdict["observed"]["rejectedShare"] == pytest.approx(0.5, abs=0.02)
    assert document["rejected"] == 600
    written = json.loads(observed.read_text())
    assert written["impliedInputTokens"]["p99"] >= 10240
    planned = CliRunner().invoke(
        app, ["plan", "-f", str(spec), "--observed-workload", str(observed), "-o", "json"]
    )
    assert planned.exit_code == 0, planned.output
    [l4, _] = json.loads(planned.stdout)["tiers"]
    assert l4["maxModelLen"] > 10240
    declared = json.loads(CliRunner().invoke(app, ["plan", "-f", str(spec), "-o", "json"]).stdout)
    assert declared["tiers"][0]["maxModelLen"] == 5120


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("inputTokens: {p50: 10, p95: 20, p99: 30}\n", "outputTokens: missing"),
        ("inputTokens: {p50: 30, p95: 20, p99: 10}\noutputTokens: {p50: 1, p95: 2, p99: 3}\n", "p50 <= p95"),
        ("[1, 2]\n", "expected a mapping"),
    ],
)
def test_a_bad_observed_workload_file_exits_2(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "observed.yaml"
    path.write_text(content)
    result = CliRunner().invoke(app, ["plan", "-f", str(SPEC), "--observed-workload", str(path)])
    assert result.exit_code == 2
    assert message in result.output


def test_decisions_are_written_tick_by_tick(files: tuple[Path, Path], tmp_path: Path) -> None:
    plan, trace = files
    out = tmp_path / "decisions.jsonl"
    args = ["simulate", "-f", str(SPEC), "--trace", str(trace), "--plan", str(plan), "-o", "json"]
    result = CliRunner().invoke(app, [*args, "--policy", "all", "--rate-scale", "4", "--decisions", str(out)])
    assert result.exit_code == 0, result.output
    summaries = {row["policy"]: row for row in json.loads(result.stdout)}
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for name, summary in summaries.items():
        mine = [record for record in records if record["policy"] == name]
        # One line per autoscaler tick, after the warm-up decision that sized the start.
        assert len(mine) == summary["ticks"] + 1
        times = [record["timeS"] for record in mine]
        assert times[0] == 0.0 and times == sorted(times)
        # Each decision is what the next tick starts from: the replay applied it.
        for before, after in itertools.pairwise(mine):
            for tier_before, tier_after in zip(before["tiers"], after["tiers"], strict=True):
                assert tier_after["current"] == tier_before["replicas"]
        assert {tier["name"] for tier in mine[0]["tiers"]} == {"h100", "a100"}
        assert all("ready" in tier["observed"] for record in mine for tier in record["tiers"])
    ours = [record for record in records if record["policy"] == "inferfleet"]
    # The scale-ups the summary counts are the decisions that raised a tier.
    raised = sum(
        1 for record in ours for tier in record["tiers"] if tier["replicas"] > (tier["current"] or 0)
    )
    assert raised == summaries["inferfleet"]["scaleUps"] > 0
    assert any(tier["signal"] == "predictive" for record in ours for tier in record["tiers"])


def test_an_unwritable_decisions_path_exits_2(files: tuple[Path, Path], tmp_path: Path) -> None:
    plan, trace = files
    target = tmp_path / "missing-dir" / "decisions.jsonl"
    result = CliRunner().invoke(
        app,
        ["simulate", "-f", str(SPEC), "--trace", str(trace), "--plan", str(plan), "--decisions", str(target)],
    )
    assert result.exit_code == 2
    assert "cannot write" in result.output
