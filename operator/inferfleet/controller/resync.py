"""Periodic resync: every InferenceService is reconciled again every few tens of seconds.

This is what corrects drift a watch cannot see (a deleted Service, an edited budget)
and refreshes status if a watch event was missed. It is one loop for the whole
operator, started at startup, rather than a kopf timer per object: kopf protects every
object that has a timer or daemon with a finalizer, so deleting an InferenceService
would hang whenever the operator is not running. The loop needs nothing on the object;
owner references alone take the children away on delete.

The loop lists InferenceServices through the cluster port (the same `list` the RBAC
table already grants) and runs the ordinary, idempotent reconcile pass on each. With
several replicas it runs only on the one holding the leader Lease (`controller.leader`,
the same Lease that gates the autoscaler), so a standby does not double the read load.
Were two passes to overlap anyway (a lease handover mid-pass, or a kopf handler on the
other replica), they stay harmless: server-side apply of identical objects changes
nothing, and status is patched only when it changed, conditional on the resourceVersion
read, so two replicas never both record (or announce) one change.

Each pass is counted and timed in the operator's metrics (`passes.run_pass`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from inferfleet.api import labels
from inferfleet.cluster import TransientApiError
from inferfleet.controller.leader import Gate
from inferfleet.controller.passes import run_pass
from inferfleet.controller.periodic import PeriodicThread
from inferfleet.controller.reconciler import Reconciler
from inferfleet.controller.watched import Watched
from inferfleet.metrics.operator_metrics import OperatorMetrics

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60.0


@dataclass(frozen=True)
class PassSummary:
    """What one resync pass did, for logs and tests."""

    reconciled: int
    failed: int
    # True when another replica holds the leader Lease and this one did nothing.
    standby: bool = False


class Resync:
    """Reconciles every InferenceService in the watched namespaces, every `interval_s`."""

    def __init__(
        self,
        reconciler: Reconciler,
        namespaces: Iterable[str] = (),
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        is_leader: Gate | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self.reconciler = reconciler
        self.watched = Watched(namespaces)
        self.interval_s = interval_s
        self.is_leader = is_leader
        self.metrics = metrics
        # The first pass waits one interval: kopf's resume handlers cover startup.
        self._thread = PeriodicThread("inferfleet-resync", interval_s, self._pass)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.watched.namespaces

    def targets(self) -> list[tuple[str, str]]:
        """(namespace, name) of every InferenceService the operator watches."""
        items = self.watched.list(self.reconciler.cluster, labels.API_VERSION, labels.KIND, {})
        found = {(str(i["metadata"].get("namespace", "default")), str(i["metadata"]["name"])) for i in items}
        return sorted(found)

    def run_once(self) -> PassSummary:
        """One pass over every InferenceService; the world's errors wait for the next pass."""
        if self.is_leader is not None and not self.is_leader():
            return PassSummary(reconciled=0, failed=0, standby=True)
        try:
            targets = self.targets()
        except TransientApiError as error:
            logger.warning("resync: cannot list InferenceServices now: %s", error)
            return PassSummary(reconciled=0, failed=1)
        reconciled = failed = 0
        for namespace, name in targets:
            if self._thread.stopping.is_set():
                break
            try:
                run_pass(self.reconciler, namespace, name, self.metrics, may_coalesce=True)
            except TransientApiError as error:
                failed += 1
                logger.warning("resync: %s/%s not reconciled now: %s", namespace, name, error)
            except Exception:  # one broken object must not stop the loop for the others
                failed += 1
                logger.exception("resync: %s/%s failed", namespace, name)
            else:
                reconciled += 1
        return PassSummary(reconciled=reconciled, failed=failed)

    def _pass(self) -> None:
        summary = self.run_once()
        logger.debug("resync: %d reconciled, %d failed", summary.reconciled, summary.failed)

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
