"""replan: auto, end to end on the in-memory cluster, and the pure rule behind it."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import labels, parse
from inferfleet.controller.reconciler import cr_ref
from inferfleet.design import replan
from inferfleet.kubedata import ObjectRef
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

OBSERVED = {
    "time": "2026-01-01T00:10:00Z",
    "inputTokens": {"p50": 1300, "p95": 4500, "p99": 4900},
    "outputTokens": {"p50": 15, "p95": 124, "p99": 386},
    "drift": True,
    "impliedInputTokens": {"p50": 1300, "p95": 10240, "p99": 10240},
    "impliedOutputTokens": {"p50": 15, "p95": 124, "p99": 386},
}


def control_with(replan_mode: str | None) -> Control:
    body = example()
    if replan_mode is not None:
        body["spec"]["scaling"]["replan"] = replan_mode
    control = Control()
    control.submit(body)
    control.reconcile()
    return control


def report_drift(control: Control, observed: dict[str, Any]) -> None:
    """What the autoscaler writes when the engines' mix departs from the plan."""
    control.cluster.patch_status(cr_ref(NAMESPACE, NAME), {"observedWorkload": observed})


def max_model_len(control: Control, tier: str = "l4") -> int:
    deployment = control.cluster.objects[ObjectRef("apps/v1", "Deployment", NAMESPACE, f"{NAME}-{tier}")]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return int(args[args.index("--max-model-len") + 1])


def test_auto_replans_for_the_observed_workload_and_keeps_it() -> None:
    control = control_with("auto")
    before = max_model_len(control)
    report_drift(control, OBSERVED)
    control.reconcile()
    # The observed p99 (10,240) + output p99 (386), rounded up: the pods roll with it.
    assert max_model_len(control) == 11264 > before
    planned = control.status()["plannedWorkload"]
    assert planned["inputTokens"] == OBSERVED["impliedInputTokens"] and planned["generation"] == 1
    assert labels.REASON_REPLANNED in [e["reason"] for e in control.cluster.events]
    # Later passes keep planning for it, without a new event.
    events = len(control.cluster.events)
    control.reconcile()
    assert max_model_len(control) == 11264 and len(control.cluster.events) == events


def test_advise_only_reports() -> None:
    control = control_with(None)
    before = max_model_len(control)
    report_drift(control, OBSERVED)
    control.reconcile()
    assert max_model_len(control) == before
    assert "plannedWorkload" not in control.status()


def test_editing_the_spec_returns_to_the_declared_workload() -> None:
    control = control_with("auto")
    before = max_model_len(control)
    report_drift(control, OBSERVED)
    control.reconcile()
    report_drift(control, {**OBSERVED, "drift": False})

    def bump(body: dict[str, Any]) -> None:
        body["spec"]["workload"]["peakRequestsPerSecond"] = 13

    control.edit(bump)
    control.reconcile()
    assert max_model_len(control) == before
    assert "plannedWorkload" not in control.status()


def spec() -> Any:
    return parse(example()).spec


@pytest.mark.parametrize(
    ("seen", "replanned"),
    [("2026-01-01T00:20:00Z", False), ("2026-01-01T00:40:00Z", True)],
)
def test_a_new_replan_waits_for_the_last_one_to_show(seen: str, replanned: bool) -> None:
    planned = {
        "source": "observed",
        "time": "2026-01-01T00:05:00Z",
        "generation": 3,
        "inputTokens": {"p50": 1300, "p95": 4500, "p99": 4900},
        "outputTokens": OBSERVED["outputTokens"],
    }
    status = {"plannedWorkload": planned, "observedWorkload": {**OBSERVED, "time": seen}}
    new_spec, written = replan.planned_workload(
        spec(), status, generation=3, replan="auto", now="2026-01-01T00:41:00Z"
    )
    assert written is not None
    expected = OBSERVED["impliedInputTokens"] if replanned else planned["inputTokens"]
    assert written["inputTokens"] == expected
    assert new_spec.workload.input_tokens.to_wire() == expected
    announced = replan.announce({"plannedWorkload": planned}, written)
    assert (announced is not None) is replanned


def test_a_malformed_status_falls_back_to_the_declared_workload() -> None:
    status = {"observedWorkload": {"drift": True, "impliedInputTokens": {"p50": 9, "p95": 1}}}
    new_spec, written = replan.planned_workload(spec(), status, generation=1, replan="auto", now="x")
    assert written is None and new_spec == spec()
