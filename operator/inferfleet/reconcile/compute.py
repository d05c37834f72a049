"""One reconcile pass as data (pure): `compute(snapshot) -> Intent`, then
`conclude(snapshot, intent, executed) -> Conclusion`.

The controller reads a `Snapshot` (the InferenceService as planned, what it owns, its
pods, what was measured), executes the intent's actions, and writes the conclusion's
status patch and events. Everything between is decided here:

- the plan is rendered once: a tier held on the revision it serves (rollout.holds)
  renders its workload at that revision inside the same render;
- the plan that is rendered (the estimates: pod flags and probes never follow a
  measurement, so a measurement never rolls pods) and the plan that is reported
  (measured cold starts and KV capacity folded in) are two values computed up front;
  nothing changes a plan after it is rendered;
- status is built in one place (`conclude`), from the snapshot, the intent and what
  the executor did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from inferfleet import planner
from inferfleet.api import InferenceService, Plan, labels, safe_text
from inferfleet.api.status import worst_condition
from inferfleet.config import OperatorSettings
from inferfleet.design import replan, topology
from inferfleet.kubedata import Event, ObjectRef, ref_of
from inferfleet.precache import readiness as cache_readiness
from inferfleet.precache import workloads as cache_objects
from inferfleet.reconcile import events as event_rules
from inferfleet.reconcile import frontdoor as frontdoor_status
from inferfleet.reconcile import kindswitch, modelprobe, rollout
from inferfleet.reconcile import status as status_rules
from inferfleet.reconcile import volumes as volume_rules
from inferfleet.reconcile.actions import Action
from inferfleet.reconcile.diff import diff
from inferfleet.render import content_hash, render, routes


@dataclass(frozen=True)
class Snapshot:
    """What one pass read: the InferenceService as planned and everything it owns."""

    settings: OperatorSettings
    generation: int | None
    previous: Mapping[str, Any]  # the status as read
    now: str  # RFC 3339, one instant for the whole pass
    service: InferenceService | None  # None when the spec does not parse
    plan: Plan | None  # None when nothing may be rendered (invalid, refused)
    invalid: str | None  # why, in words, when the spec cannot be planned
    planned_for: dict[str, Any] | None = None  # replan: auto's observed workload
    observed: Sequence[Mapping[str, Any]] = ()  # owned objects, before this pass writes
    cache_pods: Sequence[Mapping[str, Any]] = ()  # pre-cache pods (CacheReady, holds)
    serving_pods: Sequence[Mapping[str, Any]] = ()  # vLLM server pods (front door, cold start)
    measured_cold_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    measured_kv: Mapping[str, planner.MeasuredKvCapacity] = field(default_factory=dict)
    # The namespace's node-cache claim and volume (cache.mode nvme only).
    node_cache: volume_rules.ObservedVolume | None = None
    # Every HTTPRoute the operator can list (any namespace, any Gateway), as read: which of
    # them take requests our route covers is decided here (reconcile.frontdoor.shadows).
    gateway_routes: Sequence[routes.Observed] = ()
    # config.json of a model the catalog lacks: the probe's verdict and Job (modelprobe)
    model_probe: modelprobe.ModelProbe = modelprobe.NOT_NEEDED


@dataclass(frozen=True)
class Intent:
    """What the pass wants done, and the plans it renders and reports."""

    actions: tuple[Action, ...]
    held: tuple[rollout.RolloutHold, ...]
    rendered_plan: Plan | None  # what the desired objects were rendered from
    reported_plan: Plan | None  # the same plan with the measurements, for status
    invalid: str | None
    # An exception the pure core raised on this spec (a bug or an unchecked value): the
    # shell logs it; nothing is applied or pruned and `invalid` says so.
    render_error: Exception | None = None
    # Whether the namespace's node-cache volume is usable, and what to create for it.
    node_cache: volume_rules.VolumeVerdict | None = None
    # Tiers whose workload changes kind: the old one serves until the new one is Ready.
    switches: tuple[kindswitch.KindSwitch, ...] = ()


class Executed(Protocol):
    """What the executor did (controller.executor.Report)."""

    @property
    def applied(self) -> Mapping[ObjectRef, Mapping[str, Any]]: ...
    @property
    def deleted(self) -> Sequence[ObjectRef]: ...
    @property
    def failures(self) -> Sequence[str]: ...
    @property
    def skipped(self) -> Sequence[str]: ...
    @property
    def conflicts(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class NothingExecuted:
    applied: Mapping[ObjectRef, Mapping[str, Any]] = field(default_factory=dict)
    deleted: Sequence[ObjectRef] = ()
    failures: Sequence[str] = ()
    skipped: Sequence[str] = ()
    conflicts: Sequence[str] = ()


@dataclass(frozen=True)
class Conclusion:
    """The new status, the merge patch that writes it, and the events to record."""

    status: dict[str, Any]
    patch: dict[str, Any]
    events: tuple[Event, ...]
    # The subset of `events` that reports what the executor did (tiers replaced or
    # pruned): those happened whether or not the status write succeeds, and the next
    # pass cannot tell again (the objects are gone), so they are posted even when the
    # write fails. The others describe the status being written and wait for it.
    done_events: tuple[Event, ...] = ()


def internal_error_message(stage: str, error: Exception) -> str:
    """Words for an exception the pure core raised on this spec."""
    return (
        f"the operator could not {stage} this spec ({type(error).__name__}: {error}); running workloads "
        "are kept as they are. Check the values the message names; if they look sane, report it as a bug"
    )[:1024]


def measured_seconds(snapshot: Snapshot) -> dict[str, float]:
    return {tier: found.seconds for tier, found in snapshot.measured_cold_starts.items()}


def reported(snapshot: Snapshot, plan: Plan | None) -> Plan | None:
    """The plan status shows: the measured KV capacity and cold starts folded in."""
    if snapshot.service is None or plan is None:
        return None
    with_kv = planner.observe_kv_capacity(plan, snapshot.service.spec, dict(snapshot.measured_kv))
    return planner.observe_cold_starts(with_kv, dict(snapshot.measured_cold_starts))


def desired_actions(
    snapshot: Snapshot, service: InferenceService, plan: Plan
) -> tuple[tuple[Action, ...], tuple[rollout.RolloutHold, ...], tuple[kindswitch.KindSwitch, ...]]:
    """Holds, one render (held tiers at the revision they serve), kind switches, diff."""
    held = rollout.holds(service, plan, list(snapshot.observed), list(snapshot.cache_pods))
    revisions = {hold.tier: hold.serving_revision for hold in held}
    desired: list[Mapping[str, Any]] = list(
        render(service, plan, snapshot.settings, measured_seconds(snapshot), revisions)
    )
    if snapshot.model_probe.job is not None:
        desired.append(snapshot.model_probe.job)
    infeasible = frozenset(tier.name for tier in plan.tiers if not tier.feasible)
    observed = [dict(obj) for obj in snapshot.observed]
    switches = kindswitch.switches(desired, observed)
    desired = kindswitch.with_start_replicas(desired, switches)
    actions = diff(desired, observed, keep_tiers=infeasible, keep=kindswitch.kept(switches))
    return tuple(actions), held, switches


def node_cache_verdict(snapshot: Snapshot, service: InferenceService) -> volume_rules.VolumeVerdict | None:
    """What the namespace's node-cache claim and volume need (cache.mode nvme only)."""
    if snapshot.node_cache is None or not cache_objects.needs_node_volume(service):
        return None
    observed = snapshot.node_cache
    wanted = cache_objects.node_cache_volume(service, snapshot.settings, observed.namespace_uid)
    return volume_rules.ensure(wanted, observed, provision=snapshot.settings.cache_volumes == "operator")


def compute(snapshot: Snapshot) -> Intent:
    """The pass's intent: nothing to do without a service and a plan."""
    service, plan = snapshot.service, snapshot.plan
    if service is None or plan is None:
        return Intent((), (), None, None, snapshot.invalid)
    try:
        actions, held, switches = desired_actions(snapshot, service, plan)
        volume = node_cache_verdict(snapshot, service)
    except Exception as error:
        # Nothing is applied or pruned: the running fleet stays as it was, and the
        # condition says why instead of the pass failing (and retrying) forever.
        return Intent((), (), None, None, internal_error_message("render", error), render_error=error)
    if volume is not None:
        # The claim and its volume first: every pre-cache and serving pod mounts the claim.
        actions = (*volume.actions, *actions)
    return Intent(
        actions, held, plan, reported(snapshot, plan), snapshot.invalid, node_cache=volume, switches=switches
    )


def _after(snapshot: Snapshot, executed: Executed) -> dict[ObjectRef, Mapping[str, Any]]:
    """What the service owns after this pass: observed, updated by what was written."""
    by_ref: dict[ObjectRef, Mapping[str, Any]] = {ref_of(obj): obj for obj in snapshot.observed}
    by_ref.update(executed.applied)
    for gone in executed.deleted:
        by_ref.pop(gone, None)
    return by_ref


def tier_workloads(
    after: Mapping[ObjectRef, Mapping[str, Any]], plan: Plan | None = None
) -> dict[str, Mapping[str, Any]]:
    """Per tier, its Deployment or LeaderWorkerSet after the pass: while a tier changes
    kind, the one the plan renders (the old one shows as `replacing`)."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for ref, obj in sorted(after.items()):
        tier = (obj["metadata"].get("labels") or {}).get(labels.LABEL_TIER)
        if ref.is_workload and tier is not None:
            found.setdefault(tier, []).append(obj)
    multi_node = {tier.name: tier.nodes_per_replica > 1 for tier in plan.feasible_tiers} if plan else {}
    return {tier: kindswitch.preferred(objs, multi_node.get(tier)) for tier, objs in found.items()}


def _cache_condition(snapshot: Snapshot, intent: Intent) -> cache_readiness.CacheCondition | None:
    """CacheReady and status.cache from the pre-cache DaemonSets/Job and their pods."""
    if snapshot.service is None:
        return None
    return cache_readiness.for_service(
        snapshot.service,
        intent.reported_plan,
        list(snapshot.observed),
        list(snapshot.cache_pods),
        held=[hold.describe() for hold in intent.held],
    )


def _cache_status(
    status: dict[str, Any], snapshot: Snapshot, intent: Intent, cache: cache_readiness.CacheCondition
) -> None:
    """status.cache and CacheReady (the node-cache volume's state first)."""
    status["cache"] = [tier.to_wire() for tier in cache.tiers]
    state, reason, message = cache.status, cache.reason, cache.message
    volume = intent.node_cache
    if volume is not None and not volume.ready:
        # No pre-cache or serving pod can start before the claim binds: that is the news.
        state, reason = "False", volume.reason or volume_rules.REASON_VOLUME_PENDING
        message = f"{volume.message}; {message}" if message else str(volume.message)
    status["conditions"] = status_rules.set_condition(
        status.get("conditions") or [],
        labels.CONDITION_CACHE_READY,
        state,
        reason,
        message,
        now=snapshot.now,
        generation=snapshot.generation,
    )


def build_status(snapshot: Snapshot, intent: Intent, executed: Executed) -> dict[str, Any]:
    """The whole new status: the one place it is assembled."""
    plan = intent.reported_plan
    after = _after(snapshot, executed)
    cache = _cache_condition(snapshot, intent)
    result = status_rules.PassResult(
        generation=snapshot.generation,
        plan=plan,
        plan_hash=content_hash(plan.to_wire()) if plan is not None else None,
        invalid=intent.invalid,
        workloads=tier_workloads(after, intent.rendered_plan),
        # Both workloads of a switch exist after the pass: the old one still serves.
        replacing={s.tier: s for s in intent.switches if s.old in after and s.new in after},
        failures=tuple(executed.failures),
        skipped=tuple(executed.skipped),
        conflicts=tuple(executed.conflicts),
        no_nodes={t.tier: t.nodes_wanted for t in cache.tiers if t.nodes_wanted} if cache else {},
        unschedulable=status_rules.unschedulable(snapshot.serving_pods),
    )
    status = status_rules.compute(snapshot.previous, result, now=snapshot.now)
    service = snapshot.service
    if service is not None and intent.rendered_plan is not None:
        # The front door's holds come from the plan as rendered.
        measured_s = measured_seconds(snapshot)
        front = topology.resolve(service, intent.rendered_plan, snapshot.settings, measured_s)
        current = [dict(obj) for obj in after.values()]
        pods = list(snapshot.serving_pods)
        live = next((o for o in current if o.get("kind") == "HTTPRoute"), None)
        shadows = frontdoor_status.shadows(
            service, front, snapshot.settings, live, gateway_routes=snapshot.gateway_routes, now=snapshot.now
        )
        status["frontDoor"] = frontdoor_status.summarize(service, front, current, pods, shadows)
        status["conditions"] = frontdoor_status.degraded_when_shadowed(
            status, snapshot.previous, now=snapshot.now, generation=snapshot.generation
        )
    if snapshot.planned_for is not None:
        status["plannedWorkload"] = snapshot.planned_for
    else:
        status.pop("plannedWorkload", None)
    if cache is not None:
        _cache_status(status, snapshot, intent, cache)
    if service is not None and intent.rendered_plan is not None:
        _model_source_status(status, snapshot)
    # kubectl get's STATUS: the worst of every condition, the autoscaler's as last read.
    status["summary"] = worst_condition(status.get("conditions"))
    return status


def _model_source_status(status: dict[str, Any], snapshot: Snapshot) -> None:
    """status.modelSource and ModelConfigRead from the probe's verdict; both go away when
    the model no longer needs reading (a catalog entry, an inline config)."""
    probe = snapshot.model_probe
    if probe.verdict is not None:
        status["modelSource"] = probe.verdict
    else:
        status.pop("modelSource", None)
    conditions = status.get("conditions") or []
    if probe.condition is None:
        status["conditions"] = [c for c in conditions if c.get("type") != labels.CONDITION_MODEL_CONFIG_READ]
        return
    value, reason, message = probe.condition
    status["conditions"] = status_rules.set_condition(
        conditions,
        labels.CONDITION_MODEL_CONFIG_READ,
        value,
        reason,
        message,
        now=snapshot.now,
        generation=snapshot.generation,
    )


def pass_events(
    snapshot: Snapshot, intent: Intent, status: Mapping[str, Any], executed: Executed | None = None
) -> list[Event]:
    """Plan changes, condition transitions, tiers replaced or pruned, a replan."""
    previous = snapshot.previous
    found: list[Event] = []
    plan = intent.reported_plan
    if plan is not None:
        found += event_rules.plan_changed(previous.get("plan"), plan)
    found += event_rules.condition_transitions(previous.get("conditions") or [], status["conditions"])
    found += executed_events(snapshot, intent, executed)
    replanned = replan.announce(dict(previous), snapshot.planned_for)
    if replanned is not None:
        found.append(Event("Normal", labels.REASON_REPLANNED, replanned))
    return found


def executed_events(snapshot: Snapshot, intent: Intent, executed: Executed | None = None) -> list[Event]:
    """Tiers replaced or pruned: what the executor did in this pass."""
    executed = executed or NothingExecuted()
    found = event_rules.replaced(intent.switches, created=executed.applied, deleted=executed.deleted)
    return found + event_rules.pruned(pruned_tiers(snapshot, intent, executed.deleted))


def pruned_tiers(snapshot: Snapshot, intent: Intent, deleted: Sequence[ObjectRef]) -> list[str]:
    """Tiers whose workload this pass deleted because the tier left the spec (not the old
    workload of a tier that changed kind)."""
    replaced = {switch.old for switch in intent.switches}
    in_spec = {tier.name for tier in snapshot.service.spec.tiers} if snapshot.service is not None else set()
    gone = {ref for ref in deleted if ref.is_workload and ref not in replaced}
    tiers = {
        str((obj["metadata"].get("labels") or {}).get(labels.LABEL_TIER))
        for obj in snapshot.observed
        if ref_of(obj) in gone
    }
    return sorted(tiers - in_spec)


def conclude(snapshot: Snapshot, intent: Intent, executed: Executed | None = None) -> Conclusion:
    """Status, its patch and the events, once the intent's actions ran."""
    # Escaped and bounded before it is compared with what status holds (written the same
    # way), so a settled service writes nothing.
    done = executed or NothingExecuted()
    status = safe_text.bounded_status(build_status(snapshot, intent, done))
    patch = status_rules.changes(snapshot.previous, status)
    events = tuple(_escaped(event) for event in pass_events(snapshot, intent, status, done))
    done_events = tuple(_escaped(event) for event in executed_events(snapshot, intent, done))
    return Conclusion(status, patch, events, done_events)


def _escaped(event: Event) -> Event:
    return Event(event.type, safe_text.event_reason(event.reason), safe_text.event_message(event.message))
