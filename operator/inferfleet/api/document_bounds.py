"""Depth and size limits of a decoded document, checked before validation. Pure.

`api.yaml_input` enforces these on text a user wrote; an InferenceService can also
arrive already decoded (the API server's JSON, through the webhook, the reconciler and
the autoscaler), where nothing limited its nesting. Free-form fields (`affinity`,
`model.config`) are copied into templates and JSON later, and a structure nested a few
thousand levels deep overflows Python's stack there, in every pass, forever. The walk
here is iterative (it cannot overflow itself) and stops at the first broken limit.
"""

from __future__ import annotations

from typing import Any, Final

from inferfleet.api.yaml_input import MAX_DEPTH, MAX_NODES

_CONTAINERS: Final = (dict, list, tuple)


def document_problem(document: Any) -> tuple[str, str] | None:
    """(field path, message) of the first limit `document` breaks, or None."""
    stack: list[tuple[Any, int, str]] = [(document, 0, "")]
    count = 0
    while stack:
        value, depth, path = stack.pop()
        count += 1
        if count > MAX_NODES:
            return "", f"more than {MAX_NODES:,} values; far larger than an InferenceService needs"
        if not isinstance(value, _CONTAINERS):
            continue
        if depth >= MAX_DEPTH:
            return path, f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, dict):
            for key, item in value.items():
                stack.append((item, depth + 1, f"{path}.{key}" if path else str(key)))
        else:
            for index, item in enumerate(value):
                stack.append((item, depth + 1, f"{path}[{index}]"))
    return None
