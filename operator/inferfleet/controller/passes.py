"""One reconcile pass as the operator's metrics see it: counted, timed, errors by kind.

Every trigger (kopf's handlers, the resync loop) goes through `run_pass`, so
`inferfleet_reconcile_total`, `inferfleet_reconcile_duration_seconds` and
`inferfleet_reconcile_errors_total` count every pass whatever started it.

Error kinds follow the two kinds of error the operator knows: `spec` when the pass
ended with the user's error in status (Planned=False: an invalid or infeasible spec;
the pass itself succeeded and is not retried), `transient` when the world failed (the
API server; retried with backoff), `internal` for anything else (a bug, logged).
"""

from __future__ import annotations

import logging

from inferfleet.api import labels
from inferfleet.cluster import TransientApiError
from inferfleet.controller.reconciler import Outcome, Reconciler
from inferfleet.controller.single_flight import Coalesced
from inferfleet.metrics.operator_metrics import OperatorMetrics

logger = logging.getLogger(__name__)


def user_error(outcome: Outcome) -> bool:
    """Whether the pass left a user's error in status (the spec cannot be planned as is)."""
    return any(
        condition.get("type") == labels.CONDITION_PLANNED and condition.get("status") == "False"
        for condition in outcome.status.get("conditions") or []
    )


def run_pass(
    reconciler: Reconciler,
    namespace: str,
    name: str,
    metrics: OperatorMetrics | None,
    *,
    may_coalesce: bool = False,
) -> Outcome | None:
    """One pass of this service, after any other running one (`single_flight` says why);
    None when the service is gone or, with `may_coalesce`, when a pass already waiting
    will do this one's work. Exceptions propagate."""
    try:
        return reconciler.in_flight.run(
            (namespace, name),
            lambda: _timed_pass(reconciler, namespace, name, metrics),
            may_coalesce=may_coalesce,
        )
    except Coalesced:
        logger.debug("%s/%s: a pass is already queued; this trigger's is skipped", namespace, name)
        return None


def _timed_pass(
    reconciler: Reconciler, namespace: str, name: str, metrics: OperatorMetrics | None
) -> Outcome | None:
    """`reconciler.reconcile` inside the metrics' reconcile timer."""
    if metrics is None:
        return reconciler.reconcile(namespace, name)
    try:
        with metrics.reconcile():
            outcome = reconciler.reconcile(namespace, name)
    except TransientApiError:
        metrics.reconcile_errors_total.labels(kind="transient").inc()
        raise
    except Exception:
        metrics.reconcile_errors_total.labels(kind="internal").inc()
        raise
    if outcome is not None and user_error(outcome):
        metrics.reconcile_errors_total.labels(kind="spec").inc()
    return outcome
