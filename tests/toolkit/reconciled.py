"""InferenceServices as the reconciler leaves them, in an in-memory cluster.

The autoscaler reads what the reconciler wrote: the CR with `status.plan`, and one
labelled, owned workload per tier. `install` puts exactly that into an
`InMemoryCluster` without running the planner or the renderer, so autoscaler tests
(and hack/bench/autoscaler_loop.py) stay independent of plan arithmetic; the readers
below look at what the autoscaler then wrote.

    tk.install(cluster, a_scaled_service("chat", "team"), replicas={"l4": 3})
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.api import labels
from inferfleet.cluster import InMemoryCluster
from inferfleet.kubedata import DEPLOYMENT, ObjectRef
from tests.toolkit.builders import ServiceBuilder, TierPlanBuilder, a_small_tier_plan


def install(
    cluster: InMemoryCluster,
    service: ServiceBuilder | Mapping[str, Any],
    *,
    plans: Sequence[TierPlanBuilder | Mapping[str, Any]] | None = None,
    replicas: Mapping[str, int] | None = None,
    ready: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Create the CR with `status.plan` (each tier `a_small_tier_plan` unless `plans` are
    given) and a Deployment per tier, as after a reconcile."""
    body = service.body() if isinstance(service, ServiceBuilder) else service
    stored = cluster.user_apply(body, manager="kubectl")
    tiers = [str(tier["name"]) for tier in body["spec"]["tiers"]]
    ref = ObjectRef(labels.API_VERSION, labels.KIND, body["metadata"]["namespace"], body["metadata"]["name"])
    wanted = plans if plans is not None else [a_small_tier_plan(tier) for tier in tiers]
    wire = [plan.wire_dict() if isinstance(plan, TierPlanBuilder) else plan for plan in wanted]
    cluster.set_status(ref, {"plan": wire})
    for tier in tiers:
        count = (replicas or {}).get(tier, 1)
        workload = deployment(stored, tier, count)
        cluster.user_apply(workload, manager=labels.FIELD_MANAGER)
        set_ready(
            cluster,
            stored["metadata"]["namespace"],
            stored["metadata"]["name"],
            tier,
            (ready or {}).get(tier, count),
        )
    found = cluster.get(ref)
    assert found is not None
    return found


def deployment(owner: Mapping[str, Any], tier: str, replicas: int) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{meta['name']}-{tier}",
            "namespace": meta["namespace"],
            "labels": {
                labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE,
                labels.LABEL_SERVICE: meta["name"],
                labels.LABEL_TIER: tier,
            },
            "ownerReferences": [
                {
                    "apiVersion": labels.API_VERSION,
                    "kind": labels.KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas},
    }


def workload_ref(namespace: str, service: str, tier: str) -> ObjectRef:
    return ObjectRef(*DEPLOYMENT, namespace, f"{service}-{tier}")


def set_ready(cluster: InMemoryCluster, namespace: str, service: str, tier: str, ready: int) -> None:
    """What the Deployment controller would report once `ready` pods pass their probes."""
    ref = workload_ref(namespace, service, tier)
    current = cluster.objects[ref]
    cluster.set_status(ref, {"replicas": current["spec"].get("replicas", 0), "readyReplicas": ready})


def replicas(cluster: InMemoryCluster, namespace: str, service: str, tier: str) -> int:
    return int(cluster.objects[workload_ref(namespace, service, tier)]["spec"]["replicas"])


def status(cluster: InMemoryCluster, namespace: str, service: str) -> dict[str, Any]:
    ref = ObjectRef(labels.API_VERSION, labels.KIND, namespace, service)
    return copy.deepcopy(dict(cluster.objects[ref].get("status") or {}))


def condition(cluster: InMemoryCluster, namespace: str, service: str, type_: str) -> dict[str, Any] | None:
    for entry in status(cluster, namespace, service).get("conditions") or []:
        if entry.get("type") == type_:
            return dict(entry)
    return None
