"""kopf handlers: wiring only.

Every trigger ends in the same call, `Reconciler.reconcile(namespace, name)`:
- create / update / resume of an InferenceService (kopf's handlers run on the holder of
  the leader Lease only, controller.kopf_gate; on a replica that took the Lease over,
  resumes of unchanged objects are left to the resync loop, `_left_to_resync`);
- any change to a Deployment, LeaderWorkerSet, pre-cache DaemonSet or Job the operator
  manages (a rollout's progress, a node's fetch finishing, a human's edit), which re-runs
  its parent at once;
- one resync loop for the whole operator (`controller.resync`, started at startup),
  which re-lists every InferenceService each minute: drift on other kinds, and status
  if a watch event was missed. With several replicas it runs on the holder of the
  leader Lease only (`controller.leader`, shared with the autoscaler loop).
Each pass is counted and timed in the operator's metrics (`controller.passes`).
The reconcile pass turns user errors into conditions and returns normally; the world's
errors arrive as `TransientApiError` and become `kopf.TemporaryError` with exponential
backoff. kopf keeps its own bookkeeping in annotations under our group's prefix, and
the handlers return None so nothing of kopf's lands in status.

No finalizer: delete needs no handler (every owned object carries an owner reference
and the garbage collector removes it), and nothing here is a kopf timer or daemon on
InferenceServices, the only handler kinds for which kopf writes a finalizer. So a CR
is deleted at once even when the operator is not running. `settings.persistence.
finalizer` keeps the name earlier versions used so kopf takes it off objects that
still carry it.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path
from typing import Any

import kopf

from inferfleet.api import labels, safe_text
from inferfleet.autoscaling.prometheus.reader import KvCapacityReader, PrometheusClient, PrometheusConfig
from inferfleet.cluster import KubernetesCluster, TransientApiError, access
from inferfleet.config import OperatorSettings
from inferfleet.controller import certificates, leader, resync, webhook_config
from inferfleet.controller.passes import run_pass
from inferfleet.controller.reconciler import Reconciler
from inferfleet.controller.routes import GatewayRoutes
from inferfleet.controller.webhook_server import AdmissionServer
from inferfleet.metrics import operator_metrics
from inferfleet.metrics.operator_metrics import OperatorMetrics

GVP = (labels.GROUP, labels.VERSION, labels.PLURAL)
# How often every InferenceService is re-checked even without a watch event.
DRIFT_INTERVAL_S = resync.DEFAULT_INTERVAL_S
# Exponential backoff for the world's errors: 5 s, 10 s, 20 s ... at most 5 min.
RETRY_BASE_S = 5.0
RETRY_MAX_S = 300.0
# Written by versions that ran a per-object drift timer; never added any more (see above).
LEGACY_FINALIZER = f"{labels.GROUP}/timers"
MANAGED = {labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE}
# The admission handlers' ids, which kopf puts in the webhook's URL path; the server
# answers these paths only.
WEBHOOK_PLAN = "plan"
WEBHOOK_IDS = (WEBHOOK_PLAN,)


def backoff_s(retry: int) -> float:
    return float(min(RETRY_MAX_S, RETRY_BASE_S * 2 ** max(0, retry)))


def metrics_of(memo: Any) -> OperatorMetrics:
    """The operator's metrics: the process-wide ones unless a test put its own in the memo."""
    metrics: OperatorMetrics | None = memo.get("metrics")
    if metrics is None:
        metrics = operator_metrics.default_metrics()
        memo["metrics"] = metrics
    return metrics


def _configure_webhook(settings: kopf.OperatorSettings, memo: Any, port: int) -> None:
    """Every replica serves the webhook (kopf's server, our paths only); its configuration
    is the operator's own (controller.webhook_config), not kopf's: kopf would write one
    replica's certificate alone into the caBundle, and remove the webhook whenever any
    replica shut down."""
    host = memo.get("webhook_host")
    if not host:
        return  # webhook off: the operator still handles bad specs through conditions
    cert_dir = memo.get("webhook_cert_dir")
    if cert_dir:
        certfile, pkeyfile = Path(cert_dir) / "tls.crt", Path(cert_dir) / "tls.key"
        cafile = Path(cert_dir) / "ca.crt"
        cafile = cafile if cafile.exists() else certfile
    else:
        scratch = Path(tempfile.mkdtemp(prefix="inferfleet-webhook-"))
        certfile, pkeyfile = certificates.self_signed(scratch, [host])
        cafile = certfile
    settings.admission.server = AdmissionServer(
        handler_ids=WEBHOOK_IDS,
        addr=memo.get("bind_address") or "0.0.0.0",
        port=port,
        host=host,
        certfile=certfile,
        pkeyfile=pkeyfile,
        cafile=cafile,
    )
    settings.admission.managed = None
    memo["webhook_cafile"] = cafile


def _start_webhook_registration(memo: Any, port: int) -> None:
    cafile: Path | None = memo.get("webhook_cafile")
    if cafile is None or memo.get("webhook_registration") is not None:
        return
    registration = webhook_config.Registration(
        memo.get("cluster") or KubernetesCluster.from_environment(),
        hook_name=f"{WEBHOOK_PLAN}.{access.WEBHOOK_CONFIGURATION}",
        config=webhook_config.client_config(str(memo["webhook_host"]), port, f"/{WEBHOOK_PLAN}"),
        cafile=cafile,
    )
    registration.start()
    memo["webhook_registration"] = registration


@kopf.on.startup()
def configure(*, settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    operator_settings: OperatorSettings = memo.get("settings") or OperatorSettings.from_env()
    settings.persistence.finalizer = LEGACY_FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=labels.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=labels.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # our own events say what happened
    # A namespace-only install has no ClusterRole: kopf must not watch CRDs or namespaces
    # (it then serves the namespaces it was given, and the CRDs it found at startup).
    settings.scanning.disabled = not operator_settings.cluster_scanning
    _configure_webhook(settings, memo, operator_settings.webhook_port)
    _start_webhook_registration(memo, operator_settings.webhook_port)
    if memo.get("reconciler") is None:
        cluster = memo.get("cluster") or KubernetesCluster.from_environment()
        # The Prometheus the autoscaler reads also tells what KV cache each engine allocated.
        kv_capacity = KvCapacityReader(
            PrometheusClient(PrometheusConfig.from_settings(operator_settings), metrics_of(memo))
        )
        # Other teams' routes are read where kopf watches (a cluster-wide list is forbidden
        # with namespaced RBAC).
        watched = memo.get("namespaces")
        routes = GatewayRoutes(cluster, operator_settings.namespaces if watched is None else watched)
        memo["reconciler"] = Reconciler(
            cluster,
            operator_settings,
            kv_capacity=kv_capacity,
            routes=routes,
        )
    if memo.get("resync") is None:
        namespaces = memo.get("namespaces")
        loop = resync.Resync(
            memo["reconciler"],
            namespaces=operator_settings.namespaces if namespaces is None else namespaces,
            interval_s=DRIFT_INTERVAL_S,
            is_leader=leader.gate_of(leader.from_memo(memo)),
            metrics=metrics_of(memo),
        )
        loop.start()
        memo["resync"] = loop


@kopf.on.cleanup()
def stop_resync(*, memo: Any, **_: Any) -> None:
    loop: resync.Resync | None = memo.get("resync")
    if loop is not None:
        loop.stop()
    # The other replicas go on serving; the last one out removes the webhook.
    registration: webhook_config.Registration | None = memo.get("webhook_registration")
    if registration is not None:
        registration.stop()
    # Released here or by the autoscaler's cleanup, whichever runs first (idempotent).
    elector: leader.LeaderElector | None = memo.get("leader")
    if elector is not None:
        elector.stop()


Logger = logging.Logger | logging.LoggerAdapter[Any]


def _run(
    memo: Any, namespace: str | None, name: str, retry: int, logger: Logger, *, may_coalesce: bool = False
) -> None:
    reconciler: Reconciler = memo["reconciler"]
    try:
        outcome = run_pass(
            reconciler, namespace or "default", name, metrics_of(memo), may_coalesce=may_coalesce
        )
    except TransientApiError as error:
        delay = backoff_s(retry)
        # kopf posts this as an Event: API servers quote the tenant's values in errors.
        message = safe_text.event_message(f"API server error, retrying in {delay:.0f}s: {error}")
        raise kopf.TemporaryError(message, delay=delay) from error
    memo["passes"] = int(memo.get("passes", 0)) + 1
    if outcome is not None and outcome.actions:
        logger.info("applied %d action(s): %s", len(outcome.actions), "; ".join(map(str, outcome.actions)))


def _left_to_resync(memo: Any) -> bool:
    """Whether a resume (an unchanged object seen for the first time) is left to the resync
    loop: on a replica that took the Lease over from another, which had reconciled every
    object. A takeover lists every InferenceService at once, and 1,000 resume passes ahead
    of an edit held it past the 15 s a failover may take (docs/operations/high-availability.md);
    the resync re-checks each within its period anyway. Changed objects (create, update)
    are handled at once; on a first start, resumes too."""
    elector: leader.LeaderElector | None = memo.get("leader")
    return elector is not None and elector.followed_another and memo.get("resync") is not None


# Async, with the pass in a worker thread: kopf's event loop then answers every event
# that needs no pass (a resume left to the resync, a child's initial listing) without a
# thread hop each, which on a takeover of 1,000 services is some 13,000 events.
@kopf.on.resume(*GVP)
@kopf.on.create(*GVP)
@kopf.on.update(*GVP)
async def reconcile_on_change(
    *, name: str, namespace: str | None, memo: Any, retry: int, logger: Logger, reason: str = "", **_: Any
) -> None:
    if reason == kopf.Reason.RESUME and _left_to_resync(memo):
        return
    await asyncio.to_thread(_run, memo, namespace, name, retry, logger)


@kopf.on.event("apps", "v1", "deployments", labels=MANAGED)
@kopf.on.event("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", labels=MANAGED)
# Pre-cache DaemonSets (nvme) and Jobs (pvc): their status is what CacheReady counts, so a
# node finishing its fetch, or a revision becoming ready for a waiting rollout, reaches the
# parent at once instead of at the next resync.
@kopf.on.event("apps", "v1", "daemonsets", labels=MANAGED)
@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
async def reconcile_parent(*, type: str | None, body: kopf.Body, memo: Any, logger: Logger, **_: Any) -> None:
    if type is None:
        return  # the initial listing; resume handlers cover the parents
    parent = (body.metadata.labels or {}).get(labels.LABEL_SERVICE)
    if not parent or not body.metadata.namespace:
        return
    try:
        # A child's event may skip its pass when one is already queued; the resource's
        # own handlers never do, so kopf retries their failures.
        await asyncio.to_thread(_run, memo, body.metadata.namespace, parent, 0, logger, may_coalesce=True)
    except kopf.TemporaryError as error:
        logger.warning("parent %s not reconciled now (the resync loop retries): %s", parent, error)


# Async, so kopf runs it on its event loop: a sync probe waits for a free worker of the
# thread pool the reconcile passes run in, and during a cold start of 1,000 services
# /healthz went unanswered for 115 s, until the liveness probe restarted the operator.
# It takes no lock and makes no call either (tests/unit/reconcile/test_health_probe.py
# asks /healthz while every worker thread is stuck in a pass).
@kopf.on.probe(id="reconcilePasses")
async def reconcile_passes(*, memo: Any, **_: Any) -> int:
    return int(memo.get("passes", 0))
