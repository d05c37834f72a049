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
from inferfleet.api import InferenceService, Plan, SpecInvalid, labels, parse
from inferfleet.cluster import Cluster, KindNotServed, TransientApiError, access
from inferfleet.cluster.events import post_events
from inferfleet.config import OperatorSettings
from inferfleet.controller import executor
from inferfleet.controller.routes import GatewayRoutes
from inferfleet.controller.single_flight import SingleFlight
from inferfleet.design import object_names as render_names
from inferfleet.design import replan, topology
from inferfleet.design.checks import refusals
from inferfleet.design.policy_config import replan_mode
from inferfleet.kubedata import KUBE_TIME_FORMAT, ObjectRef, owner_uids
from inferfleet.precache import coldstart
from inferfleet.precache import workloads as cache_objects
from inferfleet.promql.parse import KvCapacityReading
from inferfleet.reconcile import compute, modelprobe
from inferfleet.reconcile import volumes as volume_rules
from inferfleet.reconcile.actions import Action
from inferfleet.render import pod as render_pod
from inferfleet.render.routes import Observed

logger = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]


class Planner(Protocol):
    """Plans a service; `fetched`/`fetch_problem`: its model's config.json as a probe read
    it, or why not (reconcile.modelprobe), for a model the catalog lacks."""

    def __call__(
        self,
        service: InferenceService,
        fetched: planner.FetchedModel | None = None,
        fetch_problem: str | None = None,
    ) -> Plan: ...


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
    return moment.astimezone(dt.UTC).strftime(KUBE_TIME_FORMAT)


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
    return compute.internal_error_message(stage, error)


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
        *,
        routes: GatewayRoutes | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.planner = planner
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

    def _plan(
        self, service: InferenceService, probe: modelprobe.ModelProbe
    ) -> tuple[Plan | None, str | None]:
        try:
            if probe.applies:
                return self.planner(service, probe.fetched, probe.problem), None
            return self.planner(service), None
        except SpecInvalid as error:
            return None, str(error)
        except ValueError as error:  # the planner refuses input it cannot size
            return None, f"the planner rejected the spec: {error}"
        except Exception as error:
            return None, _internal("plan", service, error)

    def read(self, namespace: str, name: str) -> tuple[dict[str, Any], compute.Snapshot] | None:
        """The InferenceService, planned, and everything it owns; None when it is gone
        or being deleted (owner references take the children away)."""
        body = self.cluster.get(cr_ref(namespace, name))
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        metadata = body["metadata"]
        previous: dict[str, Any] = dict(body.get("status") or {})
        now = rfc3339(self.clock())

        service: InferenceService | None = None
        plan: Plan | None = None
        planned_for: dict[str, Any] | None = None
        observed = self.observe(namespace, name, str(metadata["uid"]))
        probe = modelprobe.NOT_NEEDED
        try:
            # Status is ours and other writers'; only spec and metadata are input.
            service = parse({**body, "status": None}, source=f"{namespace}/{name}")
            # replan: auto plans for the workload the engines report once it has drifted.
            spec, planned_for = replan.planned_workload(
                service.spec,
                previous,
                generation=metadata.get("generation"),
                replan=replan_mode(self.settings, service.spec),
                now=now,
            )
            if planned_for is not None:
                service = service.model_copy(update={"spec": spec})
            probe = self._model_probe(service, previous, observed, now)
            plan, invalid = self._plan(service, probe)
            # The webhook's and `validate`'s verdict (render.checks.refusals): while the
            # probe has not read the architecture, only what holds for every tier.
            judged = None if probe.applies and probe.fetched is None else plan
            refused = refusals(service, self.settings, judged) if plan is not None else []
            if refused:
                # Never rendered: an unknown GPU or unreadable model, a cache path outside
                # the allowed root, a GPU with no placement, one image for several vendors
                # (render.checks). Existing workloads stay as they are, as for any invalid
                # spec.
                plan = None
                raise SpecInvalid(refused, f"{namespace}/{name}")
        except SpecInvalid as error:
            invalid = str(error)

        serving_pods = self._serving_pods(service) if service is not None else []
        snapshot = compute.Snapshot(
            settings=self.settings,
            generation=metadata.get("generation"),
            previous=previous,
            now=now,
            service=service,
            plan=plan,
            invalid=invalid,
            planned_for=planned_for,
            observed=observed,
            cache_pods=self._cache_pods(service) if service is not None else [],
            serving_pods=serving_pods,
            measured_cold_starts=self._measured_cold_starts(serving_pods),
            measured_kv=self._measured_kv(service) if service is not None and plan is not None else {},
            node_cache=self._node_cache(service) if service is not None and plan is not None else None,
            gateway_routes=self._gateway_routes(service) if plan is not None else [],
            model_probe=probe,
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
        if intent.render_error is not None and snapshot.service is not None:
            service = snapshot.service
            logger.error("cannot render %s/%s", service.namespace, service.name, exc_info=intent.render_error)
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

    def _model_probe(
        self,
        service: InferenceService,
        previous: dict[str, Any],
        observed: list[dict[str, Any]],
        now: str,
    ) -> modelprobe.ModelProbe:
        """The verdict on the model's config.json: the pods of its probe Jobs are read only
        while a probe runs. The source itself is never read here."""
        catalogs = self.settings.catalogs()
        verdict = previous.get("modelSource")
        pods: list[dict[str, Any]] = []
        probing = isinstance(verdict, dict) and verdict.get("state") == modelprobe.STATE_PROBING
        if probing and modelprobe.wanted(service, self.settings, catalogs):
            pods = self.cluster.list(
                access.POD.api_version,
                access.POD.kind,
                service.namespace,
                modelprobe.probe_pod_selector(service),
            )
        return modelprobe.decide(
            service,
            settings=self.settings,
            catalogs=catalogs,
            previous=verdict,
            jobs=modelprobe.probe_jobs(observed),
            pods=pods,
            now=now,
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

    @staticmethod
    def _measured_cold_starts(pods: list[dict[str, Any]]) -> dict[str, planner.MeasuredColdStart]:
        """Per tier, the start-to-Ready of its serving pods (planner.observed says why)."""
        return coldstart.measured_cold_starts(
            pods, container=render_pod.CONTAINER_NAME, tier_label=labels.LABEL_TIER
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
