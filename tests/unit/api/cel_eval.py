"""Evaluate the CRD's CEL rules the way the API server does, for tests.

The API server applies schema defaults, then evaluates each node's
`x-kubernetes-validations` with `self` bound to that node. This walker does the same on
plain data, using cel-python, so tests can check the CEL rules and the pydantic
validators agree on the same samples.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import celpy

from inferfleet.api.base import CEL_KEY
from inferfleet.api.crd import openapi_schema

_ENV = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule))


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting: fill absent properties that declare a default, recursively."""
    if isinstance(value, dict):
        out = dict(value)
        for name, prop in schema.get("properties", {}).items():
            if name not in out and "default" in prop:
                out[name] = copy.deepcopy(prop["default"])
            if name in out:
                out[name] = apply_defaults(prop, out[name])
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            known = schema.get("properties", {})
            out = {
                key: item if key in known else apply_defaults(additional, item) for key, item in out.items()
            }
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def failed_rules(schema: dict[str, Any], value: Any) -> list[str]:
    """Messages of every CEL rule that does not hold, anywhere in `value`."""
    failures: list[str] = []
    if value is None:
        return failures
    for entry in schema.get(CEL_KEY, []):
        result = _program(entry["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        if isinstance(result, Exception) or not bool(result):
            failures.append(entry["message"])
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            if name in value:
                failures.extend(failed_rules(prop, value[name]))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            failures.extend(failed_rules(schema["items"], item))
    return failures


def spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = openapi_schema()["properties"]["spec"]
    return schema


def cel_failures_for_spec(spec: dict[str, Any]) -> list[str]:
    schema = spec_schema()
    return failed_rules(schema, apply_defaults(schema, spec))
