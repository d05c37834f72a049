"""One reconcile pass as data (pure): `compute(snapshot) -> Intent`, then
`conclude(snapshot, intent, executed) -> Conclusion`.

The controller reads a `Snapshot` (the InferenceService as it was read, what it owns,
its pods, what was measured: observations only), executes the intent's actions, and
writes the conclusion's status patch and events. Everything between is decided here:

- the probe's verdict on the model's config.json (reconcile.modelprobe), then the one
  design of the service (design.design: the workload planned for, images, the plan,
  the checks, the front door, the policy) from what the snapshot observed;
- the design is rendered once: a tier held on the revision it serves (rollout.holds)
  renders its workload at that revision inside the same render;
- the plan that is rendered (the estimates: pod flags and probes never follow a
  measurement, so a measurement never rolls pods) and the plan that is reported
  (measured cold starts and KV capacity folded in) are two values of the design;
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
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache import readiness as cache_readiness
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.config import OperatorSettings
from inferfleet.design import replan
from inferfleet.design.derive import Design, ModelReading, Observations, design, internal_error_message
from inferfleet.kubedata import Event, ObjectRef, ref_of
from inferfleet.reconcile import (
    event_rules,
    frontdoor_status,
    kindswitch,
    modelprobe,
    rollout,
    status_rules,
    volume_rules,
)
from inferfleet.reconcile.actions import Action
from inferfleet.reconcile.diff import diff
from inferfleet.render import content_hash, render
from inferfleet.render import route_matching as routes


@dataclass(frozen=True)
class Snapshot:
    """What one pass read: the InferenceService and everything it owns, as observed."""

    settings: OperatorSettings
    generation: int | None
    previous: Mapping[str, Any]  # the status as read
    now: str  # RFC 3339, one instant for the whole pass
    service: InferenceService | None  # the spec as declared; None when it does not parse
    invalid: str | None  # why it does not parse, in words
    observed: Sequence[Mapping[str, Any]] = ()  # owned objects, before this pass writes
    cache_pods: Sequence[Mapping[str, Any]] = ()  # pre-cache pods (CacheReady, holds)
    serving_pods: Sequence[Mapping[str, Any]] = ()  # vLLM server pods (front door, cold start)
    measured_cold_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    measured_kv: Mapping[str, planner.MeasuredKvCapacity] = field(default_factory=dict)
    # Starts that restored their node's compile cache (measured_cold_starts: those that compiled).
    measured_warm_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    # The namespace's node-cache claim and volume (cache.mode nvme only).
    node_cache: volume_rules.ObservedVolume | None = None
    # Every HTTPRoute the operator can list (any namespace, any Gateway), as read: which of
    # them take requests our route covers is decided here (reconcile.frontdoor_status.shadows).
    gateway_routes: Sequence[routes.Observed] = ()
    # The pods of the model's probe Jobs, read while status says a probe runs.
    probe_pods: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class Intent:
    """What the pass wants done, and the design it renders and reports."""

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
    # The service as designed (None: the spec does not parse) and the probe's verdict.
    design: Design | None = None
    model_probe: modelprobe.ModelProbe = modelprobe.NOT_NEEDED

    @property
    def service(self) -> InferenceService | None:
        """The service as designed: with replan: auto, planned for the observed workload."""
        return self.design.service if self.design is not None else None


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


def model_probe(snapshot: Snapshot, service: InferenceService) -> modelprobe.ModelProbe:
    """The verdict on the model's config.json from what the pass observed (its probe Jobs
    and their pods, the verdict status keeps); the source itself is never read here."""
    return modelprobe.decide(
        service,
        settings=snapshot.settings,
        catalogs=snapshot.settings.catalogs(),
        previous=snapshot.previous.get("modelSource"),
        jobs=modelprobe.probe_jobs(list(snapshot.observed)),
        pods=list(snapshot.probe_pods),
        now=snapshot.now,
    )


def design_of(snapshot: Snapshot, service: InferenceService, probe: modelprobe.ModelProbe) -> Design:
    """The service's design from what the pass observed."""
    reading = ModelReading(probe.fetched, probe.problem, pending=probe.applies and probe.fetched is None)
    observed = Observations(
        status=snapshot.previous,
        generation=snapshot.generation,
        now=snapshot.now,
        model=reading,
        cold_starts=snapshot.measured_cold_starts,
        kv_capacity=snapshot.measured_kv,
        warm_starts=snapshot.measured_warm_starts,
        cache_pods=snapshot.cache_pods,
        serving_pods=snapshot.serving_pods,
        eligible_nodes=cache_readiness.eligible_nodes(service, snapshot.observed),
    )
    return design(service, snapshot.settings, observed)


def desired_actions(
    snapshot: Snapshot, designed: Design, probe: modelprobe.ModelProbe
) -> tuple[tuple[Action, ...], tuple[rollout.RolloutHold, ...], tuple[kindswitch.KindSwitch, ...]]:
    """Holds, one render (held tiers at the revision they serve), kind switches, diff."""
    service, plan = designed.service, designed.plan
    assert plan is not None  # compute renders deployable designs only
    held = rollout.holds(service, plan, list(snapshot.observed), list(snapshot.cache_pods))
    revisions = {hold.tier: hold.serving_revision for hold in held}
    desired: list[Mapping[str, Any]] = list(render(designed, revisions))
    if probe.job is not None:
        desired.append(probe.job)
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
    """The pass's intent: the probe's verdict, the design, and what realizes it; nothing
    to do without a parsed spec or a deployable plan."""
    if snapshot.service is None:
        return Intent((), (), None, None, snapshot.invalid)
    probe = model_probe(snapshot, snapshot.service)
    designed = design_of(snapshot, snapshot.service, probe)
    plan = designed.deployable_plan
    if plan is None:
        return Intent((), (), None, None, designed.invalid, design=designed, model_probe=probe)
    try:
        actions, held, switches = desired_actions(snapshot, designed, probe)
        volume = node_cache_verdict(snapshot, designed.service)
    except Exception as error:
        # Nothing is applied or pruned: the running fleet stays as it was, and the
        # condition says why instead of the pass failing (and retrying) forever.
        words = internal_error_message("render", error)
        return Intent((), (), None, None, words, render_error=error, design=designed, model_probe=probe)
    if volume is not None:
        # The claim and its volume first: every pre-cache and serving pod mounts the claim.
        actions = (*volume.actions, *actions)
    return Intent(
        actions,
        held,
        plan,
        designed.reported_plan,
        None,
        node_cache=volume,
        switches=switches,
        design=designed,
        model_probe=probe,
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
    if intent.service is None:
        return None
    return cache_readiness.for_service(
        intent.service,
        intent.reported_plan,
        list(snapshot.observed),
        list(snapshot.cache_pods),
        held=[hold.describe() for hold in intent.held],
    )


def _cache_status(
    status: dict[str, Any], snapshot: Snapshot, intent: Intent, cache: cache_readiness.CacheCondition
) -> None:
    """status.cache and CacheReady (the node-cache volume's state first)."""
    compiled = intent.design.compile_caches if intent.design is not None else {}
    status["cache"] = [_with_compile_cache(tier.to_wire(), compiled.get(tier.tier)) for tier in cache.tiers]
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


def _with_compile_cache(
    entry: dict[str, Any], state: compile_cache.TierCompileState | None
) -> dict[str, Any]:
    """A status.cache entry with its tier's compile-cache key and the nodes that have it."""
    if state is None:
        return entry
    nodes = [{"node": e.node, "since": e.since} for e in state.nodes]
    return {**entry, "compileKey": state.key, "nodesCompileWarm": len(nodes), "compileNodes": nodes}


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
    designed = intent.design
    front = designed.front_door if designed is not None and intent.rendered_plan is not None else None
    if designed is not None and front is not None:
        # The front door as rendered (its holds from the plan as rendered).
        service = designed.service
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
    planned_for = designed.planned_for if designed is not None else None
    if planned_for is not None:
        status["plannedWorkload"] = planned_for
    else:
        status.pop("plannedWorkload", None)
    if cache is not None:
        _cache_status(status, snapshot, intent, cache)
    if designed is not None and intent.rendered_plan is not None:
        _model_source_status(status, snapshot, intent.model_probe)
    # kubectl get's STATUS: the worst of every condition, the autoscaler's as last read.
    status["summary"] = worst_condition(status.get("conditions"))
    return status


def _model_source_status(status: dict[str, Any], snapshot: Snapshot, probe: modelprobe.ModelProbe) -> None:
    """status.modelSource and ModelConfigRead from the probe's verdict; both go away when
    the model no longer needs reading (a catalog entry, an inline config)."""
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
    replanned = replan.announce(dict(previous), intent.design.planned_for if intent.design else None)
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
