"""The front door on a real API server: the pinned InferencePool and HTTPRoute CRDs accept
what the operator renders, and the pool selects exactly the Ready serving pods of every
tier (no pre-cache pod, no endpoint picker, no pod that is not Ready); once settled, a
reconcile pass over the front door's objects writes none of them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, conditions, eventually, example, owned_by, ready

POOLS = "inference.networking.k8s.io/v1/inferencepools"
ROUTES = "gateway.networking.k8s.io/v1/httproutes"
SERVICE_LABEL = "inferfleet.dev/service"


def matches(selector: Mapping[str, str], pod: Mapping[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def serving_pods(cluster: Cluster, namespace: str, deployments: set[str]) -> list[dict[str, Any]]:
    """Pods of the tiers' Deployments, found through ownership (ReplicaSet -> Deployment),
    not through the labels the pool selects by."""
    sets = {
        rs["metadata"]["name"]
        for rs in cluster.list("apps/v1/replicasets", namespace)
        for owner in rs["metadata"].get("ownerReferences") or []
        if owner.get("kind") == "Deployment" and owner.get("name") in deployments
    }
    return [
        pod
        for pod in cluster.list("v1/pods", namespace)
        if any(
            o.get("kind") == "ReplicaSet" and o.get("name") in sets
            for o in pod["metadata"].get("ownerReferences") or []
        )
    ]


def test_the_pool_selects_exactly_the_ready_serving_pods_of_all_tiers(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = example("llama-8b-chat", namespace)
    body["spec"]["tiers"][1]["minReplicas"] = 1  # the burst tier serves too: two tiers in the pool
    cluster.apply([body])
    name = body["metadata"]["name"]
    tiers = {f"{name}-l4", f"{name}-a100-burst"}

    def pool() -> dict[str, Any]:
        found = cluster.list(POOLS, namespace, f"{SERVICE_LABEL}={name}")
        assert [p["metadata"]["name"] for p in found] == [name], found
        return found[0]

    live_pool = eventually(pool, 90, what="the InferencePool")
    owner = cluster.service(namespace, name)
    assert owned_by(live_pool, owner)
    selector = live_pool["spec"]["selector"]["matchLabels"]
    assert live_pool["spec"]["endpointPickerRef"]["name"] == f"{name}-epp"
    (route,) = cluster.list(ROUTES, namespace, f"{SERVICE_LABEL}={name}")
    assert owned_by(route, owner)
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == name

    def exact() -> tuple[set[str], list[dict[str, Any]]]:
        pods = cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}={name}")
        serving = {p["metadata"]["name"]: p for p in serving_pods(cluster, namespace, tiers)}
        matching = {p["metadata"]["name"] for p in pods if matches(selector, p)}
        # Every pod of every tier's Deployment, and no other pod of the service.
        assert matching == set(serving), (matching, set(serving))
        selected = {p["metadata"]["name"] for p in pods if matches(selector, p) and ready(p)}
        expected = {pod_name for pod_name, pod in serving.items() if ready(pod)}
        assert selected == expected, (selected, expected)
        ready_tiers = {
            serving[pod_name]["metadata"]["labels"]["inferfleet.dev/tier"] for pod_name in expected
        }
        assert ready_tiers == {"l4", "a100-burst"}, ready_tiers
        return selected, pods

    _, pods = eventually(exact, 180, what="the pool's Ready pods to be the tiers' Ready pods")
    # The service runs other pods too (pre-cache, the endpoint picker): none is selected.
    components = {
        p["metadata"]["labels"].get("inferfleet.dev/component") for p in pods if not matches(selector, p)
    }
    assert {"cache", "epp"} <= components

    def front_door() -> dict[str, Any]:
        status = cluster.service(namespace, name).get("status") or {}
        front = status.get("frontDoor") or {}
        now_ready = exact()[0]  # the autoscaler may add a replica meanwhile
        assert front.get("endpoints") == len(now_ready), (front, now_ready)
        return front

    front = eventually(front_door, 120, what="status.frontDoor.endpoints")
    # No Gateway controller runs here: the route is in the cluster, waiting for an answer.
    assert (front["mode"], front["route"]) == ("gateway", "Pending")
    assert conditions(cluster.service(namespace, name))["Degraded"]["status"] == "False"
    table = cluster.kubectl("get", "ifs", name, "-n", namespace).stdout.splitlines()
    header = table[0].split()
    row = dict(zip(header, table[1].split(), strict=False))
    assert row["ROUTE"] == "Pending" and int(row["ENDPOINTS"]) >= len(tiers), table

    # Settled, a pass writes nothing it owns: what it renders is what the API server
    # kept (an empty map the server drops, e.g. the picker's pod annotations, once made
    # every pass re-apply the picker's Deployment). A label added by someone else to the
    # picker's Deployment wakes the parent through its child event handler.
    if cluster.audit_log is None:
        return
    audit = Audit(cluster.audit_log)
    user = f"system:serviceaccount:{namespace}:inferfleet-operator"
    mark = audit.mark()
    cluster.kubectl("label", "deployment", f"{name}-epp", "-n", namespace, "e2e/touched=1")

    def pass_ran() -> None:
        events = audit.events(mark, users=[user])
        reads = [e for e in events if e.verb == "get" and e.resource == "inferenceservices"]
        assert reads, "no reconcile pass after the child event"

    eventually(pass_ran, 60, what="a reconcile pass after the child event")
    time.sleep(5)
    # The autoscaler's own writes (scale subresource, status) and events are not the pass's.
    own = {"inferenceservices/status", "deployments/scale", "events", "inferenceservices"}
    writes = [
        f"{e.verb} {e.resource}/{e.name}"
        for e in audit.events(mark, users=[user])
        if e.write and e.resource not in own
    ]
    assert writes == [], writes
