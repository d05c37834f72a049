"""Validate rendered objects: core kinds against Kubernetes' OpenAPI (kubernetes-validate),
LeaderWorkerSet and PodMonitor against the vendored CRD schemas in tests/schemas/, and the
front door's InferencePool and HTTPRoute against the schemas of their pinned CRDs
(hack/controlplane/crds/go.mod), CEL rules included, evaluated after structural defaulting
as the API server does."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.conftest import REPO_ROOT
from tests.unit.api import cel_eval

KUBERNETES_VERSION = "1.30.0"
SCHEMAS = REPO_ROOT / "tests" / "schemas"
CRD_SCHEMAS = {
    "leaderworkerset.x-k8s.io/v1": "leaderworkerset-v1.yaml",
    "monitoring.coreos.com/v1": "podmonitor-v1.yaml",
    "inference.networking.k8s.io/v1": "inferencepool-v1.yaml",
    "gateway.networking.k8s.io/v1": "httproute-v1.yaml",
}
# Generated from the pinned CRDs: their CEL rules are checked too.
PINNED_CRDS = frozenset({"inference.networking.k8s.io/v1", "gateway.networking.k8s.io/v1"})
# The endpoint picker's configuration, from the pinned Inference Extension's Go types.
PICKER_CONFIG_SCHEMA = SCHEMAS / "endpointpickerconfig-v1alpha1.json"


@functools.cache
def crd_schema(api_version: str) -> dict[str, Any]:
    schema: dict[str, Any] = yaml.safe_load((SCHEMAS / CRD_SCHEMAS[api_version]).read_text())
    return schema


def validate(obj: dict[str, Any]) -> None:
    """Raise when `obj` is not a valid object of its kind."""
    api_version = obj["apiVersion"]
    if api_version in CRD_SCHEMAS:
        schema = crd_schema(api_version)
        jsonschema.validate(obj, schema)
        if api_version in PINNED_CRDS:
            failures = cel_eval.failed_rules(schema, cel_eval.apply_defaults(schema, obj))
            if failures:
                raise jsonschema.ValidationError(f"{obj['kind']} breaks CEL rules: {failures}")
        if obj["kind"] == "LeaderWorkerSet":
            template = obj["spec"]["leaderWorkerTemplate"]
            for key in ("leaderTemplate", "workerTemplate"):
                validate_pod_template(template[key], obj["metadata"])
        return
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def validate_pod_template(template: dict[str, Any], metadata: dict[str, Any]) -> None:
    wrapper = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": metadata["name"], "namespace": metadata.get("namespace", "default")},
        "template": template,
    }
    kubernetes_validate.validate(wrapper, KUBERNETES_VERSION, strict=True)


@functools.cache
def picker_config_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(PICKER_CONFIG_SCHEMA.read_text())
    return schema


def validate_picker_config(config: dict[str, Any]) -> None:
    """Raise when the picker's loader would refuse `config`: an unknown field anywhere (it
    decodes strictly), a wrong type, a duration or quantity it cannot parse."""
    jsonschema.validate(config, picker_config_schema())
