"""Status from what one reconcile pass observed and did (pure).

The reconciler owns the conditions Planned, Ready, Degraded, SloAtRisk and the plan/replica
fields (CacheReady is set beside them, in reconcile.compute); the autoscaler's conditions
(Scaling, ScalingActive, WorkloadDrift) and fields (its state) are carried over untouched,
because the status patch replaces the whole conditions list. Each condition has one
writer (`labels.CONDITION_OWNERS`), so Degraded is computed from this pass alone: a
Degraded an older operator let the autoscaler write is overwritten on the next pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import Plan, labels, safe_text
from inferfleet.kubedata import ready_replicas_of, replicas_of
from inferfleet.reconcile.kindswitch import KindSwitch

# Reasons of the "all is well" states, beside the ones in api.labels.
REASON_AS_PLANNED = "AsPlanned"
REASON_NO_WORKLOADS = "NoWorkloads"
# Ready=False because a tier's replicas have nowhere to run: no node matches its placement
# at all (CacheReady's reason too), or the scheduler refused its pods (its own words).
REASON_NO_ELIGIBLE_NODES = "NoEligibleNodes"
REASON_UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class PassResult:
    """What a reconcile pass knows when it writes status."""

    generation: int | None
    plan: Plan | None
    plan_hash: str | None
    # The spec could not be planned at all (validation or planner refusal), in words.
    invalid: str | None = None
    # Observed workload per tier (after this pass's writes).
    workloads: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Tiers changing kind whose old workload still serves (`workloads` holds the new one).
    replacing: Mapping[str, KindSwitch] = field(default_factory=dict)
    # Permanent write failures, in words ("apply Deployment/ns/x: ...").
    failures: Sequence[str] = ()
    # Optional objects the cluster cannot hold (e.g. no PodMonitor CRD), in words.
    skipped: Sequence[str] = ()
    # Objects of names we render that someone else made (left untouched), in words.
    conflicts: Sequence[str] = ()
    # Per tier with no node matching its placement: the node labels it looks for.
    no_nodes: Mapping[str, str] = field(default_factory=dict)
    # Per tier, the scheduler's message on a serving pod it could not place.
    unschedulable: Mapping[str, str] = field(default_factory=dict)


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Replace one condition; lastTransitionTime moves only when `status` changes."""
    out: list[dict[str, Any]] = []
    found = False
    for condition in conditions:
        if condition.get("type") != type_:
            out.append(dict(condition))
            continue
        found = True
        changed = condition.get("status") != status
        entry: dict[str, Any] = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now if changed else condition.get("lastTransitionTime", now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        out.append(entry)
    if not found:
        entry = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        out.append(entry)
    return out


def _rolled_out(workload: Mapping[str, Any]) -> bool:
    """The workload's controller has seen its latest spec and updated every replica."""
    status = workload.get("status") or {}
    generation = (workload.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")  # Deployments report it; LeaderWorkerSets do not
    if generation is not None and observed is not None and int(observed) < int(generation):
        return False
    desired = replicas_of(workload) or 0
    return int(status.get("updatedReplicas") or 0) >= desired


def tier_replicas(result: PassResult) -> list[dict[str, Any]]:
    """Per-tier desired/ready, in plan order, then any observed tier the plan lacks.

    While a tier changes kind, `desired` is the new workload's and `ready` counts every
    Ready serving replica of the tier, the old workload's too (as a Deployment's
    readyReplicas counts old and new pods during a rolling update); `replacing` says
    what the old one still serves and what the new one needs before it goes."""
    order = [tier.name for tier in result.plan.tiers] if result.plan is not None else []
    order += sorted(set(result.workloads) - set(order))
    out: list[dict[str, Any]] = []
    for tier in order:
        if tier not in result.workloads:
            continue
        entry: dict[str, Any] = {
            "tier": tier,
            "desired": replicas_of(result.workloads[tier]) or 0,
            "ready": ready_replicas_of(result.workloads[tier]),
        }
        switch = result.replacing.get(tier)
        if switch is not None:
            entry["ready"] += switch.old_ready
            entry["replacing"] = {"kind": switch.old.kind, "ready": switch.old_ready, "needed": switch.needed}
        out.append(entry)
    return out


def _planned(result: PassResult) -> tuple[str, str, str]:
    if result.invalid is not None or result.plan is None:
        return "False", labels.REASON_INVALID_SPEC, result.invalid or "the spec could not be planned"
    infeasible = [tier for tier in result.plan.tiers if not tier.feasible]
    if not infeasible:
        return "True", labels.REASON_PLANNED, f"{len(result.plan.tiers)} tier(s) planned"
    words = "; ".join(f"{tier.name}: {tier.infeasible_reason}" for tier in infeasible)
    if len(infeasible) == len(result.plan.tiers):
        return "False", labels.REASON_NO_FEASIBLE_TIER, f"no tier can serve the model: {words}"
    return "False", labels.REASON_INFEASIBLE_TIER, words


def _ready(result: PassResult, replicas: list[dict[str, Any]]) -> tuple[str, str, str]:
    if not replicas:
        return "False", REASON_NO_WORKLOADS, "no workload exists yet"
    summary = ", ".join(_tier_words(result, entry) for entry in replicas)
    settled = all(
        entry["ready"] >= entry["desired"]
        and _rolled_out(result.workloads[entry["tier"]])
        and "replacing" not in entry
        for entry in replicas
    )
    if settled:
        return "True", labels.REASON_AVAILABLE, summary
    short = [entry["tier"] for entry in replicas if entry["ready"] < entry["desired"]]
    missing = [
        f"{tier}: no node matches its placement (nodes with {result.no_nodes[tier]})"
        for tier in short
        if tier in result.no_nodes
    ]
    if missing:
        return "False", REASON_NO_ELIGIBLE_NODES, f"{summary}; " + "; ".join(missing)
    refused = [f"{tier}: {result.unschedulable[tier]}" for tier in short if tier in result.unschedulable]
    if refused:
        return "False", REASON_UNSCHEDULABLE, f"{summary}; unschedulable: " + "; ".join(refused)
    return "False", labels.REASON_PROGRESSING, summary


def _tier_words(result: PassResult, entry: Mapping[str, Any]) -> str:
    words = f"{entry['tier']} {entry['ready']}/{entry['desired']}"
    switch = result.replacing.get(entry["tier"])
    if switch is None:
        return words
    return f"{words} ({switch.describe(ready_replicas_of(result.workloads[entry['tier']]))})"


def unschedulable(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Per tier, the scheduler's message on one of its pending serving pods it could not
    place (PodScheduled False, reason Unschedulable): it names what no node offered."""
    found: dict[str, str] = {}
    for pod in pods:
        tier = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.LABEL_TIER)
        if tier is None or tier in found or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
                found[str(tier)] = str(condition.get("message") or "no node fits")
    return found


def _degraded(result: PassResult, planned: tuple[str, str, str]) -> tuple[str, str, str]:
    if result.conflicts:
        # What to do is the user's (or the platform's) to decide: it comes first.
        return "True", labels.REASON_OBJECT_CONFLICT, "; ".join([*result.conflicts, *result.failures])
    if result.failures:
        return "True", labels.REASON_APPLY_FAILED, "; ".join(result.failures)
    if planned[0] == "False":
        suffix = " (running workloads are kept as they were)" if result.workloads else ""
        return "True", planned[1], planned[2] + suffix
    if result.skipped:
        # The front door's kinds (no Gateway API / Inference Extension CRDs) say so by name.
        front_door = any("InferencePool" in s or "HTTPRoute" in s for s in result.skipped)
        reason = labels.REASON_FRONT_DOOR_UNAVAILABLE if front_door else labels.REASON_METRICS_UNAVAILABLE
        return "True", reason, "; ".join(result.skipped)
    return "False", REASON_AS_PLANNED, "every tier is deployed as planned"


def _slo_at_risk(result: PassResult) -> tuple[str, str, str] | None:
    """SloAtRisk from the planned tiers' warnings (None while nothing is planned)."""
    if result.plan is None:
        return None
    risky = [tier for tier in result.plan.tiers if tier.feasible and tier.warnings]
    if not risky:
        return "False", labels.REASON_SLOS_REACHABLE, "every feasible tier meets the latency SLOs as planned"
    words = "; ".join(f"{tier.name}: {' / '.join(tier.warnings)}" for tier in risky)
    return "True", labels.REASON_SLO_UNREACHABLE, words


def compute(previous: Mapping[str, Any], result: PassResult, *, now: str) -> dict[str, Any]:
    """The whole new status (fields this reconciler owns merged over `previous`)."""
    status = dict(previous)
    status["observedGeneration"] = result.generation
    if result.plan is not None:
        # An invalid spec keeps the last good plan on display: it is what still runs.
        status["plan"] = [tier.to_wire() for tier in result.plan.tiers]
        status["planHash"] = result.plan_hash
        split = result.plan.disaggregation
        if split is not None:
            status["disaggregation"] = split.to_wire()
        else:
            status.pop("disaggregation", None)
    replicas = tier_replicas(result)
    status["replicas"] = replicas
    status["desiredReplicas"] = sum(entry["desired"] for entry in replicas)
    status["readyReplicas"] = sum(entry["ready"] for entry in replicas)
    status["tierSummary"] = ",".join(f"{e['tier']}:{e['ready']}/{e['desired']}" for e in replicas)
    planned = _planned(result)
    conditions: list[dict[str, Any]] = list(previous.get("conditions") or [])
    updates = [(labels.CONDITION_PLANNED, planned), (labels.CONDITION_READY, _ready(result, replicas))]
    updates.append((labels.CONDITION_DEGRADED, _degraded(result, planned)))
    slo = _slo_at_risk(result)
    if slo is not None:
        updates.append((labels.CONDITION_SLO_AT_RISK, slo))
    for type_, (value, reason, message) in updates:
        conditions = set_condition(
            conditions,
            type_,
            value,
            reason,
            safe_text.condition_message(message),
            now=now,
            generation=result.generation,
        )
    status["conditions"] = conditions
    return {key: value for key, value in status.items() if value is not None}


def changes(previous: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning `previous` into `new` at the top level (None deletes)."""
    patch = {key: value for key, value in new.items() if previous.get(key) != value}
    patch.update({key: None for key in previous if key not in new})
    return patch
