"""The Argo CD examples point at what the repository ships and name the operator's owners."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

from inferfleet.api import labels
from inferfleet.cluster import PERMISSIONS, SCALE_FIELD_MANAGER, Operation
from tests.conftest import REPO_ROOT

ARGOCD_DIR = REPO_ROOT / "manifests" / "argocd"
CHART_DIR = REPO_ROOT / "charts" / "inferfleet"


def load(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ARGOCD_DIR / name).read_text(encoding="utf-8"))
    assert obj["apiVersion"] == "argoproj.io/v1alpha1" and obj["kind"] == "Application"
    return obj


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if nested else value
    return out


def test_operator_application_installs_the_chart_with_valid_values() -> None:
    app = load("operator-application.yaml")
    source = app["spec"]["source"]
    assert (REPO_ROOT / source["path"] / "Chart.yaml").exists()
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(merged(defaults, source["helm"]["valuesObject"]), schema)
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
    install = next(yaml.safe_load_all((REPO_ROOT / "manifests" / "install.yaml").read_text(encoding="utf-8")))
    assert app["spec"]["destination"]["namespace"] == install["metadata"]["name"]


def test_inferenceservices_application_syncs_a_folder() -> None:
    spec = load("inferenceservices-application.yaml")["spec"]
    assert spec["source"]["directory"]["recurse"] is True
    assert spec["syncPolicy"]["automated"]["prune"] is True


def test_ignore_differences_cover_every_child_kind_and_the_operators_field_managers() -> None:
    rules = load("children-ignore-differences.yaml")["spec"]["ignoreDifferences"]
    applied = {
        (r.group, r.kind)
        for r, operations in PERMISSIONS.items()
        if Operation.APPLY in operations and r.kind != labels.KIND
    }
    assert {(rule["group"], rule["kind"]) for rule in rules} == applied
    managers = {m for rule in rules for m in rule["managedFieldsManagers"]}
    assert managers == {labels.FIELD_MANAGER, SCALE_FIELD_MANAGER}
    scaled = {(r.group, r.kind) for r, operations in PERMISSIONS.items() if Operation.SCALE in operations}
    for rule in rules:
        if (rule["group"], rule["kind"]) in scaled:
            assert "/spec/replicas" in rule["jsonPointers"]
            assert SCALE_FIELD_MANAGER in rule["managedFieldsManagers"]
