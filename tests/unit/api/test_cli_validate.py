"""`inferfleet validate` and `inferfleet crd`: messages, exit codes, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from inferfleet.api.crd import crd_yaml
from tests.conftest import example_paths
from tests.unit.api.samples import base_spec, document


def _run(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from inferfleet.cli import main; main()", *args],
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
        env={**os.environ, **(env or {})},
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


def test_validate_names_an_unknown_gpu_and_unreadable_model_with_field_paths(tmp_path: Path) -> None:
    spec = base_spec()
    spec["model"]["name"] = "acme/unheard-of-7b"
    spec["tiers"][1]["gpu"] = "H1000"
    path = tmp_path / "unknown.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path), env={"INFERFLEET_FETCH_MODEL_CONFIG": "false"})
    assert result.returncode == 2
    assert "sample: spec.tiers[1].gpu: unknown GPU 'H1000'" in result.stderr
    assert "sample: spec.model.name: unknown model 'acme/unheard-of-7b'" in result.stderr
    assert "cannot be deployed (2 problem(s))" in result.stderr


def test_validate_admits_a_model_a_probe_reads_and_says_so(tmp_path: Path) -> None:
    """The operator reads config.json of a model the catalog lacks in a probe Job: valid,
    with a warning naming where, and still refused for what holds for every tier."""
    spec = base_spec()
    spec["model"] = {"name": "acme/unheard-of-7b"}
    path = tmp_path / "probed.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "sample: valid" in result.stdout
    assert "hf://acme/unheard-of-7b@main by a probe Job" in result.stderr, result.stderr
    spec["tiers"][1]["gpu"] = "H1000"
    spec["model"]["source"] = "pvc://weights/unheard-of-7b"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 2
    assert "sample: spec.tiers[1].gpu: unknown GPU 'H1000'" in result.stderr
    assert "sample: spec.model.source: unknown model" in result.stderr


def test_validate_refuses_a_spec_no_tier_can_serve(tmp_path: Path) -> None:
    spec = base_spec()
    for tier in spec["tiers"]:
        tier["gpu"] = {"name": "tiny", "memoryGiB": 2}
        tier["gpusPerNode"] = 1
        tier["nodeSelector"] = {"gpu": "tiny"}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 2
    assert "sample: spec.tiers: no tier can serve" in result.stderr and "spec.tiers[0] (" in result.stderr


def test_validate_checks_the_cache_root_the_operator_allows(tmp_path: Path) -> None:
    spec = base_spec()
    spec["cache"] = {"nodePath": "/data/models"}
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 2 and "spec.cache.nodePath" in result.stderr
    env = {
        **os.environ,
        "INFERFLEET_CACHE_ALLOWED_ROOT": "/data",
        "INFERFLEET_CACHE_NODE_PATH": "/data/cache",
    }
    command = [sys.executable, "-c", "from inferfleet.cli import main; main()", "validate", "-f", str(path)]
    allowed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert allowed.returncode == 0, allowed.stderr


def test_plan_exits_1_when_no_tier_is_feasible_and_strict_fails_on_any(tmp_path: Path) -> None:
    spec = base_spec()
    spec["model"]["name"] = "meta-llama/Llama-3.3-70B-Instruct"
    spec["quantization"] = "none"
    spec["tiers"] = [
        {"name": "t4", "gpu": "T4", "gpusPerNode": 1, "minReplicas": 1},
        {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1},
    ]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    some = _run("plan", "-f", str(path), "-o", "json")
    assert some.returncode == 0, some.stderr
    strict = _run("plan", "-f", str(path), "-o", "json", "--strict")
    assert strict.returncode == 1 and "tier t4: infeasible" in strict.stderr
    assert yaml.safe_load(strict.stdout)["tiers"][0]["feasible"] is False  # the plan is still printed
    spec["tiers"] = spec["tiers"][:1]
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    none = _run("plan", "-f", str(path))
    assert none.returncode == 1 and "no tier can serve the model" in none.stderr
