"""Generate the CustomResourceDefinition from the pydantic models.

Pydantic emits JSON Schema 2020-12 with `$ref`s and `anyOf: [X, null]` for optional
fields; Kubernetes wants a structural OpenAPI v3.0 schema: every node typed, no refs,
no nullable unions, boolean `exclusiveMinimum`. This module does that translation and
nothing else, so `crds/` is never edited by hand.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from inferfleet.api import labels
from inferfleet.api.base import CEL_KEY
from inferfleet.api.resource import NAME_RULES
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.api.status import InferenceServiceStatus

_DROPPED_KEYS = {"title", "additionalProperties", "$defs", "examples"}
_KUBE_EXTENSIONS = (
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    CEL_KEY,
)


def _resolve(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, definitions)
    return node


def _structural(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, definitions)
    out: dict[str, Any] = {}
    extensions = {key: node[key] for key in _KUBE_EXTENSIONS if key in node}

    alternatives = [branch for branch in node.get("anyOf", []) if branch.get("type") != "null"]
    if extensions.get("x-kubernetes-preserve-unknown-fields") and len(alternatives) > 1:
        # A value that is either a string or an object (tier.gpu): Kubernetes cannot type
        # it structurally, so the API server keeps it as is and our validation checks it.
        # (An optional object, `X | None`, is typed below: CEL sees an untyped field as
        # undefined, so a rule like `has(self.config)` would not compile.)
        out["x-kubernetes-preserve-unknown-fields"] = True
        if "description" in node:
            out["description"] = node["description"]
        return out

    if "anyOf" in node:
        branches = [branch for branch in node["anyOf"] if branch.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot express a union of {len(branches)} types structurally: {node}")
        inner = _structural(branches[0], definitions)
        for key, value in node.items():
            if key not in {"anyOf", "default"} and key not in _DROPPED_KEYS:
                inner.setdefault(key, value)
        if node.get("default") is not None:
            inner["default"] = node["default"]
        return _structural_finish(inner)

    for key, value in node.items():
        if key in _DROPPED_KEYS or key == "$ref":
            continue
        if key == "properties":
            out["properties"] = {name: _structural(prop, definitions) for name, prop in value.items()}
        elif key == "items":
            out["items"] = _structural(value, definitions)
        elif key == "const":
            out["enum"] = [value]
        elif key == "default" and value is None:
            continue
        else:
            out[key] = value

    additional = node.get("additionalProperties")
    if isinstance(additional, dict) and not extensions.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = _structural(additional, definitions)
    if "const" in node and "type" not in out:
        out["type"] = "string"
    return _structural_finish(out)


def _structural_finish(out: dict[str, Any]) -> dict[str, Any]:
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in out and not isinstance(out[bound], bool):
            out["minimum" if bound == "exclusiveMinimum" else "maximum"] = out[bound]
            out[bound] = True
    if out.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        out["type"] = "object"
    return out


def _schema_of(model: type[Any]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(raw, raw.get("$defs", {}))


def openapi_schema() -> dict[str, Any]:
    """The openAPIV3Schema of the InferenceService resource."""
    spec_schema = _schema_of(InferenceServiceSpec)
    status_schema = _schema_of(InferenceServiceStatus)
    status_schema.pop("required", None)
    return {
        "type": "object",
        "description": "An LLM served by vLLM from one or more GPU tiers, sized, rendered and "
        "autoscaled by the inferfleet operator.",
        "required": ["spec"],
        # Rules on the name need the root: only there can CEL read metadata.name.
        CEL_KEY: [dict(rule) for rule in NAME_RULES],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }


PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Model", "type": "string", "jsonPath": ".spec.model.name"},
    {
        "name": "Tiers",
        "type": "string",
        "jsonPath": ".status.tierSummary",
        "description": "tier:ready/desired per tier",
    },
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
    {
        "name": "Endpoints",
        "type": "integer",
        "jsonPath": ".status.frontDoor.endpoints",
        "description": "Ready pods behind the front door",
    },
    {
        "name": "Route",
        "type": "string",
        "jsonPath": ".status.frontDoor.route",
        "description": "HTTPRoute on the Gateway: Accepted, NotAccepted, Pending, Missing, None",
    },
    {"name": "TTFT-P99-ms", "type": "number", "jsonPath": ".status.ttftP99Ms"},
    {
        "name": "Status",
        "type": "string",
        "jsonPath": ".status.summary",
        "description": "The worst condition's reason: Degraded, a model config unread, autoscaling held, "
        "SLOs at risk, workload drift, then progress; Available when all is well",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": labels.CRD_NAME,
            "labels": {labels.LABEL_NAME: "inferfleet"},
        },
        "spec": {
            "group": labels.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": labels.KIND,
                "listKind": f"{labels.KIND}List",
                "plural": labels.PLURAL,
                "singular": labels.SINGULAR,
                "shortNames": list(labels.SHORT_NAMES),
                "categories": ["inferfleet", "all"],
            },
            "versions": [
                {
                    "name": labels.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }


def crd_yaml() -> str:
    """The CRD as the YAML checked in under crds/ (stable key order, no aliases)."""
    header = "# Generated by `inferfleet crd` from operator/inferfleet/api; do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)
