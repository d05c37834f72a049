"""Examples applied with `kubectl apply --server-side`, reconciled by the real operator:
the objects, their owner references, where their pods land, and the printer columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, by_name, conditions, controlplane, eventually, example, owned_by
from tests.e2e.spec import gpu_service

# REST collections of everything an InferenceService owns.
OWNED_COLLECTIONS = {
    "Deployment": "apps/v1/deployments",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1/leaderworkersets",
    "Service": "v1/services",
    "PodDisruptionBudget": "policy/v1/poddisruptionbudgets",
    "PodMonitor": "monitoring.coreos.com/v1/podmonitors",
    "DaemonSet": "apps/v1/daemonsets",
    "Job": "batch/v1/jobs",
    # The front door (the example names a Gateway).
    "InferencePool": "inference.networking.k8s.io/v1/inferencepools",
    "HTTPRoute": "gateway.networking.k8s.io/v1/httproutes",
    "ServiceAccount": "v1/serviceaccounts",
    "Role": "rbac.authorization.k8s.io/v1/roles",
    "RoleBinding": "rbac.authorization.k8s.io/v1/rolebindings",
}
SERVICE_LABEL = "inferfleet.dev/service"
TIER_LABEL = "inferfleet.dev/tier"
COMPONENT_LABEL = "inferfleet.dev/component"


def children(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Kind -> name -> object, for every object labelled as the service's."""
    return {
        kind: by_name(cluster.list(path, namespace, f"{SERVICE_LABEL}={name}"))
        for kind, path in OWNED_COLLECTIONS.items()
    }


def tier_gpus(body: Mapping[str, Any]) -> dict[str, str]:
    return {tier["name"]: tier["gpu"] for tier in body["spec"]["tiers"]}


def test_example_is_reconciled_into_owned_objects(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = example("llama-8b-chat", namespace)
    cluster.apply([body])
    name = body["metadata"]["name"]

    expected = {
        "Deployment": {f"{name}-l4", f"{name}-a100-burst", f"{name}-epp"},
        "Service": {name, f"{name}-l4-api", f"{name}-a100-burst-api", f"{name}-epp"},
        "PodDisruptionBudget": {f"{name}-l4", f"{name}-a100-burst"},
        "PodMonitor": {name, f"{name}-epp"},
        "DaemonSet": {f"{name}-l4-cache", f"{name}-a100-burst-cache"},
        "LeaderWorkerSet": set(),
        "Job": set(),
        "InferencePool": {name},
        "HTTPRoute": {name},
        "ServiceAccount": {f"{name}-epp"},
        "Role": {f"{name}-epp"},
        "RoleBinding": {f"{name}-epp"},
    }

    def all_objects() -> dict[str, dict[str, Mapping[str, Any]]]:
        found = children(cluster, namespace, name)
        assert {kind: set(objects) for kind, objects in found.items()} == expected
        return found

    found = eventually(all_objects, 90, what="every object of the example")
    owner = cluster.service(namespace, name)
    for kind, objects in found.items():
        for obj in objects.values():
            assert owned_by(obj, owner), (
                f"{kind} {obj['metadata']['name']} has no controller reference to {name}"
            )
    # Pre-cache pods exist (the DaemonSet controller made them) before any replica needs them.
    cache_pods = cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}={name},{COMPONENT_LABEL}=cache")
    assert cache_pods, "no pre-cache pods"

    def ready() -> dict[str, Any]:
        live = cluster.service(namespace, name)
        status = live.get("status") or {}
        assert status.get("observedGeneration") == live["metadata"]["generation"], status
        assert conditions(live).get("Ready", {}).get("status") == "True", conditions(live)
        return live

    live = eventually(ready, 120, what="Ready=True")
    status = live["status"]
    assert status["tierSummary"] == "l4:2/2,a100-burst:0/0"
    assert (status["readyReplicas"], status["desiredReplicas"]) == (2, 2)

    # The disruption controller (kube-controller-manager) could compute the budget: two
    # healthy serving pods, one may go. A budget that also selected the pre-cache
    # DaemonSet's pods never synced and stayed at 0.
    def budget() -> None:
        pdb = cluster.kubectl_json("get", "pdb", f"{name}-l4", "-n", namespace)
        assert (pdb.get("status") or {}).get("currentHealthy") == 2, pdb.get("status")
        assert pdb["status"].get("disruptionsAllowed") == 1, pdb["status"]

    eventually(budget, 60, what="the l4 PodDisruptionBudget to allow one disruption")

    # The printer columns, as an SRE sees them. STATUS is the worst condition: Available
    # once the autoscaler's next tick has seen the replicas Ready (until then its Scaling
    # condition still says WaitingForReplicas).
    def columns() -> None:
        table = cluster.kubectl("get", "ifs", "-n", namespace).stdout.splitlines()
        assert table[0].split() == [
            "NAME",
            "MODEL",
            "TIERS",
            "READY",
            "DESIRED",
            "ENDPOINTS",
            "ROUTE",
            "TTFT-P99-MS",
            "STATUS",
            "AGE",
        ]
        row = table[1].split()
        assert row[:5] == [name, "meta-llama/Llama-3.1-8B-Instruct", "l4:2/2,a100-burst:0/0", "2", "2"], table
        # The example names a Gateway no controller answers for here: its route is Pending
        # (tests/e2e/test_frontdoor.py checks the endpoints).
        assert row[6] == "Pending", table
        assert "Available" in row, table

    eventually(columns, 60, what="kubectl get ifs: STATUS Available")
    wide = cluster.kubectl(
        "get", "inferenceservices.inferfleet.dev", name, "-n", namespace, "-o", "name"
    ).stdout
    assert wide.strip() == f"inferenceservice.inferfleet.dev/{name}"


def test_pods_run_only_on_nodes_of_their_tier_gpu_type(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """Serving and pre-cache pods of each tier only on nodes that carry the tier's GPU,
    on a fleet with several GPU types (tainted and untainted) and CPU-only nodes."""
    operators.start(namespace)
    amd = gpu_service(
        "amd-8b",
        namespace,
        [{"name": "mi300x", "gpu": "MI300X", "gpusPerNode": 8, "minReplicas": 1, "maxReplicas": 2}],
    )
    services = [example("llama-70b-chat", namespace), example("qwen3-moe", namespace), amd]
    cluster.apply(services)
    gpu_of_node = controlplane.fleet_gpus()

    def placed() -> list[str]:
        wrong: list[str] = []
        for body in services:
            name = body["metadata"]["name"]
            for tier, gpu in tier_gpus(body).items():
                selector = f"{SERVICE_LABEL}={name},{TIER_LABEL}={tier}"
                serving = cluster.list("v1/pods", namespace, f"{selector},{COMPONENT_LABEL}=vllm")
                cache = cluster.list("v1/pods", namespace, f"{selector},{COMPONENT_LABEL}=cache")
                assert serving, f"{name}/{tier}: no serving pod yet"
                assert cache, f"{name}/{tier}: no pre-cache pod yet"
                for pod in serving + cache:
                    node = pod["spec"].get("nodeName")
                    assert node, f"{pod['metadata']['name']} is not scheduled: {pod.get('status')}"
                    if gpu_of_node.get(node) != gpu:
                        role = pod["metadata"]["labels"][COMPONENT_LABEL]
                        wrong.append(f"{name}/{tier} ({gpu}) {role} pod on {node} ({gpu_of_node.get(node)})")
        return wrong

    wrong = eventually(placed, 120, what="every tier's pods scheduled")
    assert not wrong, "pods on nodes of another GPU type:\n" + "\n".join(sorted(wrong))
    # AMD tiers ask for AMD's device plugin resource.
    (pod, *_) = cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}=amd-8b,{COMPONENT_LABEL}=vllm")
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert int(limits.get("amd.com/gpu", "0")) >= 1 and "nvidia.com/gpu" not in limits, limits


def test_multi_node_example_is_rendered_as_a_leader_worker_set(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = example("llama-405b-multinode", namespace)
    cluster.apply([body])
    name = body["metadata"]["name"]

    def lws() -> Mapping[str, Any]:
        found = children(cluster, namespace, name)
        assert not found["Deployment"], "a multi-node tier must not be a Deployment"
        assert len(found["LeaderWorkerSet"]) == 1, found["LeaderWorkerSet"]
        return next(iter(found["LeaderWorkerSet"].values()))

    workload = eventually(lws, 90, what="the LeaderWorkerSet")
    assert owned_by(workload, cluster.service(namespace, name))
    template = workload["spec"]["leaderWorkerTemplate"]
    assert template["size"] >= 2, template["size"]
    assert workload["spec"]["replicas"] == body["spec"]["tiers"][0]["minReplicas"]
    # The API server accepted it against the LeaderWorkerSet CRD of lws v0.8.0.
    assert cluster.kubectl_json("get", "lws", workload["metadata"]["name"], "-n", namespace)["metadata"][
        "uid"
    ]
    status = eventually(lambda: _planned(cluster, namespace, name), 60, what="Planned=True")
    assert status["Planned"]["status"] == "True"


def _planned(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = conditions(cluster.service(namespace, name))
    assert "Planned" in found, found
    return found
