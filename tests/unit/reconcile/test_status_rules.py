"""Pure status and event rules: infeasibility reasons, Degraded (the reconciler's own) and SloAtRisk."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet import planner
from inferfleet.api import Plan, TierPlan, labels
from inferfleet.controller import admission
from inferfleet.reconcile import event_rules as events
from inferfleet.reconcile import status_rules as status
from inferfleet.reconcile.status_rules import PassResult
from tests.toolkit import a_scaled_service, a_small_tier_plan

NOW = "2027-01-01T00:00:00Z"
LATER = "2027-01-01T00:05:00Z"
WHY = "70B at BF16 does not fit one L4 node: needs 140 GiB, has 24 GiB"


def infeasible(name: str) -> TierPlan:
    # The planner puts the reason the tier cannot serve first; later reasons explain
    # the choices it tried on the way.
    reasons = [WHY, "tried fp8 weights", "tried tensor-parallel 4"]
    return a_small_tier_plan(name).with_(feasible=False, reasons=reasons).build()


def test_every_consumer_names_the_first_reason_not_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    tier = infeasible("l4")
    assert tier.infeasible_reason == WHY
    plan = Plan(name="chat", tiers=[a_small_tier_plan("h100").build(), tier])

    planned = status.compute({}, PassResult(generation=1, plan=plan, plan_hash="h"), now=NOW)
    (condition,) = [c for c in planned["conditions"] if c["type"] == labels.CONDITION_PLANNED]
    assert condition["message"] == f"l4: {WHY}"
    assert events.describe_tier(tier) == f"l4: infeasible ({WHY})"

    by_name = {tier.name: tier for tier in plan.tiers}

    def plan_tier(_: Any, tier: Any, *__: Any, **___: Any) -> TierPlan:
        return by_name[tier.name]

    monkeypatch.setattr(planner, "plan_tier", plan_tier)
    service = a_scaled_service("chat").tiers(
        {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1},
        {"name": "l4", "gpu": "L4", "minReplicas": 1},
    )
    verdict = admission.review(service.body())
    assert verdict.rejection is None and verdict.warnings == (
        f"tier l4 is infeasible and will not be deployed: {WHY}",
    )


def degraded_of(current: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in current["conditions"] if c["type"] == labels.CONDITION_DEGRADED)


def legacy_autoscaler_degraded() -> dict[str, Any]:
    """A Degraded an operator from before ScalingActive let its autoscaler write."""
    return {
        "type": labels.CONDITION_DEGRADED,
        "status": "True",
        "reason": labels.REASON_METRICS_UNAVAILABLE,
        "message": "autoscaler: metrics unavailable, holding replica counts",
        "lastTransitionTime": NOW,
    }


def feasible_plan() -> Plan:
    return Plan(name="chat", tiers=[a_small_tier_plan("l4").build()])


def test_the_reconciler_owns_degraded_outright_even_one_the_autoscaler_once_wrote() -> None:
    previous = {"conditions": [legacy_autoscaler_degraded()]}
    result = PassResult(generation=2, plan=feasible_plan(), plan_hash="h")
    new = status.compute(previous, result, now=LATER)
    degraded = degraded_of(new)
    assert (degraded["status"], degraded["reason"]) == ("False", status.REASON_AS_PLANNED)
    assert degraded["lastTransitionTime"] == LATER
    [event] = events.condition_transitions(previous["conditions"], new["conditions"])
    assert (event.type, event.reason) == ("Normal", status.REASON_AS_PLANNED)


def test_the_reconciler_carries_the_autoscalers_conditions_over_untouched() -> None:
    theirs = [
        {
            "type": labels.CONDITION_SCALING_ACTIVE,
            "status": "False",
            "reason": labels.REASON_METRICS_UNAVAILABLE,
            "message": "metrics unavailable, holding replica counts",
            "lastTransitionTime": NOW,
        },
        {
            "type": labels.CONDITION_SCALING,
            "status": "True",
            "reason": "WaitingForReplicas",
            "message": "l4: 1/2 ready",
            "lastTransitionTime": NOW,
        },
    ]
    result = PassResult(
        generation=2,
        plan=feasible_plan(),
        plan_hash="h",
        failures=("apply Deployment/team/chat-l4: forbidden",),
    )
    new = status.compute({"conditions": theirs}, result, now=LATER)
    assert [
        c for c in new["conditions"] if labels.CONDITION_OWNERS[c["type"]] == labels.OWNER_AUTOSCALER
    ] == theirs
    assert (degraded_of(new)["status"], degraded_of(new)["reason"]) == ("True", labels.REASON_APPLY_FAILED)


def test_slo_at_risk_follows_the_plan_warnings_with_their_numbers() -> None:
    calm = Plan(name="chat", tiers=[a_small_tier_plan("h100").build()])
    itl = "ITL: steps carrying a 1024-token prefill chunk take ~215 ms, above the 80 ms ITL SLO"
    warned_l4 = a_small_tier_plan("l4").with_(warnings=[itl])
    warned = Plan(name="chat", tiers=[a_small_tier_plan("h100").build(), warned_l4.build()])
    first = status.compute({}, PassResult(generation=1, plan=warned, plan_hash="a"), now=NOW)
    risk = next(c for c in first["conditions"] if c["type"] == labels.CONDITION_SLO_AT_RISK)
    assert risk["status"] == "True" and risk["reason"] == labels.REASON_SLO_UNREACHABLE
    assert risk["message"].startswith("l4: ITL") and "215 ms" in risk["message"]
    assert [e.reason for e in events.condition_transitions([], first["conditions"])] == [
        labels.REASON_SLO_UNREACHABLE
    ]
    second = status.compute(first, PassResult(generation=2, plan=calm, plan_hash="b"), now=LATER)
    cleared = next(c for c in second["conditions"] if c["type"] == labels.CONDITION_SLO_AT_RISK)
    assert cleared["status"] == "False" and cleared["lastTransitionTime"] == LATER
    transitions = events.condition_transitions(first["conditions"], second["conditions"])
    assert [(e.type, e.reason) for e in transitions] == [("Normal", labels.REASON_SLOS_REACHABLE)]
    # nothing planned (an invalid spec): the last word on SLOs stays as it was
    third = status.compute(
        second, PassResult(generation=3, plan=None, plan_hash=None, invalid="bad"), now=LATER
    )
    kept = next(c for c in third["conditions"] if c["type"] == labels.CONDITION_SLO_AT_RISK)
    assert kept == cleared


def ready_of(current: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in current["conditions"] if c["type"] == labels.CONDITION_READY)


def test_ready_names_a_tier_with_no_node_and_the_schedulers_refusal() -> None:
    """Ready=False says why replicas do not come: no node matches the tier's placement
    (what it looks for), or the scheduler's own words; otherwise Progressing."""
    plan = Plan(name="chat", tiers=[a_small_tier_plan("h100").build(), a_small_tier_plan("l4").build()])
    workloads = {
        "h100": {"spec": {"replicas": 1}, "status": {}},
        "l4": {"spec": {"replicas": 2}, "status": {"readyReplicas": 1, "updatedReplicas": 2}},
    }
    wanted = "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    refusal = "0/9 nodes are available: 9 node(s) didn't match Pod's node affinity/selector."
    base = PassResult(generation=1, plan=plan, plan_hash="h", workloads=workloads)

    def ready(**fields: Any) -> dict[str, Any]:
        return ready_of(status.compute({}, PassResult(**{**base.__dict__, **fields}), now=NOW))

    found = ready(no_nodes={"h100": wanted}, unschedulable={"h100": refusal, "l4": refusal})
    assert (found["status"], found["reason"]) == ("False", status.REASON_NO_ELIGIBLE_NODES)
    assert f"h100: no node matches its placement (nodes with {wanted})" in found["message"]
    found = ready(unschedulable={"l4": refusal})
    assert (found["status"], found["reason"]) == ("False", status.REASON_UNSCHEDULABLE)
    assert f"l4: {refusal}" in found["message"]
    assert ready()["reason"] == labels.REASON_PROGRESSING


def test_unschedulable_reads_the_schedulers_condition_per_tier() -> None:
    def pod(tier: str, reason: str | None, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"labels": {labels.LABEL_TIER: tier}}
        if deleting:
            meta["deletionTimestamp"] = NOW
        scheduled = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": f"{tier} refused",
        }
        return {"metadata": meta, "status": {"conditions": [scheduled] if reason else []}}

    pods = [pod("h100", "Unschedulable"), pod("l4", None), pod("a100", "Unschedulable", deleting=True)]
    assert status.unschedulable(pods) == {"h100": "h100 refused"}
