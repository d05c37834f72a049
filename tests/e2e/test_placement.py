"""Placement by capacity type and by GPU, status when nodes go, and the rollout promise,
on the real scheduler with KWOK's fleet (hack/controlplane/fleet.yaml).

Where a pod lands is judged by what each node is (the fleet's `gpu:` and `spot:`, which
never become labels), never by the rendered objects.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, controlplane, eventually, example, holds, ready
from tests.e2e.spec import gpu_service
from tests.e2e.test_reconcile import COMPONENT_LABEL, SERVICE_LABEL, TIER_LABEL
from tests.integration.chart.helmchart import render as render_chart

CACHE_REVISION_LABEL = "inferfleet.dev/cache-revision"


def fleet_spot() -> dict[str, bool]:
    """Node name -> whether its pool is spot capacity (the fleet file's truth)."""
    fleet = yaml.safe_load(controlplane.FLEET_FILE.read_text(encoding="utf-8"))
    return {name: bool(pool.get("spot")) for pool in fleet["nodes"] for name in pool["names"]}


def pods_of(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    return [
        p for p in cluster.list("v1/pods", namespace, selector) if not p["metadata"].get("deletionTimestamp")
    ]


def gpus_in_use(cluster: Cluster, node: str) -> int:
    """nvidia.com/gpu requested by the pods bound to `node`, in every namespace."""
    used = 0
    for pod in cluster.list("v1/pods", None, ""):
        if pod["spec"].get("nodeName") != node or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for container in pod["spec"]["containers"]:
            used += int(((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
    return used


# ------------------------------------------------------------------ capacity type


def test_on_demand_warm_minimums_land_on_on_demand_nodes_while_spot_nodes_are_free(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """The L4 spot nodes are bigger (4 GPUs each) and score higher: an on-demand tier's
    warm minimum still goes to the on-demand L4 nodes (GKE's gke-spot label), an on-demand
    A100 tier to the on-demand A100 node (Karpenter's and EKS's capacity labels), and
    their pre-cache pods only there; a spot tier only to spot nodes."""
    operators.start(namespace)
    tiers = [
        {"name": "l4", "gpu": "L4", "gpusPerNode": 1, "minReplicas": 2, "maxReplicas": 4},
        {"name": "a100", "gpu": "A100-SXM-80GB", "gpusPerNode": 8, "minReplicas": 1, "maxReplicas": 2},
        {
            "name": "l4-spot",
            "gpu": "L4",
            "gpusPerNode": 4,
            "capacityType": "spot",
            "minReplicas": 1,
            "maxReplicas": 2,
        },
    ]
    cluster.apply([gpu_service("chat", namespace, tiers)])
    gpu_of, spot_of = controlplane.fleet_gpus(), fleet_spot()
    wanted = {"l4": ("L4", False), "a100": ("A100-SXM-80GB", False), "l4-spot": ("L4", True)}

    def placed() -> dict[str, set[str]]:
        where: dict[str, set[str]] = {}
        for tier, (gpu, spot) in wanted.items():
            selector = f"{SERVICE_LABEL}=chat,{TIER_LABEL}={tier}"
            serving = pods_of(cluster, namespace, f"{selector},{COMPONENT_LABEL}=vllm")
            cache = pods_of(cluster, namespace, f"{selector},{COMPONENT_LABEL}=cache")
            minimum = next(t["minReplicas"] for t in tiers if t["name"] == tier)
            assert len(serving) == minimum and cache, (
                f"{tier}: {len(serving)} serving, {len(cache)} cache pods"
            )
            for pod in serving + cache:
                node = pod["spec"].get("nodeName")
                assert node, f"{pod['metadata']['name']} not scheduled: {pod['status'].get('conditions')}"
                role = pod["metadata"]["labels"][COMPONENT_LABEL]
                assert (gpu_of.get(node), spot_of.get(node)) == (gpu, spot), (
                    f"{tier} {role} pod on {node} ({gpu_of.get(node)}, spot={spot_of.get(node)})"
                )
                where.setdefault(tier, set()).add(node)
        return where

    where = eventually(placed, 120, what="every tier's serving and pre-cache pods scheduled")
    assert len(where["l4"]) >= 2, where  # two replicas on two 1-GPU on-demand nodes
    # The spot L4 nodes had room for the on-demand replicas all along (4 GPUs each, the
    # spot tier takes 4 of one): the scheduler was never short of spot capacity.
    free_spot = [
        n for n, spot in spot_of.items() if spot and gpu_of[n] == "L4" and gpus_in_use(cluster, n) < 4
    ]
    assert free_spot, "no spot L4 node had a free GPU: the test proves nothing"


def test_pickers_and_the_operator_pod_land_on_cpu_nodes(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """The fleet has untainted GPU nodes bigger than the CPU nodes (an on-prem B200 with
    the GPU operator's labels, an AKS pool with only AKS's label, an L40S): the endpoint
    picker and the chart's operator pod still go to CPU nodes only."""
    operators.start(namespace)
    body = example("llama-8b-chat", namespace)
    cluster.apply([body])
    name = body["metadata"]["name"]
    # The chart's operator pod as Helm renders it (its ServiceAccount, Secrets and
    # ConfigMaps are not needed to schedule it: KWOK runs no container).
    chart = next(o for o in render_chart({"replicaCount": 3}) if o["kind"] == "Deployment")
    pod_spec = chart["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = "default"
    operator_like = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "operator-like", "namespace": namespace},
        "spec": {
            "replicas": 3,
            "selector": chart["spec"]["selector"],
            "template": {"metadata": chart["spec"]["template"]["metadata"], "spec": pod_spec},
        },
    }
    cluster.apply([operator_like])
    gpu_of = controlplane.fleet_gpus()

    def on_cpu_nodes() -> list[str]:
        pickers = pods_of(cluster, namespace, f"{SERVICE_LABEL}={name},{COMPONENT_LABEL}=epp")
        selector = ",".join(f"{k}={v}" for k, v in chart["spec"]["selector"]["matchLabels"].items())
        operator_pods = pods_of(cluster, namespace, selector)
        assert pickers and len(operator_pods) == 3, (len(pickers), len(operator_pods))
        places = []
        for pod in pickers + operator_pods:
            node = pod["spec"].get("nodeName")
            assert node, f"{pod['metadata']['name']} not scheduled: {pod['status'].get('conditions')}"
            places.append(f"{pod['metadata']['name']} on {node} ({gpu_of.get(node) or 'CPU'})")
        return places

    places = eventually(on_cpu_nodes, 120, what="the pickers and the operator-like pods scheduled")
    assert all(place.endswith("(CPU)") for place in places), "\n".join(places)


# ------------------------------------------------------------------ nodes that go


@pytest.fixture
def h200_node(cluster: Cluster) -> Iterator[str]:
    """A KWOK node of a GPU type no other test uses (H200, GPU feature discovery labels);
    the test deletes it, as a cluster autoscaler or a failed pool would."""
    name = f"e2e-h200-{uuid.uuid4().hex[:5]}"
    resources = {"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": "8"}
    # Created whole (a Node may carry its status on create), KWOK's annotation included: a
    # running KWOK takes up a node annotated at creation, not one annotated later.
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H200",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"capacity": resources, "allocatable": resources},
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(node))
    yield name
    cluster.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_tier_whose_nodes_are_gone_says_so_everywhere_status_speaks(
    cluster: Cluster, namespace: str, operators: Operators, h200_node: str
) -> None:
    operators.start(namespace)
    tiers = [
        {"name": "h200", "gpu": "H200-SXM-141GB", "gpusPerNode": 8, "minReplicas": 1, "maxReplicas": 2},
        {
            "name": "l4",
            "gpu": "L4",
            "gpusPerNode": 1,
            "minReplicas": 1,
            "maxReplicas": 2,
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        },
    ]
    cluster.apply([gpu_service("chat", namespace, tiers)])

    def serving() -> None:
        found = conditions(cluster.service(namespace, "chat"))
        if found.get("Ready", {}).get("status") != "True":
            pods = [
                (p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                for p in pods_of(cluster, namespace, f"{SERVICE_LABEL}=chat")
            ]
            raise AssertionError(f"{found.get('Ready')}; pods: {pods}")

    eventually(serving, 150, what="both tiers Ready while the H200 node exists")
    cluster.kubectl("delete", "node", h200_node, "--wait=true", "--timeout=60s")

    def truthful() -> dict[str, dict[str, Any]]:
        body = cluster.service(namespace, "chat")
        found = conditions(body)
        cache, ready_c, scaling = found["CacheReady"], found["Ready"], found.get("Scaling") or {}
        assert (cache["status"], cache["reason"]) == ("False", "NoEligibleNodes"), cache
        assert "no node for tier(s) h200" in cache["message"], cache
        assert (ready_c["status"], ready_c["reason"]) == ("False", "NoEligibleNodes"), ready_c
        assert scaling.get("reason") == "NoEligibleNodes", scaling
        entry = next(t for t in body["status"]["cache"] if t["tier"] == "h200")
        assert "nvidia.com/gpu.product=NVIDIA-H200" in entry.get("nodesWanted", ""), entry
        return found

    found = eventually(truthful, 120, what="status to name the missing H200 nodes")
    for condition in found.values():
        assert "0/0 nodes" not in condition.get("message", ""), condition
        assert "cold-starting" not in condition.get("message", ""), condition
    assert "nvidia.com/gpu.product=NVIDIA-H200" in found["Ready"]["message"]


# ------------------------------------------------------------------ the rollout promise


class SlowNodes:
    """L4 nodes (GKE's on-demand labels) whose kubelet is this test, not KWOK: they stay
    Ready (the test sends their heartbeats) and run nothing, so a pre-cache pod there is
    still fetching until the test says it is done (`finish`). Their GPUs are all taken
    (allocatable 0): serving pods never land there, the pre-cache DaemonSet does."""

    def __init__(self, cluster: Cluster, count: int) -> None:
        self.cluster = cluster
        self.names = [f"e2e-slow-l4-{uuid.uuid4().hex[:5]}" for _ in range(count)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeats, daemon=True)
        self.error: Exception | None = None

    def _status(self) -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "0"}
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "the e2e test plays this node's kubelet",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        return {"capacity": resources, "allocatable": resources, "conditions": [ready]}

    def __enter__(self) -> SlowNodes:
        for name in self.names:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "cloud.google.com/gke-accelerator": "nvidia-l4",
                        "cloud.google.com/gke-nodepool": "l4-slow-pool",
                    },
                },
                "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                "status": self._status(),
            }
            self.cluster.kubectl("create", "-f", "-", stdin=json.dumps(node))
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.cluster.kubectl("delete", "node", "--ignore-not-found", "--wait=false", *self.names, check=False)

    def _heartbeats(self) -> None:
        try:
            self._kubelet()
        except Exception as error:  # surfaced by `check`, in the test's own thread
            self.error = error

    def check(self) -> None:
        assert self.error is None, f"the slow nodes' kubelet failed: {self.error!r}"

    def _kubelet(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(0.5):
            core = self.cluster.core()
            beat = time.monotonic() - last_beat > 5
            for name in self.names:
                if beat:
                    core.patch_node_status(name, {"status": {"conditions": self._status()["conditions"]}})
                # A kubelet stops a deleted pod's containers, then removes it: here at once.
                for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items:
                    if pod.metadata.deletion_timestamp is not None:
                        core.delete_namespaced_pod(
                            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                        )
            if beat:
                last_beat = time.monotonic()

    def finish(self, namespace: str, selector: str) -> list[str]:
        """Report the matching pods on these nodes Running and Ready, as their kubelet would
        once `cache verify` passes."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done = []
        for pod in self.cluster.core().list_namespaced_pod(namespace, label_selector=selector).items:
            if pod.spec.node_name not in self.names:
                continue
            status = {
                "phase": "Running",
                "podIP": "10.244.254.1",
                "startTime": now,
                "conditions": [
                    {"type": kind, "status": "True", "lastTransitionTime": now}
                    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
            }
            self.cluster.core().patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": status})
            done.append(pod.metadata.name)
        return done


def test_a_revision_rolls_only_once_every_eligible_node_holds_it(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """One replica; the new revision is on every KWOK L4 node (more than the replica needs)
    but still fetching on three more eligible nodes: the workload keeps serving the old one
    (a new pod, or any later scale-up, could land on any eligible node), and rolls once
    every eligible node has it."""
    operators.start(namespace)
    tier = {
        "name": "l4",
        "gpu": "L4",
        "gpusPerNode": 1,
        "minReplicas": 1,
        "maxReplicas": 2,
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    }
    body = gpu_service("chat", namespace, [tier])
    body["spec"]["model"]["revision"] = "main"
    cluster.apply([body])

    def settled() -> None:
        found = conditions(cluster.service(namespace, "chat"))
        assert found.get("Ready", {}).get("status") == "True", found.get("Ready")
        assert found.get("CacheReady", {}).get("status") == "True", found.get("CacheReady")

    eventually(settled, 150, what="Ready and CacheReady")
    cache_selector = f"{SERVICE_LABEL}=chat,{TIER_LABEL}=l4,{COMPONENT_LABEL}=cache"
    fast = {p["spec"]["nodeName"] for p in pods_of(cluster, namespace, cache_selector)}
    old_template = cluster.apps().read_namespaced_deployment("chat-l4", namespace).spec.template.to_dict()
    daemonset = cluster.apps().read_namespaced_daemon_set("chat-l4-cache", namespace)
    old_label = daemonset.spec.template.metadata.labels[CACHE_REVISION_LABEL]

    with SlowNodes(cluster, 3) as slow:
        eligible = len(fast) + len(slow.names)

        def counted() -> None:
            ds = cluster.apps().read_namespaced_daemon_set("chat-l4-cache", namespace)
            assert ds.status.desired_number_scheduled == eligible, ds.status

        eventually(counted, 60, what="the DaemonSet to count the slow nodes")
        body["spec"]["model"]["revision"] = "v2"
        cluster.apply([body])
        new_selector = f"{cache_selector},{CACHE_REVISION_LABEL}!={old_label}"

        def fast_nodes_have_it() -> None:
            slow.check()
            new = pods_of(cluster, namespace, new_selector)
            on_fast = [p for p in new if p["spec"].get("nodeName") in fast and ready(p)]
            assert len(on_fast) == len(fast) and len(new) == eligible, [
                (
                    p["metadata"]["name"],
                    p["spec"].get("nodeName"),
                    ready(p),
                    p["metadata"].get("deletionTimestamp"),
                    p["metadata"]["labels"].get(CACHE_REVISION_LABEL),
                )
                for p in cluster.list("v1/pods", namespace, cache_selector)
            ]

        eventually(
            fast_nodes_have_it, 90, what="the new revision on every KWOK node, fetching on the slow ones"
        )

        def kept() -> None:
            template = cluster.apps().read_namespaced_deployment("chat-l4", namespace).spec.template.to_dict()
            assert template == old_template, "the workload rolled before every eligible node had the revision"

        holds(kept, duration_s=15)
        cache = conditions(cluster.service(namespace, "chat"))["CacheReady"]
        assert (cache["status"], cache["reason"]) == ("False", "FetchingRevision"), cache
        have = f"({len(fast)}/{eligible} have it)"
        assert f"until v2 is cached on every eligible node {have}" in cache["message"], cache

        assert len(slow.finish(namespace, new_selector)) == len(slow.names)

        def rolled() -> None:
            live = cluster.apps().read_namespaced_deployment("chat-l4", namespace)
            verify = next(c for c in live.spec.template.spec.init_containers if c.name == "cache-verify")
            assert verify.args[verify.args.index("--revision") + 1] == "v2", verify.args
            found = conditions(cluster.service(namespace, "chat"))
            assert found["Ready"]["status"] == "True", found["Ready"]
            assert found["CacheReady"]["status"] == "True", found["CacheReady"]

        eventually(rolled, 120, what="the rollout once every eligible node holds v2")
