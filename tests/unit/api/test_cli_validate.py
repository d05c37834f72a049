"""`inferfleet validate` and `inferfleet crd`: messages, exit codes, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from inferfleet.api.crd import crd_yaml
from tests.conftest import example_paths
from tests.unit.api.samples import base_spec, document


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from inferfleet.cli import main; main()", *args],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
    )


def test_valid_example_exits_zero() -> None:
    result = _run("validate", "-f", str(example_paths()[0]))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_invalid_spec_names_field_and_rule_with_exit_2(tmp_path: Path) -> None:
    spec = base_spec()
    spec["tiers"][0]["minReplicas"] = 9
    spec["model"]["sorce"] = "hf://x/y"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 2
    assert "spec.tiers[0]: minReplicas must be <= maxReplicas" in result.stderr
    assert "spec.model.sorce: unknown field" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_and_broken_yaml_exit_2(tmp_path: Path) -> None:
    missing = _run("validate", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed", encoding="utf-8")
    result = _run("validate", "-f", str(broken))
    assert result.returncode == 2
    assert "not valid YAML" in result.stderr
    assert "Traceback" not in result.stderr + missing.stderr


def test_wrong_kind_is_named(tmp_path: Path) -> None:
    doc = document(base_spec())
    doc["kind"] = "Deployment"
    result = _run("validate", "-f", "-", stdin=yaml.safe_dump(doc))
    assert result.returncode == 2
    assert "kind: expected apiVersion inferfleet.dev/v1alpha1 kind InferenceService" in result.stderr


def test_crd_command_prints_the_generated_crd() -> None:
    result = _run("crd")
    assert result.returncode == 0
    assert result.stdout == crd_yaml()
