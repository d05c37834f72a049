"""One reconcile pass for one InferenceService: read, plan, render, diff, execute, report.

Every trigger (create, update, resume, the drift timer, a child's change) calls
`reconcile`; it is level-triggered and idempotent, so running it twice, or after a
crash halfway, converges to the same objects. User errors (invalid or infeasible spec,
an object the API server refuses) end in status conditions and events and return
normally; only the world's errors (conflicts, throttling, an unreachable API server)
raise `TransientApiError` for the caller to retry with backoff.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from inferfleet import planner
from inferfleet.api import InferenceService, Plan, SpecInvalid, labels, parse
from inferfleet.cluster import Cluster, KindNotServed, access
from inferfleet.config import OperatorSettings
from inferfleet.controller import executor
from inferfleet.kubedata import Event, ObjectRef, owner_uids, ref_of
from inferfleet.metrics.parse import KvCapacityReading
from inferfleet.precache import coldstart
from inferfleet.precache import readiness as cache_readiness
from inferfleet.precache import workloads as cache_objects
from inferfleet.reconcile import diff, replan, rollout
from inferfleet.reconcile import events as event_rules
from inferfleet.reconcile import frontdoor as frontdoor_status
from inferfleet.reconcile import status as status_rules
from inferfleet.reconcile.actions import Action, Delete
from inferfleet.render import content_hash, frontdoor, render
from inferfleet.render import names as render_names
from inferfleet.render import pod as render_pod
from inferfleet.render.checks import render_problems
from inferfleet.scaling import replan_mode

logger = logging.getLogger(__name__)

Planner = Callable[[InferenceService], Plan]
Clock = Callable[[], dt.datetime]


class KvCapacitySource(Protocol):
    """Where the engines' allocated KV cache is read (metrics.prometheus.KvCapacityReader)."""

    def tiers_of(self, namespace: str, service: str) -> Mapping[str, KvCapacityReading]: ...

# Kinds the reconciler owns and prunes; listed by the InferenceService's label.
OWNED_KINDS: tuple[access.Resource, ...] = (
    access.SERVICE,
    access.POD_DISRUPTION_BUDGET,
    access.POD_MONITOR,
    access.DEPLOYMENT,
    access.LEADER_WORKER_SET,
    access.DAEMON_SET,
    access.JOB,
    access.INFERENCE_POOL,
    access.HTTP_ROUTE,
    access.SERVICE_ACCOUNT,
    access.ROLE,
    access.ROLE_BINDING,
)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Outcome:
    """What one pass did, for logs and tests."""

    actions: tuple[Action, ...]
    status: dict[str, Any]
    report: executor.Report | None


def _internal(stage: str, service: InferenceService, error: Exception) -> str:
    """Words for an exception the pure core raised on this spec: a value validation let
    through, or a bug. Logged with its traceback for us, a condition for the user."""
    logger.error("cannot %s %s/%s", stage, service.namespace, service.name, exc_info=error)
    return (
        f"the operator could not {stage} this spec ({type(error).__name__}: {error}); running workloads "
        "are kept as they are. Check the values the message names; if they look sane, report it as a bug"
    )[:1024]


def cr_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef(labels.API_VERSION, labels.KIND, namespace, name)


class Reconciler:
    """Holds the port, the settings, the planner and the clock; `reconcile` runs a pass."""

    def __init__(
        self,
        cluster: Cluster,
        settings: OperatorSettings,
        planner: Planner,
        clock: Clock = utc_now,
        kv_capacity: KvCapacitySource | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.planner = planner
        self.clock = clock
        self.kv_capacity = kv_capacity

    def observe(self, namespace: str, name: str, uid: str) -> list[dict[str, Any]]:
        """Every object this InferenceService owns, by label and owner reference."""
        found: list[dict[str, Any]] = []
        for resource in OWNED_KINDS:
            try:
                items = self.cluster.list(
                    resource.api_version, resource.kind, namespace, {labels.LABEL_SERVICE: name}
                )
            except KindNotServed:
                continue  # no CRD, so nothing of that kind can exist
            # The label alone could match an object someone copied; ownership decides.
            found.extend(item for item in items if uid in owner_uids(item))
        return found

    def _plan(self, service: InferenceService) -> tuple[Plan | None, str | None]:
        try:
            return self.planner(service), None
        except SpecInvalid as error:
            return None, str(error)
        except ValueError as error:  # the planner refuses input it cannot size
            return None, f"the planner rejected the spec: {error}"
        except Exception as error:
            return None, _internal("plan", service, error)

    def _desired(
        self,
        service: InferenceService,
        plan: Plan,
        observed: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        measured_s: dict[str, float],
    ) -> tuple[list[Action], tuple[rollout.RolloutHold, ...]]:
        """Render, hold rollouts, diff: pure, so any exception here is about this spec."""
        desired = render(service, plan, self.settings, measured_s)
        held = rollout.holds(service, plan, observed, pods)
        desired = self._hold_rollouts(desired, service, plan, held, measured_s)
        infeasible = frozenset(tier.name for tier in plan.tiers if not tier.feasible)
        return diff(desired, observed, keep_tiers=infeasible), held

    def reconcile(self, namespace: str, name: str) -> Outcome | None:
        """One pass; None when the InferenceService is gone or being deleted."""
        ref = cr_ref(namespace, name)
        body = self.cluster.get(ref)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None  # owner references take the children away
        metadata = body["metadata"]
        uid = str(metadata["uid"])
        previous: dict[str, Any] = dict(body.get("status") or {})

        service: InferenceService | None = None
        plan: Plan | None = None
        planned_for: dict[str, Any] | None = None
        try:
            # Status is ours and other writers'; only spec and metadata are input.
            service = parse({**body, "status": None}, source=f"{namespace}/{name}")
            # replan: auto plans for the workload the engines report once it has drifted.
            spec, planned_for = replan.planned_workload(
                service.spec,
                previous,
                generation=metadata.get("generation"),
                replan=replan_mode(self.settings, service.spec),
                now=rfc3339(self.clock()),
            )
            if planned_for is not None:
                service = service.model_copy(update={"spec": spec})
            plan, invalid = self._plan(service)
            feasible = {tier.name for tier in plan.feasible_tiers} if plan is not None else set()
            refused = render_problems(service, self.settings, feasible) if plan is not None else []
            if refused:
                # Never rendered: a cache path outside the allowed root, a GPU with no
                # placement, one image for several vendors (render.checks). Existing
                # workloads stay as they are, as for any invalid spec.
                plan = None
                raise SpecInvalid(refused, f"{namespace}/{name}")
        except SpecInvalid as error:
            invalid = str(error)

        observed = self.observe(namespace, name, uid)
        pods = self._cache_pods(service) if service is not None else []
        serving_pods = self._serving_pods(service) if service is not None else []
        measured = self._measured_cold_starts(serving_pods)
        measured_s = {tier: found.seconds for tier, found in measured.items()}
        actions: list[Action] = []
        report = None
        held: tuple[rollout.RolloutHold, ...] = ()
        if service is not None and plan is not None:
            try:
                actions, held = self._desired(service, plan, observed, pods, measured_s)
            except Exception as error:
                # Nothing is applied or pruned: the running fleet stays as it was, and the
                # condition says why instead of the pass failing (and retrying) forever.
                invalid, plan = _internal("render", service, error), None
            else:
                report = executor.execute(self.cluster, actions)

        workloads = self._workloads(observed, report)
        rendered_plan = plan  # the front door's holds come from the plan as rendered
        if service is not None and plan is not None:
            # Status (and so the autoscaler's lead time and capacity) gets the measured cold
            # starts and KV capacity; the render above used the estimate, so a new
            # measurement never changes the pods' flags or startup probe and never rolls them.
            plan = planner.observe_kv_capacity(plan, service.spec, self._measured_kv(service))
            plan = planner.observe_cold_starts(plan, measured)
        plan_hash = content_hash(plan.to_wire()) if plan is not None else None
        result = status_rules.PassResult(
            generation=metadata.get("generation"),
            plan=plan,
            plan_hash=plan_hash,
            invalid=invalid,
            workloads=workloads,
            failures=tuple(report.failures) if report else (),
            skipped=tuple(report.skipped) if report else (),
        )
        status = status_rules.compute(previous, result, now=rfc3339(self.clock()))
        if service is not None and rendered_plan is not None:
            front = frontdoor.resolve(service, rendered_plan, self.settings, measured_s)
            current = self._current(observed, report)
            status["frontDoor"] = frontdoor_status.summarize(service, front, current, serving_pods)
        if planned_for is not None:
            status["plannedWorkload"] = planned_for
        else:
            status.pop("plannedWorkload", None)
        if service is not None:
            self._cache_ready(
                status, service, plan, observed, pods=pods, held=held, generation=metadata.get("generation")
            )
        patch = status_rules.changes(previous, status)
        if patch:
            self.cluster.patch_status(ref, patch, resource_version=metadata.get("resourceVersion"))
        found = self._events(
            previous, status=status, plan=plan, plan_hash=plan_hash, actions=actions, observed=observed
        )
        replanned = replan.announce(previous, planned_for)
        if replanned is not None:
            found.append(Event("Normal", labels.REASON_REPLANNED, replanned))
        for event in found:
            self.cluster.create_event(body, type_=event.type, reason=event.reason, message=event.message)
        return Outcome(tuple(actions), status, report)

    def _serving_pods(self, service: InferenceService) -> list[dict[str, Any]]:
        """The vLLM pods that serve HTTP (their start-to-Ready is the cold start; the Ready
        ones are the front door's endpoints)."""
        return self.cluster.list(
            access.POD.api_version,
            access.POD.kind,
            service.namespace,
            {labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: render_names.COMPONENT_SERVER},
        )

    @staticmethod
    def _measured_cold_starts(pods: list[dict[str, Any]]) -> dict[str, planner.MeasuredColdStart]:
        """Per tier, the start-to-Ready of its serving pods (planner.observed says why)."""
        return coldstart.measured_cold_starts(
            pods, container=render_pod.CONTAINER_NAME, tier_label=labels.LABEL_TIER
        )

    @staticmethod
    def _current(observed: list[dict[str, Any]], report: executor.Report | None) -> list[dict[str, Any]]:
        """What the service owns after this pass: observed, updated by what was applied."""
        by_ref = {ref_of(obj): obj for obj in observed}
        if report is not None:
            by_ref.update(report.applied)
            for gone in report.deleted:
                by_ref.pop(gone, None)
        return list(by_ref.values())

    def _measured_kv(self, service: InferenceService) -> dict[str, planner.MeasuredKvCapacity]:
        """Per tier, the KV cache its running engines allocated (planner.observed says how
        it is used); nothing when no Prometheus is configured or it has no answer."""
        if self.kv_capacity is None:
            return {}
        return {
            tier: planner.MeasuredKvCapacity(reading.num_gpu_blocks, reading.block_size, reading.pods)
            for tier, reading in self.kv_capacity.tiers_of(service.namespace, service.name).items()
        }

    def _cache_pods(self, service: InferenceService) -> list[dict[str, Any]]:
        """The pre-cache pods (their readiness per revision is what CacheReady counts)."""
        if not cache_objects.is_cached(service):
            return []
        return self.cluster.list(
            access.POD.api_version,
            access.POD.kind,
            service.namespace,
            {labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: cache_objects.COMPONENT_CACHE},
        )

    def _hold_rollouts(
        self,
        desired: list[dict[str, Any]],
        service: InferenceService,
        plan: Plan,
        held: tuple[rollout.RolloutHold, ...],
        measured_s: dict[str, float],
    ) -> list[dict[str, Any]]:
        """Held tiers keep the workload rendered at the revision they serve (one render per
        distinct revision); the new DaemonSets go out in this same pass."""
        for revision in sorted({hold.serving_revision for hold in held}):
            tiers = {hold.tier for hold in held if hold.serving_revision == revision}
            previous = render(rollout.at_revision(service, revision), plan, self.settings, measured_s)
            desired = rollout.keep_workloads(desired, previous, tiers)
        return desired

    def _cache_ready(
        self,
        status: dict[str, Any],
        service: InferenceService,
        plan: Plan | None,
        observed: list[dict[str, Any]],
        *,
        pods: list[dict[str, Any]],
        held: tuple[rollout.RolloutHold, ...],
        generation: int | None,
    ) -> None:
        """status.cache and CacheReady from the pre-cache DaemonSets/Job and their pods (issue 5)."""
        cache = cache_readiness.for_service(
            service, plan, observed, pods, held=[hold.describe() for hold in held]
        )
        status["cache"] = [tier.to_wire() for tier in cache.tiers]
        status["conditions"] = status_rules.set_condition(
            status.get("conditions") or [],
            labels.CONDITION_CACHE_READY,
            cache.status,
            cache.reason,
            cache.message,
            now=rfc3339(self.clock()),
            generation=generation,
        )

    @staticmethod
    def _workloads(
        observed: list[dict[str, Any]], report: executor.Report | None
    ) -> dict[str, dict[str, Any]]:
        by_ref: dict[ObjectRef, dict[str, Any]] = {}
        for obj in observed:
            by_ref[ref_of(obj)] = obj
        if report is not None:
            by_ref.update(report.applied)
            for gone in report.deleted:
                by_ref.pop(gone, None)
        out: dict[str, dict[str, Any]] = {}
        for ref, obj in sorted(by_ref.items()):
            tier = (obj["metadata"].get("labels") or {}).get(labels.LABEL_TIER)
            if ref.is_workload and tier is not None:
                out[tier] = obj
        return out

    @staticmethod
    def _events(
        previous: dict[str, Any],
        *,
        status: dict[str, Any],
        plan: Plan | None,
        plan_hash: str | None,
        actions: list[Action],
        observed: list[dict[str, Any]],
    ) -> list[Event]:
        found: list[Event] = []
        if plan is not None and plan_hash is not None:
            found += event_rules.plan_changed(previous.get("planHash"), plan, plan_hash)
        found += event_rules.condition_transitions(previous.get("conditions") or [], status["conditions"])
        deleted = {a.ref for a in actions if isinstance(a, Delete) and a.ref.is_workload}
        pruned_tiers = sorted(
            {
                str((obj["metadata"].get("labels") or {}).get(labels.LABEL_TIER))
                for obj in observed
                if ref_of(obj) in deleted
            }
        )
        return found + event_rules.pruned(pruned_tiers)
