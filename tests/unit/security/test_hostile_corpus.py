"""The hostile corpus through `validate`, `plan` and `render`: no traceback, ever, and the
security-relevant values refused at validation with their field path.

The commands run in-process (typer's runner) on every entry of `corpus.entries()`; how
long each run takes is measured by hack/bench/hostile_corpus.py, not here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferfleet.cli import COMMAND_MODULES, app
from tests.unit.security.corpus import _base as base
from tests.unit.security.corpus import _dump as dump
from tests.unit.security.corpus import entries

ENTRIES = entries()
COMMANDS = ["validate", "plan", "render"]


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    import importlib

    for module in COMMAND_MODULES:
        importlib.import_module(module)
    return CliRunner()


def test_the_corpus_covers_every_kind_of_hostile_input() -> None:
    names = " ".join(name for name, _, _ in ENTRIES)
    for kind in (
        "traversal",
        "absurd",
        "wrong type",
        "unicode",
        "alias bomb",
        "deep",
        "duplicate key",
        "nan",
    ):
        assert kind in names.lower(), kind
    assert len(ENTRIES) >= 60


@pytest.mark.parametrize(("name", "text", "path"), ENTRIES, ids=[f"{i:02d}" for i in range(len(ENTRIES))])
def test_no_command_ever_shows_a_traceback(
    runner: CliRunner, tmp_path: Path, name: str, text: str, path: str | None
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    for command in COMMANDS:
        result = runner.invoke(app, [command, "-f", str(spec)])
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exit_code in (0, 2), f"{command} on {name}: exit {result.exit_code}\n{output[-2000:]}"
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), f"{command} on {name}: {result.exception!r}"
        assert "Traceback" not in output, f"{command} on {name}"
    if path is not None:
        result = runner.invoke(app, ["validate", "-f", str(spec)])
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exit_code == 2, f"{name} was admitted"
        assert re.search(rf"{re.escape(str(spec))}: {re.escape(path)}: ", output), f"{name}: {output[-1500:]}"


@pytest.mark.parametrize("command", ["plan", "render"])
@pytest.mark.parametrize(
    "fault", [OverflowError("math range error"), RecursionError("deep"), ValueError("no")]
)
def test_a_planner_fault_is_a_message_with_exit_2(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, fault: Exception
) -> None:
    """Whatever the planner raises on a spec validation let through, the CLI says so and exits 2."""
    from inferfleet import planner

    def broken(*_: object, **__: object) -> None:
        raise fault

    monkeypatch.setattr(planner, "plan_tier", broken)
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(base()), encoding="utf-8")
    result = runner.invoke(app, [command, "-f", str(spec)])
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 2, output
    assert "Traceback" not in output and str(fault) in output
