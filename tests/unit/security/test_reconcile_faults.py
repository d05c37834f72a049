"""A spec the pure core cannot handle ends in a condition, never in a pass that crashes forever."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet import planner
from inferfleet.api import labels
from inferfleet.reconcile import compute as compute_module
from tests.unit.reconcile.fixtures import Control, example


def created() -> Control:
    control = Control()
    control.submit(example())
    control.reconcile()
    return control


def owned(control: Control) -> list[str]:
    return sorted(f"{ref.kind}/{ref.name}" for ref in control.cluster.objects if ref.kind != labels.KIND)


@pytest.mark.parametrize("fault", [OverflowError("int too large"), RecursionError("too deep"), KeyError("x")])
def test_a_planner_fault_is_a_condition_and_keeps_the_fleet(
    fault: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = created()
    before = owned(control)

    def broken(*_: Any, **__: Any) -> Any:
        raise fault

    monkeypatch.setattr(planner, "plan_tier", broken)
    control.edit(lambda body: body["spec"]["workload"].__setitem__("peakRequestsPerSecond", 11))
    control.reconcile()  # returns: a retry would fail the same way
    control.reconcile()
    assert owned(control) == before
    planned = control.condition("Planned")
    assert planned["status"] == "False"
    assert type(fault).__name__ in planned["message"]
    assert control.condition("Degraded")["status"] == "True"


def test_a_render_fault_is_a_condition_and_keeps_the_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    control = created()
    before = owned(control)

    def broken(*_: Any, **__: Any) -> Any:
        raise ValueError("cannot render this")

    monkeypatch.setattr(compute_module, "render", broken)
    control.edit(lambda body: body["spec"]["workload"].__setitem__("peakRequestsPerSecond", 11))
    control.reconcile()
    assert owned(control) == before
    planned = control.condition("Planned")
    assert planned["status"] == "False" and "cannot render this" in planned["message"]


def test_a_stored_spec_that_validation_now_refuses_is_a_condition() -> None:
    """Objects admitted before a rule existed (or with the webhook off) still end in a condition."""
    control = created()
    control.edit(lambda body: body["spec"]["model"].__setitem__("source", "pvc://claim/../../etc"))
    control.reconcile()
    planned = control.condition("Planned")
    assert planned["reason"] == labels.REASON_INVALID_SPEC
    assert "spec.model.source" in planned["message"]
