"""Builders for InferenceServices as the reconciler leaves them, for tests and benchmarks.

The autoscaler reads what the reconciler wrote: the CR with `status.plan`, and one
labelled, owned workload per tier. These helpers put exactly that into a cluster
(usually `InMemoryCluster`) without running the planner or the renderer, so autoscaler
tests stay independent of plan arithmetic.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.api import labels
from inferfleet.cluster import InMemoryCluster
from inferfleet.kubedata import DEPLOYMENT, ObjectRef


def tier_plan(
    name: str, *, usable_rps: float = 2.0, cold_start_s: float = 120.0, peak: int = 10
) -> dict[str, Any]:
    """A feasible TierPlan in wire form with the figures scaling reads."""
    return {
        "name": name,
        "gpu": "L4",
        "feasible": True,
        "tensorParallelSize": 1,
        "pipelineParallelSize": 1,
        "gpusPerReplica": 1,
        "quantization": "none",
        "kvCacheDtype": "auto",
        "gpuMemoryUtilization": 0.9,
        "maxModelLen": 8192,
        "maxNumSeqs": 64,
        "maxNumBatchedTokens": 8192,
        "memoryGiB": {"weights": 15.0, "activations": 1.0, "overhead": 1.0, "kvCache": 3.0},
        "kvCacheTokens": 20000,
        "maxConcurrency": 8.0,
        "concurrencyAtP95": 8.0,
        "usableRps": usable_rps,
        "replicasForPeak": peak,
        "coldStartSeconds": cold_start_s,
        "reasons": ["test fixture"],
    }


def service_body(
    name: str,
    namespace: str = "default",
    *,
    tiers: Sequence[Mapping[str, Any]] = ({"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 10},),
    scaling: Mapping[str, Any] | None = None,
    ttft_slo_ms: float = 2000.0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "workload": {
            "inputTokens": {"p50": 500, "p95": 1500, "p99": 3000},
            "outputTokens": {"p50": 200, "p95": 500, "p99": 800},
            "peakRequestsPerSecond": 10,
            "slo": {"ttftP99Ms": ttft_slo_ms},
        },
        "tiers": [dict(tier) for tier in tiers],
    }
    if scaling is not None:
        spec["scaling"] = dict(scaling)
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def install(
    cluster: InMemoryCluster,
    body: Mapping[str, Any],
    *,
    plans: Sequence[Mapping[str, Any]] | None = None,
    replicas: Mapping[str, int] | None = None,
    ready: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Create the CR with `status.plan` and a Deployment per tier, as after a reconcile."""
    stored = cluster.user_apply(body, manager="kubectl")
    tiers = [str(tier["name"]) for tier in body["spec"]["tiers"]]
    ref = ObjectRef(labels.API_VERSION, labels.KIND, body["metadata"]["namespace"], body["metadata"]["name"])
    cluster.set_status(ref, {"plan": list(plans) if plans is not None else [tier_plan(t) for t in tiers]})
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
