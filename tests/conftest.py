"""Shared test fixtures: repository paths and the bundled examples."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO_ROOT / "manifests" / "examples"
SHARED_DIR = REPO_ROOT.parent / "shared"


def example_paths() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.yaml"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
