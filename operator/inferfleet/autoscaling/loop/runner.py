"""The autoscaler's I/O shell: read, call the pure step, write.

Per tick (`run_once`, called by `autoscaling.loop.loop` on the leader replica) it lists the
InferenceServices in the watched namespaces, reads the signals of *all* of them with
one fixed set of Prometheus queries, and lists the managed workloads with one call per
kind (per watched namespace); then it decides each object whose own sync period has
passed.

Writes, in order: status (policy state, last decision, conditions) with an optimistic
resourceVersion, then the scale subresource, then events. Status goes first so a
crash between the two leaves a recorded state the next tick reconciles, never a
scale nobody remembers. A decision that changes nothing a reader acts on is not
written (`step.should_write`): its policy state is kept in memory and the next
decision starts from it, as long as the stored status is still the one it was derived
from. A heartbeat write every few minutes bounds how old the stored state can be.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import (
    InferenceService,
    InferenceServiceSpec,
    SpecInvalid,
    TierPlan,
    labels,
    parse,
    safe_text,
)
from inferfleet.api.plan import DisaggregationPlan
from inferfleet.api.status import worst_condition
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.promql.parse import ServiceKey, TierKey
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.autoscaling.promql.signals import SignalSnapshot
from inferfleet.autoscaling.step.drift_report import Replanner
from inferfleet.autoscaling.step.step import (
    STATUS_HEARTBEAT_S,
    ConditionUpdate,
    Observation,
    ServiceInput,
    StepResult,
    WorkloadReplicas,
    deletion_costs,
    deployed_design,
    failure_condition,
    should_write,
    step,
)
from inferfleet.cluster import ApiError, Cluster, Conflict, KindNotServed, NotFound
from inferfleet.cluster.events import post_events
from inferfleet.config import OperatorSettings
from inferfleet.controller.watched import Watched
from inferfleet.design import Design, ModelReading, Observations, design
from inferfleet.kubedata import (
    DEPLOYMENT,
    LEADER_WORKER_SET,
    ObjectRef,
    kube_time,
    owner_uids,
    ready_replicas_of,
    ref_of,
    replicas_of,
)
from inferfleet.metrics.operator_metrics import OperatorMetrics
from inferfleet.reconcile import kindswitch, modelprobe
from inferfleet.reconcile.status_rules import set_condition

log = logging.getLogger(__name__)

# The forecaster reads one point per minute (ScalingContext.rate_history_rps).
HISTORY_STEP_S = 60
MANAGED = {labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE}


@dataclass
class ServiceReport:
    namespace: str
    name: str
    due: bool = False
    skipped: str | None = None
    scaled: int = 0
    # Whether the decision was written to status (see step.should_write).
    wrote_status: bool = False
    error: str | None = None
    result: StepResult | None = None


@dataclass
class LoopReport:
    """What one `run_once` did, for tests, logs and the benchmark."""

    services: list[ServiceReport] = field(default_factory=list)
    queries: int = 0
    # Of `queries`, the history's range queries: one per completed minute in steady state.
    range_queries: int = 0
    api_calls: int = 0
    duration_s: float = 0.0
    metrics_unavailable: bool = False

    @property
    def decided(self) -> int:
        return sum(1 for report in self.services if report.due)

    @property
    def scaled(self) -> int:
        return sum(report.scaled for report in self.services)

    @property
    def status_writes(self) -> int:
        return sum(1 for report in self.services if report.wrote_status)

    @property
    def errors(self) -> list[str]:
        return [f"{r.namespace}/{r.name}: {r.error}" for r in self.services if r.error]


@dataclass
class _Tick:
    time_s: float
    snapshot: SignalSnapshot
    workloads: dict[tuple[str, str], dict[str, list[dict[str, Any]]]]
    pod_load_warned: bool = False


@dataclass(frozen=True)
class _Unwritten:
    """A policy state decided but not yet written, and the stored state it follows."""

    uid: str | None
    based_on: Any
    state: Mapping[str, Any]


class Autoscaler:
    """Reads signals, decides per InferenceService, scales workloads."""

    def __init__(
        self,
        cluster: Cluster,
        reader: SignalReader,
        settings: OperatorSettings,
        *,
        metrics: OperatorMetrics | None = None,
        clock: Callable[[], float] = time.time,
        tick_s: float = 5.0,
        namespaces: tuple[str, ...] = (),
        heartbeat_s: float = STATUS_HEARTBEAT_S,
    ) -> None:
        if reader.config.history_step_s != HISTORY_STEP_S:
            raise ValueError(f"the policy reads per-minute history: history_step_s must be {HISTORY_STEP_S}")
        self.cluster = cluster
        self.reader = reader
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.tick_s = tick_s
        self.watched = Watched(namespaces)
        self.heartbeat_s = heartbeat_s
        self._tick: _Tick | None = None
        # Each service's design on its deployed plan, made once per spec and plan.
        self._designs: dict[tuple[str, str], tuple[Any, Design]] = {}
        self._lock = threading.Lock()
        self._unwritten: dict[tuple[str, str], _Unwritten] = {}
        self.api_calls = 0

    @classmethod
    def from_settings(
        cls,
        cluster: Cluster,
        settings: OperatorSettings,
        *,
        metrics: OperatorMetrics | None = None,
        query_config: QueryConfig | None = None,
        namespaces: tuple[str, ...] | None = None,
    ) -> Autoscaler:
        client = PrometheusClient(PrometheusConfig.from_settings(settings), metrics)
        reader = SignalReader(
            client,
            query_config or QueryConfig(),
            history_retention_s=settings.forecast_window_hours * 3600.0,
            pod_load=settings.pod_deletion_cost,
        )
        return cls(
            cluster,
            reader,
            settings,
            metrics=metrics,
            tick_s=min(5.0, settings.sync_period_s / 2),
            namespaces=settings.namespaces if namespaces is None else namespaces,
        )

    def close(self) -> None:
        self.reader.close()

    def forget_unwritten(self) -> None:
        """Drop states kept in memory; called while another replica leads, which writes its own."""
        self._unwritten.clear()

    # --- the tick's shared reads ------------------------------------------------------

    def _list_workloads(self) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
        """Managed workloads by (namespace, service) then tier: one list call per kind.
        A tier changing kind has two for a while (reconcile.kindswitch)."""
        found: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
        for api_version, kind in (DEPLOYMENT, LEADER_WORKER_SET):
            try:
                self.api_calls += 1
                objects = self.watched.list(self.cluster, api_version, kind, MANAGED)
            except KindNotServed:
                continue  # no LeaderWorkerSet CRD: no multi-node tiers to scale
            for obj in objects:
                meta = obj.get("metadata") or {}
                obj_labels = meta.get("labels") or {}
                service, tier = obj_labels.get(labels.LABEL_SERVICE), obj_labels.get(labels.LABEL_TIER)
                if service and tier and meta.get("namespace"):
                    found.setdefault((str(meta["namespace"]), str(service)), {}).setdefault(
                        str(tier), []
                    ).append(obj)
        return found

    def _read_tick(self, now_s: float) -> _Tick:
        started = time.perf_counter()
        snapshot = self.reader.read(now_s)
        tick = _Tick(now_s, snapshot, self._list_workloads())
        if self.metrics is not None:
            self.metrics.loop_queries.set(snapshot.queries)
            self.metrics.metrics_available.set(0 if snapshot.unavailable else 1)
            self.metrics.loop_duration_s.observe(time.perf_counter() - started)
        return tick

    def _pod_load(self, tick: _Tick) -> Mapping[TierKey, Mapping[str, float]]:
        """The per-pod running requests read with the tick (pod-deletion-cost); unknown is
        idle (deletion_costs), and a failed read is said once per tick."""
        snapshot = tick.snapshot
        if snapshot.pod_in_flight is None and snapshot.pod_in_flight_failed and not tick.pod_load_warned:
            log.warning("cannot read per-pod load for pod-deletion-cost: %s", snapshot.pod_in_flight_failed)
            tick.pod_load_warned = True
        return snapshot.pod_in_flight or {}

    # --- entry points -------------------------------------------------------------------

    def run_once(self, now_s: float | None = None, *, force: bool = False) -> LoopReport:
        """One loop over every InferenceService (fresh reads)."""
        started = time.perf_counter()
        now = self.clock() if now_s is None else now_s
        client = self.reader.client
        calls_before, queries_before, ranges_before = (
            self.api_calls,
            client.queries_made,
            client.range_queries_made,
        )
        # The objects first: if the API server is away there is nothing to read signals for.
        self.api_calls += 1
        bodies = self.watched.list(self.cluster, labels.API_VERSION, labels.KIND, {})
        tick = self._read_tick(now)
        report = LoopReport(metrics_unavailable=tick.snapshot.unavailable)
        for body in bodies:
            report.services.append(self._run(body, tick, now, force=force))
        self._forget_deleted(
            {(str(b["metadata"].get("namespace")), str(b["metadata"]["name"])) for b in bodies}
        )
        report.queries = client.queries_made - queries_before
        report.range_queries = client.range_queries_made - ranges_before
        report.api_calls = self.api_calls - calls_before
        report.duration_s = time.perf_counter() - started
        return report

    # --- one service --------------------------------------------------------------------

    def _input(self, body: Mapping[str, Any], tick: _Tick) -> ServiceInput | str:
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        if meta.get("deletionTimestamp"):
            return "being deleted"
        try:
            resource = parse({**body, "status": None}, source=f"{namespace}/{name}")
        except SpecInvalid as error:
            return f"invalid spec: {error}"
        status: Mapping[str, Any] = body.get("status") or {}
        unwritten = self._unwritten.get((namespace, name))
        if unwritten is not None:
            if unwritten.uid == meta.get("uid") and unwritten.based_on == status.get("autoscalerState"):
                # Decide from the newer state kept in memory; all else comes from status.
                status = {**status, "autoscalerState": unwritten.state}
            else:
                # Someone wrote a state since (another replica, a re-created object).
                del self._unwritten[(namespace, name)]
        try:
            plan = [TierPlan.model_validate(entry) for entry in status.get("plan") or []]
        except ValueError as error:
            return f"unreadable status.plan: {error}"
        try:
            split_entry = status.get("disaggregation")
            split = DisaggregationPlan.model_validate(split_entry) if split_entry else None
        except ValueError as error:
            return f"unreadable status.disaggregation: {error}"
        if not plan:
            return "not planned yet"
        uid = meta.get("uid")
        multi_node = {tier.name: tier.nodes_per_replica > 1 for tier in plan}
        workloads: dict[str, WorkloadReplicas] = {}
        for tier, objects in tick.workloads.get((namespace, name), {}).items():
            # A same-named workload someone else owns is not ours to scale.
            ours = [o for o in objects if uid is None or not owner_uids(o) or str(uid) in owner_uids(o)]
            if not ours:
                continue
            # While a tier changes kind, the new workload is scaled; the old one serves as it is.
            obj = kindswitch.preferred(ours, multi_node.get(tier))
            workloads[tier] = WorkloadReplicas(ref_of(obj), replicas_of(obj), ready_replicas_of(obj))
        return ServiceInput(
            design=self._design(resource, status, plan, split, meta),
            status=status,
            workloads=workloads,
            generation=meta.get("generation"),
            replan=self._replanner(resource, status),
        )

    def _design(
        self,
        resource: InferenceService,
        status: Mapping[str, Any],
        plan: list[TierPlan],
        split: DisaggregationPlan | None,
        meta: Mapping[str, Any],
    ) -> Design:
        """The service's design on its deployed plan, kept while the spec (its generation)
        and the plan status holds stay the same: not re-resolved every tick."""
        key = (resource.namespace, resource.name)
        version = (meta.get("uid"), meta.get("generation"), status.get("planHash"), len(plan))
        kept = self._designs.get(key)
        if kept is not None and kept[0] == version and status.get("planHash") is not None:
            return kept[1]
        designed = deployed_design(resource, self.settings, plan, meta.get("generation"), split)
        self._designs[key] = (version, designed)
        return designed

    def _replanner(self, resource: InferenceService, status: Mapping[str, Any]) -> Replanner:
        """This service designed with another spec, as the reconciler would: a model the
        catalog lacks with the config its probe read."""
        reading = ModelReading(modelprobe.fetched_of(resource, status.get("modelSource")))
        settings = self.settings

        def replan(spec: InferenceServiceSpec) -> list[TierPlan]:
            designed = design(
                resource.model_copy(update={"spec": spec}), settings, Observations(model=reading)
            )
            return list(designed.plan.tiers) if designed.plan is not None else []

        return replan

    @staticmethod
    def _observation(snapshot: SignalSnapshot, service: ServiceInput) -> Observation:
        unavailable = None
        if snapshot.unavailable:
            unavailable = next(iter(snapshot.failed.values()), "Prometheus unavailable")
        tiers = {}
        for tier in service.spec.tiers:
            # TierReadings hold only measurements (checked when they were made): the load
            # signals and the request mix (token rates and percentiles, 4xx answers) both
            # reach the step, so WorkloadDrift and `replan: auto` work live as in a replay.
            observed = snapshot.tier(service.namespace, service.name, tier.name)
            if observed is not None:
                tiers[tier.name] = observed
        door = None
        if snapshot.door_failed is None:
            door = {
                key.tier: value
                for key, value in snapshot.door_waiting.items()
                if (key.namespace, key.service) == (service.namespace, service.name)
            }
        # A service the history has no series for is new (no request recorded yet) when
        # the history was read; when its query failed, its history is unknown (None).
        history = snapshot.rate_history.get(ServiceKey(service.namespace, service.name))
        if history is None and snapshot.history_failed is None and not snapshot.unavailable:
            history = ()
        return Observation(
            tiers=tiers,
            rate_history_rps=history,
            unavailable=unavailable,
            door_waiting=door,
        )

    def _run(
        self, body: Mapping[str, Any], tick: _Tick, now_s: float, *, force: bool = False
    ) -> ServiceReport:
        meta = body.get("metadata") or {}
        report = ServiceReport(str(meta.get("namespace") or "default"), str(meta.get("name")))
        try:
            service = self._input(body, tick)
            if isinstance(service, str):
                report.skipped = service
                return report
            result = step(service, self._observation(tick.snapshot, service), now_s, force=force)
            report.result = result
            report.due = result.due
            if not result.due:
                return report
            key = (report.namespace, report.name)
            written: Mapping[str, Any] = body.get("status") or {}
            if should_write(written, result, now_s, self.heartbeat_s):
                self._unwritten.pop(key, None)
                self._write_status(body, result, now_s)
                report.wrote_status = True
            else:
                self._unwritten[key] = _Unwritten(
                    meta.get("uid"), written.get("autoscalerState"), result.status["autoscalerState"]
                )
            report.scaled = self._scale(service, result, tick)
            self.api_calls += len(result.events)
            post_events(self.cluster, body, result.events)
            self._record(service, result)
        except ApiError as error:
            # The world's error: counted, logged with the object, retried next tick.
            report.error = str(error)
            log.warning("autoscaler: %s/%s: %s", report.namespace, report.name, error)
        except Exception as error:
            # Anything else is about this one service (its spec, its signals) or a bug:
            # it holds its replicas and says so; the services after it are decided as usual.
            report.error = f"{type(error).__name__}: {error}"
            log.exception("autoscaler: %s/%s: cannot decide", report.namespace, report.name)
            self._report_failure(body, report.error, now_s)
        return report

    def _report_failure(self, body: Mapping[str, Any], why: str, now_s: float) -> None:
        """ScalingActive=False (AutoscalingFailed) on a service that could not be decided."""
        status: Mapping[str, Any] = body.get("status") or {}
        update = failure_condition(why)
        if any(
            isinstance(c, Mapping)
            and (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            == (update.type, update.status, update.reason, update.message)
            for c in status.get("conditions") or []
        ):
            return  # nothing new to say: no status write every tick
        ref = ref_of({"apiVersion": labels.API_VERSION, "kind": labels.KIND, "metadata": body["metadata"]})
        conditions = _merge_conditions(
            (body.get("status") or {}).get("conditions") or [],
            (update,),
            now_s,
            body["metadata"].get("generation"),
        )
        try:
            self.api_calls += 1
            self.cluster.patch_status(
                ref,
                safe_text.bounded_status({"conditions": conditions, "summary": worst_condition(conditions)}),
                resource_version=body["metadata"].get("resourceVersion"),
            )
        except ApiError as error:  # a conflict or an outage: the next tick says it again
            log.warning("autoscaler: %s: cannot record the failure: %s", ref, error)

    def _write_status(self, body: Mapping[str, Any], result: StepResult, now_s: float) -> None:
        ref = ref_of({"apiVersion": labels.API_VERSION, "kind": labels.KIND, "metadata": body["metadata"]})
        current: Mapping[str, Any] = body
        for attempt in range(2):
            status = current.get("status") or {}
            patch = dict(result.status)
            patch["conditions"] = _merge_conditions(
                status.get("conditions") or [],
                result.conditions,
                now_s,
                current["metadata"].get("generation"),
            )
            # kubectl get's STATUS: the worst of every condition, the reconciler's as read.
            patch["summary"] = worst_condition(patch["conditions"])
            try:
                self.api_calls += 1
                self.cluster.patch_status(
                    ref,
                    safe_text.bounded_status(patch),
                    resource_version=current["metadata"].get("resourceVersion"),
                )
                return
            except Conflict:
                # Someone (the reconciler) wrote status since we read it: re-read once so
                # their conditions are kept, then give up until the next tick.
                if attempt:
                    raise
                self.api_calls += 1
                fresh = self.cluster.get(ref)
                if fresh is None:
                    raise NotFound(f"{ref} is gone", 404) from None
                current = fresh

    def _scale(self, service: ServiceInput, result: StepResult, tick: _Tick) -> int:
        scaled = 0
        for action in result.scales:
            if (
                action.down
                and self.settings.pod_deletion_cost
                and (action.ref.api_version, action.ref.kind) == DEPLOYMENT
            ):
                self._mark_idle_pods(service, action.tier, tick)
            try:
                self.api_calls += 1
                self.cluster.scale(action.ref, action.to_replicas)
                scaled += 1
            except NotFound:
                log.info("autoscaler: %s vanished; the reconciler recreates it", action.ref)
        return scaled

    def _mark_idle_pods(self, service: ServiceInput, tier: str, tick: _Tick) -> None:
        load = self._pod_load(tick).get(TierKey(service.namespace, service.name, tier), {})
        self.api_calls += 1
        pods = self.cluster.list(
            "v1", "Pod", service.namespace, {labels.LABEL_SERVICE: service.name, labels.LABEL_TIER: tier}
        )
        for name, cost in deletion_costs(pods, load).items():
            self.api_calls += 1
            try:
                self.cluster.annotate(
                    ObjectRef("v1", "Pod", service.namespace, name),
                    {labels.ANNOTATION_POD_DELETION_COST: cost},
                )
            except NotFound:
                continue

    def _record(self, service: ServiceInput, result: StepResult) -> None:
        if self.metrics is None or result.recommendation is None:
            return
        mode = "active" if result.applied else "advisory"
        forecast = result.recommendation.forecast_rps
        shares = {tier.name: tier.traffic_share for tier in result.recommendation.tiers}
        for tier_rec, tier_report in zip(result.recommendation.tiers, result.tiers, strict=True):
            current = tier_rec.current if tier_rec.current is not None else tier_rec.replicas
            direction = (
                "up" if tier_rec.replicas > current else "down" if tier_rec.replicas < current else "hold"
            )
            self.metrics.decisions_total.labels(signal=tier_rec.signal, direction=direction, mode=mode).inc()
            share = shares.get(tier_rec.name)
            self.metrics.record_tier(
                service.namespace,
                service.name,
                tier_rec.name,
                desired=tier_report.desired,
                ready=tier_report.ready,
                forecast_rps=None if forecast is None or share is None else forecast * share,
                actual_rps=tier_report.actual_rps,
            )

    def _forget_deleted(self, alive: set[tuple[str, str]]) -> None:
        for key in set(self._unwritten) - alive:
            del self._unwritten[key]
        for key in set(self._designs) - alive:
            del self._designs[key]
        if self.metrics is None:
            return
        for namespace, service in self.metrics.known_services() - alive:
            self.metrics.forget_service(namespace, service)


def _merge_conditions(
    conditions: list[Mapping[str, Any]],
    updates: tuple[ConditionUpdate, ...],
    now_s: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = [dict(condition) for condition in conditions]
    for update in updates:
        merged = set_condition(
            merged,
            update.type,
            update.status,
            update.reason,
            update.message,
            now=kube_time(now_s),
            generation=generation,
        )
    return merged
