"""The one module that writes the objects an InferenceService owns.

Applies run in render's order (Services before workloads), then deletes. A transient
error stops the pass and propagates: the whole pass is retried with backoff, and since
every write is an idempotent server-side apply of deterministic names, a retry (or a
restarted operator) converges without duplicates. A permanent error on one object is
recorded and the pass goes on, so one bad tier does not block the others.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfleet.cluster import Cluster, KindNotServed, PermanentApiError
from inferfleet.cluster.errors import Conflict
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile.actions import Action, Apply, Create, Delete

logger = logging.getLogger(__name__)

# Kinds whose absence (CRD not installed) degrades the service instead of failing it.
OPTIONAL_KINDS = frozenset(
    {
        ("monitoring.coreos.com/v1", "PodMonitor"),
        # Without the Gateway API and Inference Extension CRDs the service is still served
        # through its Services; Degraded says the front door is missing.
        ("inference.networking.k8s.io/v1", "InferencePool"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    }
)


@dataclass
class Report:
    """What an execution did."""

    applied: dict[ObjectRef, dict[str, Any]] = field(default_factory=dict)
    deleted: list[ObjectRef] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def execute(cluster: Cluster, actions: Sequence[Action]) -> Report:
    report = Report()
    for action in actions:
        ref = action.ref
        try:
            if isinstance(action, Apply):
                report.applied[ref] = cluster.apply(action.obj)
            elif isinstance(action, Create):
                try:
                    report.applied[ref] = cluster.create(action.obj)
                except Conflict as error:
                    # It exists (made since we looked, or by someone else): never taken over.
                    report.failures.append(f"{action}: it already exists ({error})")
            else:
                assert isinstance(action, Delete)
                if cluster.delete(ref):
                    report.deleted.append(ref)
            logger.info("%s", action, extra={"object": str(ref)})
        except KindNotServed as error:
            if (ref.api_version, ref.kind) in OPTIONAL_KINDS:
                report.skipped.append(f"{ref.kind} ({ref.api_version}) is not served by this cluster")
            else:
                report.failures.append(f"{action}: {ref.kind} ({ref.api_version}) is not served: {error}")
        except PermanentApiError as error:
            report.failures.append(f"{action}: {error}")
    return report
