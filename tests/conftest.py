"""Shared test fixtures: repository paths and the bundled examples."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check behaviour, not speed (speed lives in hack/bench/): Hypothesis's
# default 200 ms deadline per example failed them on a loaded 2-core CI machine.
settings.register_profile("inferfleet", deadline=None)
settings.load_profile("inferfleet")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO_ROOT / "manifests" / "examples"
SHARED_DIR = REPO_ROOT.parent / "shared"


def example_paths() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.yaml"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
