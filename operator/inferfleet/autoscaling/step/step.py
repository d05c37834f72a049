"""One autoscaler step for one InferenceService (pure: data in, actions out).

    (spec, plan, workloads, previous status, signals, clock) → decide() → StepResult

`StepResult` says what to write (status fields, the conditions the autoscaler owns:
Scaling, ScalingActive, WorkloadDrift), which workloads to scale and which events to
record. The runner executes it.
Nothing here imports kopf, kubernetes or prometheus_api_client; the same `decide()`
runs in the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from inferfleet.api import (
    InferenceService,
    InferenceServiceSpec,
    Plan,
    ScalingDecision,
    TierPlan,
    labels,
    safe_text,
)
from inferfleet.api.plan import DisaggregationPlan
from inferfleet.api.spec import TokenPercentiles
from inferfleet.autoscaling.policy import (
    DoorPool,
    FrontDoorSignals,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierSignals,
    decide,
    figures_from_plan,
    plausible,
)
from inferfleet.autoscaling.policy.readings import NO_READINGS, TierReadings
from inferfleet.autoscaling.step import drift_report as workload_drift
from inferfleet.autoscaling.step.drift_report import Replanner
from inferfleet.config import OperatorSettings
from inferfleet.design import Design, Observations, design, replan
from inferfleet.design.policy_config import PolicyConfig
from inferfleet.kubedata import Event, ObjectRef, kube_time, parse_kube_time
from inferfleet.planner.workload import mean_tokens

# Condition reasons and event reasons the autoscaler uses beside those in api.labels.
REASON_WAITING_FOR_REPLICAS = "WaitingForReplicas"
# Replicas wanted on a tier no node can take (status.cache[].nodesWanted).
REASON_NO_ELIGIBLE_NODES = "NoEligibleNodes"
REASON_STABLE = "Stable"
REASON_METRICS_AVAILABLE = "MetricsAvailable"
# This service could not be decided (its spec, its signals, a bug): the others were.
REASON_AUTOSCALING_FAILED = "AutoscalingFailed"
EVENT_SCALED_UP = "ScaledUp"
EVENT_SCALED_DOWN = "ScaledDown"
EVENT_SCALING_ADVISED = "ScalingAdvised"
EVENT_WORKLOAD_DRIFT = "WorkloadDrift"
# ScalingActive=True says the same thing every decision, so it never forces a status write.
SCALING_ACTIVE_MESSAGE = "deciding from the metrics of every tier with ready replicas"
# A loop tick a little early still counts as due: ticks jitter by a fraction of a second.
DUE_SLACK = 0.9
REASON_MAX_CHARS = 1024
# A replica that just turned Ready has not been scraped yet: Prometheus reaches it within
# one scrape interval (15 s, render.service_objects.SCRAPE_INTERVAL). A tier is reported
# without metrics only once its silence outlasts two intervals, so a scale-up or a first
# start never reads as MetricsUnavailable (and Degraded) for a tick.
FIRST_SCRAPE_GRACE_S = 30.0
# Status is written when something a reader acts on changed (see `should_write`), and
# at least this often otherwise, so lastScalingDecision.time says the loop is alive and
# a restarted or newly elected operator resumes from a state at most this old.
STATUS_HEARTBEAT_S = 300.0
# Per-tier state fields that move on every decision without changing what the policy
# will do next: comparing them would make every decision a status write.
# Measurements and the slowly drifting capacity factor move a little every decision;
# the heartbeat write keeps them fresh enough for a restart.
_VOLATILE_TIER_STATE = frozenset(
    {
        "lastWaiting",
        "slotUseAvg",
        "runningAvg",
        "rateAvg",
        "promptTokensAvg",
        "capacityFactor",
        "breachStreak",
        "generationTokensAvg",
        "rejectedAvg",
        "mixRequests",
        "mixFactor",
        "promptQuantiles",
        "outputQuantiles",
        "breachSinceS",
        "breachWaiting",
    }
)


@dataclass(frozen=True)
class WorkloadReplicas:
    """A tier's Deployment or LeaderWorkerSet: its reference and replica counts as the API
    server reports them."""

    ref: ObjectRef
    replicas: int | None
    ready: int


@dataclass(frozen=True)
class ServiceInput:
    """One service as the step sees it: its design on the plan the cluster shows deployed
    (`deployed_design`: the policy and front door every tick of this spec reads), its
    status and workloads."""

    design: Design
    status: Mapping[str, Any]
    workloads: Mapping[str, WorkloadReplicas]
    generation: int | None = None
    # The design of this service with another spec (its images, the model config its
    # probe read): what the drift condition says the observed workload implies.
    replan: Replanner | None = None

    @property
    def namespace(self) -> str:
        return self.design.service.namespace

    @property
    def name(self) -> str:
        return self.design.service.name

    @property
    def spec(self) -> InferenceServiceSpec:
        return self.design.service.spec

    @property
    def plan(self) -> Sequence[TierPlan]:
        return self.design.plan.tiers if self.design.plan is not None else ()


def deployed_design(
    service: InferenceService,
    settings: OperatorSettings,
    deployed: Sequence[TierPlan],
    generation: int | None,
    split: DisaggregationPlan | None = None,
) -> Design:
    """The service's design on the plan status says is deployed (status.plan, and the
    prefill/decode split in status.disaggregation): the autoscaler scales what runs, and
    resolves its policy and front door once per spec and plan, not every tick."""
    plan = Plan(name=service.name, tiers=list(deployed), disaggregation=split)
    return design(service, settings, Observations(generation=generation, deployed_plan=plan))


@dataclass(frozen=True)
class Observation:
    """The signals one loop read for one service; `unavailable` says why there are none."""

    tiers: Mapping[str, TierReadings]
    rate_history_rps: Sequence[float] | None = None
    unavailable: str | None = None
    # Requests each front-door pool holds, by pool name; None: the query failed.
    door_waiting: Mapping[str, float | None] | None = None


@dataclass(frozen=True)
class Scale:
    tier: str
    ref: ObjectRef
    from_replicas: int
    to_replicas: int

    @property
    def down(self) -> bool:
        return self.to_replicas < self.from_replicas


@dataclass(frozen=True)
class ConditionUpdate:
    type: str
    status: Literal["True", "False"]
    reason: str
    message: str

    def __post_init__(self) -> None:
        # As status will hold it (api.safe_text), so comparing with status finds no change.
        object.__setattr__(self, "message", safe_text.condition_message(self.message))


@dataclass(frozen=True)
class TierReport:
    """Per-tier figures for the operator's own metrics."""

    tier: str
    desired: int
    ready: int | None
    actual_rps: float | None


@dataclass(frozen=True)
class StepResult:
    due: bool
    policy: PolicyConfig | None = None
    recommendation: Recommendation | None = None
    state: ScalingState | None = None
    scales: tuple[Scale, ...] = ()
    events: tuple[Event, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)
    conditions: tuple[ConditionUpdate, ...] = ()
    tiers: tuple[TierReport, ...] = ()
    applied: bool = True


def is_due(status: Mapping[str, Any], sync_period_s: float, now_s: float) -> bool:
    """Whether a service's own sync period has passed since its last decision."""
    state = ScalingState.from_dict(status.get("autoscalerState"))
    last = state.last_decision_s
    return last is None or now_s - last >= sync_period_s * DUE_SLACK or now_s < last


def material_state(state: Mapping[str, Any] | None) -> Any:
    """`status.autoscalerState` without what changes on every decision.

    The decision time goes, and so do the times in the scale-down window: a steady
    target re-enters the window with a new time each decision. The window's targets
    stay, so a target that rises, falls or leaves the window is a change to record.
    """
    if not state:
        return None
    tiers = {}
    for name, tier in (state.get("tiers") or {}).items():
        kept = {key: value for key, value in tier.items() if key not in _VOLATILE_TIER_STATE}
        kept["recentTargets"] = [entry[1] for entry in tier.get("recentTargets") or []]
        tiers[name] = kept
    return (state.get("version"), tiers)


def _decision_key(decision: Mapping[str, Any] | None) -> Any:
    # What a decision *is*; reason text, queue depth, TTFT and forecast are its
    # measurements, refreshed with the heartbeat.
    if not decision:
        return None
    return (decision.get("replicas"), decision.get("signal"), decision.get("applied", True))


def should_write(
    written: Mapping[str, Any], result: StepResult, now_s: float, heartbeat_s: float = STATUS_HEARTBEAT_S
) -> bool:
    """Whether a due decision must be written to status, given the status as stored.

    Yes when it scales or announces something, when the decision, the policy state or
    one of the autoscaler's conditions changed, or when the last write is older than
    the heartbeat. Otherwise the runner keeps the new state in memory and decides from
    it next time: at 500 objects and a 15 s period, writing every decision would be
    some 33 status PATCHes a second for nothing.
    """
    if not result.due:
        return False
    if result.scales or result.events:
        return True
    decision = written.get("lastScalingDecision") or {}
    last_s = parse_kube_time(decision.get("time"))
    if last_s is None or now_s < last_s or now_s - last_s >= heartbeat_s:
        return True
    if _decision_key(decision) != _decision_key(result.status.get("lastScalingDecision")):
        return True
    if material_state(written.get("autoscalerState")) != material_state(result.status.get("autoscalerState")):
        return True
    for update in result.conditions:
        current = _find_condition(written, update.type)
        if current is None or (current.get("status"), current.get("reason"), current.get("message")) != (
            update.status,
            update.reason,
            update.message,
        ):
            return True
    return False


def _history_tail(history: Sequence[float] | None, hours: float) -> Sequence[float] | None:
    # None (history unknown: its query failed) and empty (a new service: nothing to
    # forecast from yet) mean different things to decide(): keep them apart.
    if history is None or not history:
        return history
    wanted = max(1, int(hours * 60))
    return history if len(history) <= wanted else history[-wanted:]


def _scaling_signals(workload: WorkloadReplicas, observed: TierReadings | None) -> TierSignals:
    """The workload's replica counts beside the engines' readings, as they were checked."""
    load = observed or NO_READINGS
    return TierSignals(ready_replicas=workload.ready, desired_replicas=workload.replicas, load=load)


def _conditions(
    service: ServiceInput,
    observation: Observation,
    desired: Mapping[str, int],
    *,
    missing_tiers: Sequence[str],
) -> tuple[ConditionUpdate, ...]:
    updates: list[ConditionUpdate] = []
    # Tiers no node can take (the reconciler counted none for their placement): their
    # replicas are not cold-starting, and saying so would hide the missing nodes.
    no_nodes = {
        str(entry.get("tier")): str(entry.get("nodesWanted"))
        for entry in service.status.get("cache") or []
        if isinstance(entry, Mapping) and entry.get("nodesWanted")
    }
    short = [
        (tier, f"{tier}: {service.workloads[tier].ready}/{replicas} ready")
        for tier, replicas in sorted(desired.items())
        if tier in service.workloads and service.workloads[tier].ready < replicas
    ]
    waiting = [text for tier, text in short if tier not in no_nodes]
    stranded = [f"{text}, no node matches its placement" for tier, text in short if tier in no_nodes]
    if stranded:
        message = "; ".join(stranded) + " (CacheReady names the node labels)"
        if waiting:
            message += "; waiting for cold-starting replicas: " + ", ".join(waiting)
        updates.append(ConditionUpdate(labels.CONDITION_SCALING, "True", REASON_NO_ELIGIBLE_NODES, message))
    elif waiting:
        updates.append(
            ConditionUpdate(
                labels.CONDITION_SCALING,
                "True",
                REASON_WAITING_FOR_REPLICAS,
                "waiting for cold-starting replicas: " + ", ".join(waiting),
            )
        )
    else:
        updates.append(
            ConditionUpdate(
                labels.CONDITION_SCALING, "False", REASON_STABLE, "every tier has its replicas ready"
            )
        )

    updates.append(_scaling_active(observation, missing_tiers))
    return tuple(updates)


def _scaling_active(observation: Observation, missing_tiers: Sequence[str]) -> ConditionUpdate:
    """ScalingActive: False while replicas are held for want of metrics."""
    if observation.unavailable is not None:
        message = f"metrics unavailable, holding replica counts: {observation.unavailable}"
    elif missing_tiers:
        message = "no metrics for tier(s) with ready replicas, holding them: " + ", ".join(missing_tiers)
    else:
        return ConditionUpdate(
            labels.CONDITION_SCALING_ACTIVE, "True", REASON_METRICS_AVAILABLE, SCALING_ACTIVE_MESSAGE
        )
    return ConditionUpdate(
        labels.CONDITION_SCALING_ACTIVE,
        "False",
        labels.REASON_METRICS_UNAVAILABLE,
        message[:REASON_MAX_CHARS],
    )


def failure_condition(why: str) -> ConditionUpdate:
    """ScalingActive=False for a service the autoscaler could not decide."""
    message = f"cannot decide this service, replicas held: {why}"
    return ConditionUpdate(
        labels.CONDITION_SCALING_ACTIVE, "False", REASON_AUTOSCALING_FAILED, message[:REASON_MAX_CHARS]
    )


def _find_condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == type_:
            return condition
    return None


def _sum(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def step(service: ServiceInput, observation: Observation, now_s: float, *, force: bool = False) -> StepResult:
    """Decide for one service. Not due (its sync period has not passed): nothing to do.

    The steps: build the scaling context from the plan and the observation, decide,
    turn the recommendation into scales and events, then the conditions (metrics,
    workload drift) and the status the decision leaves.
    """
    policy = service.design.policy
    if not force and not is_due(service.status, policy.sync_period_s, now_s):
        return StepResult(due=False, policy=policy)
    state = ScalingState.from_dict(service.status.get("autoscalerState"))
    tiers, missing_tiers = _tier_contexts(service, observation)
    if not tiers:
        return StepResult(due=False, policy=policy)
    ctx = ScalingContext(
        now_s=now_s,
        policy=policy,
        tiers=tuple(tiers),
        rate_history_rps=_history_tail(observation.rate_history_rps, policy.history_window_hours),
        front_door=front_door_signals(service, observation),
    )
    recommendation, new_state = decide(ctx, state)
    missing_tiers = _past_first_scrape(missing_tiers, new_state, now_s)
    active = policy.mode == "active"
    scales, events, desired_after = _scale_actions(service, recommendation, active=active)
    conditions = _conditions(service, observation, desired_after, missing_tiers=missing_tiers)
    verdict = workload_drift.report(
        name=service.name,
        spec=service.spec,
        status=service.status,
        generation=service.generation,
        plans=service.plan,
        figures={t.name: t.figures for t in tiers},
        state=new_state,
        settings=service.design.settings,
        now_s=now_s,
        replan=service.replan or redesigner(service.design),
    )
    if verdict.condition is not None:
        value, reason, message = verdict.condition
        conditions += (ConditionUpdate(labels.CONDITION_WORKLOAD_DRIFT, value, reason, message),)
    if verdict.warning is not None:
        events.append(Event("Warning", EVENT_WORKLOAD_DRIFT, verdict.warning[:REASON_MAX_CHARS]))
    events.extend(_scaling_inactive_events(service.status, conditions))
    status = _decision_status(recommendation, new_state, observation, tiers, now_s, applied=active)
    if verdict.observed is not None:
        status["observedWorkload"] = dict(verdict.observed)
    reports = tuple(
        TierReport(
            tier=tier_rec.name,
            desired=tier_rec.replicas,
            ready=service.workloads[tier_rec.name].ready,
            actual_rps=_rate_of(observation.tiers.get(tier_rec.name)),
        )
        for tier_rec in recommendation.tiers
    )
    return StepResult(
        due=True,
        policy=policy,
        recommendation=recommendation,
        state=new_state,
        scales=tuple(scales),
        events=tuple(events),
        status=status,
        conditions=conditions,
        tiers=reports,
        applied=active,
    )


def _past_first_scrape(missing_tiers: Sequence[str], new_state: ScalingState, now_s: float) -> list[str]:
    """The tiers silent for at least FIRST_SCRAPE_GRACE_S. `new_state` (decide() carried
    the field over) remembers since when each silent tier has been silent; status keeps
    it across a restart."""
    for name, tier in new_state.tiers.items():
        if name not in missing_tiers:
            tier.metrics_missing_since_s = None
    reported = []
    for name in missing_tiers:
        tier = new_state.tier(name)
        if tier.metrics_missing_since_s is None:
            tier.metrics_missing_since_s = now_s
        if now_s - tier.metrics_missing_since_s >= FIRST_SCRAPE_GRACE_S:
            reported.append(name)
    return reported


def _tier_contexts(service: ServiceInput, observation: Observation) -> tuple[list[TierContext], list[str]]:
    """What decide() reads for each planned tier with a workload, and the tiers whose
    Ready replicas report no load data."""
    plans = {plan.name: plan for plan in service.plan}
    # The declared workload, or the observed one the plan was re-made for (replan: auto):
    # the prior the request mix the engines report is compared with.
    planned_in, planned_out, _ = replan.planned_percentiles(service.spec, service.status, service.generation)
    prompt_tokens, output_tokens = _mean(planned_in), _mean(planned_out)
    tiers: list[TierContext] = []
    missing_tiers: list[str] = []
    for tier in service.spec.tiers:
        plan = plans.get(tier.name)
        workload = service.workloads.get(tier.name)
        # Not planned yet, or the workload is gone: the reconciler's business, not ours.
        if plan is None or workload is None:
            continue
        observed = observation.tiers.get(tier.name)
        no_data = observed is None or not observed.has_load_data
        # Zero ready replicas report nothing, so their silence is no fault of Prometheus.
        if observation.unavailable is None and no_data and workload.ready > 0:
            missing_tiers.append(tier.name)
        signals = _scaling_signals(workload, observed)
        tiers.append(
            TierContext(figures=figures_from_plan(plan, prompt_tokens, output_tokens), signals=signals)
        )
    return tiers, missing_tiers


def _scale_actions(
    service: ServiceInput, recommendation: Recommendation, *, active: bool
) -> tuple[list[Scale], list[Event], dict[str, int]]:
    """The scales to apply (active mode) or advise (advisory), their events, and each
    tier's desired replicas once they are applied."""
    scales: list[Scale] = []
    events: list[Event] = []
    desired_after: dict[str, int] = {}
    for tier_rec in recommendation.tiers:
        workload = service.workloads[tier_rec.name]
        current = workload.replicas if workload.replicas is not None else tier_rec.current
        desired_after[tier_rec.name] = current if current is not None else tier_rec.replicas
        if current is None or tier_rec.replicas == current:
            continue
        verb = "up" if tier_rec.replicas > current else "down"
        why = f"{tier_rec.signal}: {tier_rec.reason}"
        detail = f"tier {tier_rec.name}: {current} -> {tier_rec.replicas} ({why})"
        if active:
            scales.append(Scale(tier_rec.name, workload.ref, current, tier_rec.replicas))
            desired_after[tier_rec.name] = tier_rec.replicas
            reason = EVENT_SCALED_UP if verb == "up" else EVENT_SCALED_DOWN
            events.append(Event("Normal", reason, f"scaled {verb} {detail}"[:REASON_MAX_CHARS]))
        else:
            message = f"advisory: would scale {verb} {detail}"
            events.append(Event("Normal", EVENT_SCALING_ADVISED, message[:REASON_MAX_CHARS]))
    return scales, events, desired_after


def _scaling_inactive_events(status: Mapping[str, Any], conditions: Sequence[ConditionUpdate]) -> list[Event]:
    """A Warning when ScalingActive turns False (not on every tick it stays False)."""
    previous = _find_condition(status, labels.CONDITION_SCALING_ACTIVE)
    return [
        Event("Warning", update.reason, update.message)
        for update in conditions
        if update.type == labels.CONDITION_SCALING_ACTIVE
        and update.status == "False"
        and (previous is None or previous.get("status") != "False")
    ]


def _decision_status(
    recommendation: Recommendation,
    state: ScalingState,
    observation: Observation,
    tiers: Sequence[TierContext],
    now_s: float,
    *,
    applied: bool,
) -> dict[str, Any]:
    """The status fields this decision writes: the state, the last decision, the TTFT."""
    observed_tiers = [observation.tiers.get(t.name) for t in tiers]
    ttft_values = [o.ttft_p99_ms for o in observed_tiers if o is not None and o.ttft_p99_ms is not None]
    ttft_p99_ms = max(ttft_values) if ttft_values else None
    decision = ScalingDecision(
        time=kube_time(now_s),
        replicas=recommendation.replicas,
        signal=recommendation.signal,
        reason=recommendation.reason[:REASON_MAX_CHARS],
        forecast_rps=_finite(recommendation.forecast_rps),
        queue_depth=_sum([o.waiting if o is not None else None for o in observed_tiers]),
        ttft_p99_ms=None if ttft_p99_ms is None else round(ttft_p99_ms, 1),
        applied=applied,
    )
    return {
        "autoscalerState": state.to_dict(),
        "lastScalingDecision": decision.to_wire(),
        "ttftP99Ms": decision.ttft_p99_ms,
    }


def redesigner(designed: Design) -> Replanner:
    """The plans of this design's service with another spec (no model read beyond the
    catalog's and the spec's): the drift condition's implied plan when the caller gave
    none."""

    def replan(spec: InferenceServiceSpec) -> Sequence[TierPlan]:
        service = designed.service.model_copy(update={"spec": spec})
        again = design(service, designed.settings)
        return again.plan.tiers if again.plan is not None else ()

    return replan


def front_door_signals(service: ServiceInput, observation: Observation) -> FrontDoorSignals | None:
    """The front door's pools (the design's, as the renderer makes them) with the requests
    their pickers hold, and the tiers whose weights a pre-cache pod already holds
    (status.cache). None when the service has no front door that holds requests."""
    front = service.design.front_door
    if not service.plan or front is None or not front.holds_requests or not front.pools:
        return None
    held = observation.door_waiting
    pools = tuple(
        # Prometheus answered and the pool has no series: its picker never held anything;
        # a series whose reading is no count stays unknown (None), as when not read.
        DoorPool(pool.tiers + pool.overflow, None if held is None else held.get(pool.name, 0.0))
        for pool in front.pools
    )
    cached = frozenset(
        str(entry.get("tier"))
        for entry in service.status.get("cache") or []
        if isinstance(entry, Mapping) and int(entry.get("nodesReady") or 0) > 0
    )
    return FrontDoorSignals(pools, cached)


def _mean(percentiles: TokenPercentiles) -> float:
    return mean_tokens(percentiles.p50, percentiles.p95)


def _rate_of(observed: TierReadings | None) -> float | None:
    return None if observed is None else observed.request_rate_rps


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 4)


def deletion_costs(pods: Sequence[Mapping[str, Any]], in_flight: Mapping[str, float]) -> dict[str, str]:
    """`controller.kubernetes.io/pod-deletion-cost` per pod: its in-flight requests.

    The ReplicaSet controller removes pods with the lowest cost first, so on scale-down
    the idle replicas go and the busy ones keep serving. Pods without a reading get 0
    (unknown is treated as idle; not-Ready pods are removed before any cost is looked
    at anyway). Only pods whose annotation would change are returned.
    """
    out: dict[str, str] = {}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        name = str(metadata.get("name", ""))
        if not name or metadata.get("deletionTimestamp"):
            continue
        # A reading that is no count (autoscaling.policy.plausible: NaN, infinite, negative, beyond any
        # fleet) is unknown: idle, as above.
        usable = plausible.COUNT(in_flight.get(name, 0.0)) or 0.0
        cost = str(min(2**31 - 1, round(usable)))
        current = (metadata.get("annotations") or {}).get(labels.ANNOTATION_POD_DELETION_COST)
        if current != cost:
            out[name] = cost
    return out
