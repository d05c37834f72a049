"""The CRD is generated, checked in, structural and valid; the examples satisfy it."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from inferfleet.api import load_all
from inferfleet.api.crd import crd, crd_yaml
from tests.conftest import REPO_ROOT, example_paths

CRD_FILE = REPO_ROOT / "crds" / "inferenceservices.inferfleet.dev.yaml"
K8S_VERSION = "1.30"


def test_checked_in_crd_matches_the_models() -> None:
    assert CRD_FILE.read_text(encoding="utf-8") == crd_yaml(), "crds/ is stale: run hack/gen-crd.sh"


def test_crd_validates_against_apiextensions_v1() -> None:
    kubernetes_validate.validate(crd(), K8S_VERSION, strict=True)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, child in node.get("properties", {}).items():
            found.extend(_walk(child, f"{path}.{key}"))
        if isinstance(node.get("items"), dict):
            found.extend(_walk(node["items"], f"{path}[]"))
        if isinstance(node.get("additionalProperties"), dict):
            found.extend(_walk(node["additionalProperties"], f"{path}{{}}"))
    return found


def test_schema_is_structural() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node, path
        assert "anyOf" not in node and "oneOf" not in node, path
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        for bound in ("exclusiveMinimum", "exclusiveMaximum"):
            assert isinstance(node.get(bound, False), bool), f"{path}: {bound} must be boolean"
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            assert set(keys) <= set(node["items"].get("required", [])), path


def test_fields_cel_rules_read_are_typed() -> None:
    """The API server compiles CEL against the schema's types: an untyped field (only
    x-kubernetes-preserve-unknown-fields) is undefined to CEL, and the CRD is refused."""
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        for rule in node.get("x-kubernetes-validations", []):
            for field in re.findall(r"self\.([A-Za-z]+)", rule["rule"]):
                prop = (node.get("properties") or {}).get(field)
                if prop is not None:
                    assert "type" in prop, f"{path}.{field} is read by {rule['rule']!r} but untyped"


def test_crd_has_status_subresource_short_name_and_columns() -> None:
    spec = crd()["spec"]
    assert spec["names"]["shortNames"] == ["ifs"]
    version = spec["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = {column["name"] for column in version["additionalPrinterColumns"]}
    assert {"Model", "Tiers", "Ready", "Desired", "TTFT-P99-ms", "Age"} <= columns


def _crd_validator() -> jsonschema.Draft4Validator:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(schema)


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
def test_example_validates_against_models_and_crd_schema(path: Any) -> None:
    text = path.read_text(encoding="utf-8")
    services = load_all(text, source=str(path))
    assert services
    for document in yaml.safe_load_all(text):
        errors = sorted(_crd_validator().iter_errors(document), key=str)
        assert not errors, [error.message for error in errors]


def test_there_are_at_least_five_examples() -> None:
    assert len(example_paths()) >= 5
