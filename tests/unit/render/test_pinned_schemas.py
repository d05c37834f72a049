"""The front door's schemas come from the pinned CRDs, and say which."""

from __future__ import annotations

import shutil
import subprocess
import sys
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

SCRIPT = REPO_ROOT / "hack" / "update_frontdoor_schemas.py"


def _script() -> ModuleType:
    return load_script(str(SCRIPT.relative_to(REPO_ROOT)), "update_frontdoor_schemas")


def test_each_schema_names_the_module_version_go_mod_pins() -> None:
    script = _script()
    versions = script.pinned_versions()
    assert {"sigs.k8s.io/gateway-api", "sigs.k8s.io/gateway-api-inference-extension"} <= set(versions)
    for module, _path, _served, output in script.CRDS:
        header = (REPO_ROOT / "tests" / "schemas" / output).read_text().splitlines()[1]
        assert f"{module}@{versions[module]} " in header, output


def test_go_sum_holds_every_pinned_module() -> None:
    versions = _script().pinned_versions()
    go_sum = (REPO_ROOT / "hack" / "controlplane" / "crds" / "go.sum").read_text()
    for module, version in versions.items():
        assert f"{module} {version} h1:" in go_sum


def test_schemas_match_the_pinned_crds_in_the_module_cache() -> None:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    if result.returncode == 2:
        pytest.skip(f"pinned modules not in the local Go module cache: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
