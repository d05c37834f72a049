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


# What a plan decides for the pods, as status.plan (wire) names it, and how an event
# says it. A plan's other figures move with every measurement (the engines' KV capacity,
# measured cold starts, replicas for peak from them) while the pods run unchanged.
_DECIDED = (
    ("gpu", "gpu"),
    ("gpusPerReplica", "GPUs per replica"),
    ("tensorParallelSize", "TP"),
    ("pipelineParallelSize", "PP"),
    ("quantization", "quantization"),
    ("kvCacheDtype", "KV cache dtype"),
    ("maxModelLen", "max-model-len"),
    ("maxNumSeqs", "max-num-seqs"),
    ("maxNumBatchedTokens", "max-num-batched-tokens"),
    ("gpuMemoryUtilization", "gpu-memory-utilization"),
    ("dtype", "dtype"),
    ("blockSize", "block size"),
    ("enforceEager", "enforce-eager"),
    ("nodesPerReplica", "nodes per replica"),
    ("vllmRelease", "vLLM release"),
    ("feasible", "feasible"),
)


def plan_changed(previous: object, plan: Plan) -> list[Event]:
    """One PlanChanged when what the plan decides for the pods changes (`previous`: the
    status.plan written before). A measurement folded into the plan, or a pass that finds
    the plan as it was, says nothing: an edit used to raise the event two or three times,
    with identical text, as the new pods' measurements arrived."""
    before = {
        str(tier.get("name")): tier
        for tier in (previous if isinstance(previous, list) else [])
        if isinstance(tier, Mapping)
    }
    if not before:
        summary = "; ".join(describe_tier(tier) for tier in plan.tiers)
        return [Event("Normal", REASON_PLAN_CHANGED, f"planned: {summary}")]
    changes = []
    for tier in plan.tiers:
        old = before.get(tier.name)
        if old is None:
            changes.append(f"{describe_tier(tier)} (new tier)")
            continue
        wire = tier.to_wire()
        moved = [
            f"{label} {old.get(key)} -> {wire.get(key)}"
            for key, label in _DECIDED
            if old.get(key) != wire.get(key)
        ]
        if moved:
            changes.append(f"{tier.name}: " + ", ".join(moved))
    if not changes:
        return []
    return [Event("Normal", REASON_PLAN_CHANGED, "plan changed: " + "; ".join(changes))]


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
