"""Which Kubernetes events a pass should record (pure): plan changes, tiers replaced or
removed, and trouble."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from inferfleet.api import Plan, TierPlan, labels
from inferfleet.kubedata import Event, ObjectRef
from inferfleet.reconcile.kindswitch import KindSwitch

REASON_PLAN_CHANGED = "PlanChanged"
REASON_PRUNED = "TierPruned"
# A tier's workload changed kind (Deployment <-> LeaderWorkerSet): once when the new one
# is created beside the old, once when the old one is removed.
REASON_REPLACED = "TierReplaced"


def describe_tier(tier: TierPlan) -> str:
    if not tier.feasible:
        return f"{tier.name}: infeasible ({tier.infeasible_reason})"
    return (
        f"{tier.name}: {tier.gpus_per_replica}x {tier.gpu} TP{tier.tensor_parallel_size}"
        f" PP{tier.pipeline_parallel_size} {tier.quantization}, max-model-len {tier.max_model_len},"
        f" {tier.max_num_seqs} seqs"
    )


def plan_changed(previous_hash: str | None, plan: Plan, plan_hash: str) -> list[Event]:
    if previous_hash == plan_hash:
        return []
    summary = "; ".join(describe_tier(tier) for tier in plan.tiers)
    verb = "planned" if previous_hash is None else "plan changed"
    return [Event("Normal", REASON_PLAN_CHANGED, f"{verb}: {summary}")]


def condition_transitions(
    previous: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]
) -> list[Event]:
    """A Warning when Degraded or SloAtRisk turns True or changes reason; Normal when it clears."""
    before = {c.get("type"): c for c in previous}
    events = []
    for condition in current:
        if condition.get("type") not in (labels.CONDITION_DEGRADED, labels.CONDITION_SLO_AT_RISK):
            continue
        old = before.get(condition.get("type")) or {}
        same = old.get("status") == condition["status"] and old.get("reason") == condition["reason"]
        if same:
            continue
        if condition["status"] == "True":
            events.append(Event("Warning", condition["reason"], condition["message"][:1024]))
        elif old.get("status") == "True":
            events.append(Event("Normal", condition["reason"], condition["message"][:1024]))
    return events


def pruned(tiers: Sequence[str]) -> list[Event]:
    return [
        Event("Normal", REASON_PRUNED, f"tier {tier} removed from the spec; its objects were deleted")
        for tier in tiers
    ]


def replaced(
    switches: Sequence[KindSwitch], *, created: Collection[ObjectRef], deleted: Collection[ObjectRef]
) -> list[Event]:
    """What the pass did to tiers changing kind: the new workload created (the old one
    keeps serving), the old one removed. Only what the executor did is announced."""
    events: list[Event] = []
    for switch in switches:
        started = not switch.created and switch.new in created
        if started and switch.old in deleted:
            events.append(Event("Normal", REASON_REPLACED, switch.at_once_message()))
        elif started:
            events.append(Event("Normal", REASON_REPLACED, switch.started_message()))
        elif switch.old in deleted:
            events.append(Event("Normal", REASON_REPLACED, switch.finished_message()))
    return events
