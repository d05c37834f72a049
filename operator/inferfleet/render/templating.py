"""The jinja2 environment: templates shipped as package data, undefined names fail.

Templates write JSON (valid YAML too) and are parsed with json.loads.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jinja2

# json.dumps with options builds a new encoder per call; templates call it per value.
_encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


class RawJson(str):
    """A value already encoded as JSON with sorted keys: `tojson` inserts it as it is.

    For a large value the caller had to encode anyway (the pod specs, hashed before
    they go into a workload), so rendering does not encode it a second time.
    """


def _tojson(value: Any) -> str:
    # jinja's own tojson also escapes <, >, & and ' for HTML; JSON needs none of
    # that, and rendering spends a third of its time there.
    if type(value) is RawJson:
        return str(value)
    return _encode(value)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("inferfleet.render", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # JSON, not HTML; values are escaped by tojson instead
        auto_reload=False,  # package data does not change under a running process
    )
    env.filters["tojson"] = _tojson
    return env


def render_json(template: str, **context: Any) -> dict[str, Any]:
    """Render one template and parse it into a dict."""
    text = environment().get_template(template).render(**context)
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{template} rendered invalid JSON: {error}") from error
    if not isinstance(document, dict):
        raise TypeError(f"{template} did not render an object")
    return document
