"""Shared test fixtures: repository paths and the bundled examples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check behaviour, not speed (speed lives in hack/bench/): Hypothesis's
# default 200 ms deadline per example failed them on a loaded 2-core CI machine.
# The default profile is derandomized: the same examples on every run, so CI cannot go
# red on a draw. `INFERFLEET_HYPOTHESIS=explore` draws fresh examples (and keeps what it
# finds in .hypothesis/) for hunting new counter-examples locally.
settings.register_profile("inferfleet", deadline=None, derandomize=True, database=None)
settings.register_profile("explore", deadline=None)
settings.load_profile("explore" if os.environ.get("INFERFLEET_HYPOTHESIS") == "explore" else "inferfleet")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO_ROOT / "manifests" / "examples"


def example_paths() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.yaml"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


# `hack/test.sh` promises that every test runs: under it (INFERFLEET_NO_SKIPS=1, its full
# runs) a skipped test fails the run and is named, so a missing program or module is fixed
# rather than reported as green. A focused `pytest` run keeps pytest's usual skips.
NO_SKIPS = os.environ.get("INFERFLEET_NO_SKIPS") == "1"


def _skipped(config: pytest.Config) -> list[pytest.TestReport]:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter is not None else []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    skipped = _skipped(config)
    if NO_SKIPS and skipped:
        terminalreporter.section("skipped tests fail hack/test.sh", red=True)
        for report in skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            terminalreporter.line(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if NO_SKIPS and exitstatus == pytest.ExitCode.OK and _skipped(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
