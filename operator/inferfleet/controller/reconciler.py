"""One reconcile pass for one InferenceService: read, compute, execute, conclude, write.

`read` builds a `reconcile.compute.Snapshot` (the spec parsed and planned, the objects
it owns, its pods, the measurements); `compute` (pure) turns it into an intent (the
actions, the rollout holds, the plan rendered and the plan reported); the executor
applies the actions; `conclude` (pure) builds status and events in one place; the pass
writes them. Every trigger (create, update, resume, the drift timer, a child's change)
calls `reconcile`; it is level-triggered and idempotent, so running it twice, or after
a crash halfway, converges to the same objects. User errors (invalid or infeasible
spec, an object the API server refuses) end in status conditions and events and return
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
from inferfleet.api import InferenceService, SpecInvalid, labels, parse
from inferfleet.autoscaling.promql.parse import KvCapacityReading
from inferfleet.caching.precache import coldstart
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.cluster import Cluster, KindNotServed, TransientApiError, access
from inferfleet.cluster.events import post_events
from inferfleet.config import OperatorSettings
from inferfleet.controller import executor
from inferfleet.controller.routes import GatewayRoutes
from inferfleet.controller.single_flight import SingleFlight
from inferfleet.design import object_names as render_names
from inferfleet.design import topology
from inferfleet.kubedata import KUBE_TIME_FORMAT, ObjectRef, owner_uids
from inferfleet.reconcile import compute, modelprobe, volume_rules
from inferfleet.reconcile.actions import Action
from inferfleet.render import pod as render_pod
from inferfleet.render.route_matching import Observed

logger = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]


class KvCapacitySource(Protocol):
    """Where the engines' allocated KV cache is read (autoscaling.prometheus.reader.KvCapacityReader)."""

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
    return moment.astimezone(dt.UTC).strftime(KUBE_TIME_FORMAT)


@dataclass(frozen=True)
class Outcome:
    """What one pass did, for logs and tests."""

    actions: tuple[Action, ...]
    status: dict[str, Any]
    report: executor.Report | None


def _log_internal(intent: compute.Intent) -> None:
    """An exception the pure core raised on a spec (a bug, or a value validation let
    through) is logged with its traceback for us; the user has the condition."""
    designed = intent.design
    if designed is None:
        return
    failure = designed.plan_failure
    if failure is not None and failure.kind == "internal":
        logger.error("cannot plan %s", designed.source, exc_info=failure.error)
    if intent.render_error is not None:
        logger.error("cannot render %s", designed.source, exc_info=intent.render_error)


def cr_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef(labels.API_VERSION, labels.KIND, namespace, name)


class Reconciler:
    """Holds the port, the settings and the clock; `reconcile` runs a pass."""

    def __init__(
        self,
        cluster: Cluster,
        settings: OperatorSettings,
        clock: Clock = utc_now,
        kv_capacity: KvCapacitySource | None = None,
        *,
        routes: GatewayRoutes | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.clock = clock
        self.kv_capacity = kv_capacity
        # Other routes on the Gateways (shadow check), one list shared by all passes.
        self.routes = routes or GatewayRoutes(cluster, settings.namespaces)
        # Passes of one service never overlap, whatever triggers them (single_flight).
        self.in_flight = SingleFlight()

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

    def read(self, namespace: str, name: str) -> tuple[dict[str, Any], compute.Snapshot] | None:
        """The InferenceService and everything it owns and measured, as observed; None when
        it is gone or being deleted (owner references take the children away). Nothing is
        decided here: compute() designs the service from this snapshot."""
        body = self.cluster.get(cr_ref(namespace, name))
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        metadata = body["metadata"]
        previous: dict[str, Any] = dict(body.get("status") or {})
        service: InferenceService | None = None
        invalid: str | None = None
        try:
            # Status is ours and other writers'; only spec and metadata are input.
            service = parse({**body, "status": None}, source=f"{namespace}/{name}")
        except SpecInvalid as error:
            invalid = str(error)
        observed = self.observe(namespace, name, str(metadata["uid"]))
        serving_pods = self._serving_pods(service) if service is not None else []
        starts = coldstart.classified_cold_starts(
            serving_pods, container=render_pod.CONTAINER_NAME, tier_label=labels.LABEL_TIER
        )
        snapshot = compute.Snapshot(
            settings=self.settings,
            generation=metadata.get("generation"),
            previous=previous,
            now=rfc3339(self.clock()),
            service=service,
            invalid=invalid,
            observed=observed,
            cache_pods=self._cache_pods(service) if service is not None else [],
            serving_pods=serving_pods,
            measured_cold_starts=starts.first,
            measured_warm_starts=starts.warm,
            measured_kv=self._measured_kv(service) if service is not None else {},
            node_cache=self._node_cache(service) if service is not None else None,
            gateway_routes=self._gateway_routes(service),
            probe_pods=self._probe_pods(service, previous) if service is not None else [],
        )
        return body, snapshot

    def reconcile(self, namespace: str, name: str) -> Outcome | None:
        """One pass (read, compute, execute, conclude, write); None when the
        InferenceService is gone or being deleted."""
        read = self.read(namespace, name)
        if read is None:
            return None
        body, snapshot = read
        intent = compute.compute(snapshot)
        _log_internal(intent)
        rendered = intent.rendered_plan is not None
        report = executor.execute(self.cluster, list(intent.actions)) if rendered else None
        conclusion = compute.conclude(snapshot, intent, report)
        if conclusion.patch:
            version = body["metadata"].get("resourceVersion")
            try:
                self.cluster.patch_status(cr_ref(namespace, name), conclusion.patch, resource_version=version)
            except TransientApiError:
                # The pass is retried, but what the executor did is done: a deleted
                # workload is not deleted again, so its Event is posted now or never.
                post_events(self.cluster, body, conclusion.done_events)
                raise
        post_events(self.cluster, body, conclusion.events)
        return Outcome(intent.actions, conclusion.status, report)

    def _probe_pods(self, service: InferenceService, previous: dict[str, Any]) -> list[dict[str, Any]]:
        """The pods of the model's probe Jobs, listed while status says a probe runs (their
        result is the verdict; the source itself is never read here)."""
        verdict = previous.get("modelSource")
        if not isinstance(verdict, dict) or verdict.get("state") != modelprobe.STATE_PROBING:
            return []
        return self.cluster.list(
            access.POD.api_version, access.POD.kind, service.namespace, modelprobe.probe_pod_selector(service)
        )

    def _serving_pods(self, service: InferenceService) -> list[dict[str, Any]]:
        """The vLLM pods that serve HTTP (their start-to-Ready is the cold start; the Ready
        ones are the front door's endpoints)."""
        return self.cluster.list(
            access.POD.api_version,
            access.POD.kind,
            service.namespace,
            {labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: render_names.COMPONENT_SERVER},
        )

    def _gateway_routes(self, service: InferenceService | None) -> list[Observed]:
        """The HTTPRoutes that might compete with ours (none without a Gateway)."""
        if service is None or topology.gateway_of(service, self.settings) is None:
            return []
        return self.routes.all()

    def _measured_kv(self, service: InferenceService) -> dict[str, planner.MeasuredKvCapacity]:
        """Per tier, the KV cache its running engines allocated (planner.observed says how
        it is used); nothing when no Prometheus is configured or it has no answer."""
        if self.kv_capacity is None:
            return {}
        return {
            tier: planner.MeasuredKvCapacity(reading.num_gpu_blocks, reading.block_size, reading.pods)
            for tier, reading in self.kv_capacity.tiers_of(service.namespace, service.name).items()
        }

    def _node_cache(self, service: InferenceService) -> volume_rules.ObservedVolume | None:
        """The namespace's node-cache claim; while it is not bound, also its volume and the
        namespace's uid (what the volume's tree is named by). Nothing for other cache modes."""
        if not cache_objects.needs_node_volume(service):
            return None
        wanted = cache_objects.node_cache_volume(service, self.settings)
        claim = self.cluster.get(wanted.claim_ref)
        bound = claim is not None and (claim.get("status") or {}).get("phase") == "Bound"
        if bound or self.settings.cache_volumes != "operator":
            return volume_rules.ObservedVolume(claim)
        namespace = self.cluster.get(ObjectRef("v1", "Namespace", None, service.namespace))
        uid = str((namespace or {}).get("metadata", {}).get("uid") or "") or None
        return volume_rules.ObservedVolume(claim, self.cluster.get(wanted.volume_ref), uid)

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
