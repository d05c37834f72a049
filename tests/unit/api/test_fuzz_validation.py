"""Fuzz validation: arbitrary and near-valid specs are accepted or rejected cleanly.

Every rejection is a SpecInvalid whose problems each carry a field path and a reason;
no other exception may escape, whatever the input.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfleet.api import InferenceService, SpecInvalid, parse
from tests.unit.api.samples import base_spec, document

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found.extend(_paths(child, (*prefix, index)))
    return found


def _check_outcome(doc: Any) -> InferenceService | SpecInvalid:
    try:
        return parse(doc)
    except SpecInvalid as error:
        assert error.problems, "a rejection must name at least one problem"
        for problem in error.problems:
            assert problem.message.strip(), problem
        return error


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_documents_are_rejected_cleanly(value: Any) -> None:
    outcome = _check_outcome(value)
    assert isinstance(outcome, SpecInvalid)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(spec=json_values)
def test_arbitrary_spec_under_valid_envelope(spec: Any) -> None:
    outcome = _check_outcome(document(spec))
    if isinstance(outcome, SpecInvalid):
        assert all(problem.path.startswith("spec") for problem in outcome.problems), outcome


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_near_valid_specs(data: st.DataObject) -> None:
    spec = base_spec()
    doc = document(spec)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc["spec"])
        path = data.draw(st.sampled_from(paths))
        parent: Any = doc["spec"]
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "delete", "add-unknown"]))
        if action == "replace":
            parent[path[-1]] = data.draw(json_values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add-unknown" and isinstance(parent, dict):
            parent["unexpectedField"] = data.draw(json_scalars)
    before = copy.deepcopy(doc)
    outcome = _check_outcome(doc)
    assert doc == before, "validation must not modify its input"
    if isinstance(outcome, SpecInvalid):
        for problem in outcome.problems:
            assert problem.path.startswith("spec"), problem
    else:
        # Accepted specs round-trip: the wire form parses to the same model.
        assert parse(document(outcome.spec.to_wire())).spec == outcome.spec
