"""A tier that changes kind keeps serving: Deployment -> LeaderWorkerSet (with the operator
killed halfway) and back, on the real control plane with the LeaderWorkerSet controller.

While the switch runs, three watches record every change: the pods the InferencePool
selects (Ready and not terminating), the ready endpoints of the tier's Service, and the
InferenceService's status. A watch sees every state the API server went through, so "no
moment without a Ready serving pod" is checked at every event, not between polls.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, Operator, conditions, eventually, ready
from tests.e2e.spec import cpu_service

NAME = "switch"
TIER = "cpu"
WARM = 2  # the tier's warm minimum: what it serves with before, during and after
WORKLOAD = f"{NAME}-{TIER}"
DEPLOYMENTS = "apps/v1/deployments"
LEADER_WORKER_SETS = "leaderworkerset.x-k8s.io/v1/leaderworkersets"
MULTI_NODE = {"tensorParallelSize": 1, "pipelineParallelSize": 2}  # one GPU per node: 2 nodes


def service(namespace: str, *, multi_node: bool) -> dict[str, Any]:
    body = cpu_service(NAME, namespace, image="vllm/vllm-openai:stand-in")
    body["spec"]["frontDoor"] = {"gateway": {"name": "inference-gateway"}}
    tier = body["spec"]["tiers"][0]
    tier["minReplicas"] = WARM
    if multi_node:
        tier["overrides"] = dict(MULTI_NODE)
    return body


# --- watching -----------------------------------------------------------------------------


@dataclass
class Recording:
    """Every event of one watch, in the order the API server sent them."""

    path: str
    initial: list[dict[str, Any]] = field(default_factory=list)  # as listed when it started
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Watches:
    """Watches running in threads until `stop()`; each resumes from its last resourceVersion."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def watch(self, namespace: str, path: str, query: Mapping[str, str]) -> Recording:
        recording = Recording(path)
        group_version, _, plural = path.rpartition("/")
        root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        url = f"{root}/namespaces/{namespace}/{plural}"
        listed = self.cluster.raw("GET", url, query=query)
        recording.initial = list(listed.get("items") or [])
        version = str(listed["metadata"]["resourceVersion"])
        thread = threading.Thread(target=self._run, args=(url, dict(query), version, recording), daemon=True)
        thread.start()
        self._threads.append(thread)
        return recording

    def _run(self, url: str, query: dict[str, str], version: str, recording: Recording) -> None:
        api = self.cluster.api
        while not self._stop.is_set():
            params = {**query, "watch": "true", "resourceVersion": version, "timeoutSeconds": "3"}
            try:
                response = api.call_api(
                    *api.param_serialize(
                        method="GET",
                        resource_path=url,
                        query_params=list(params.items()),
                        header_params={"Accept": "application/json"},
                        auth_settings=["BearerToken"],
                    ),
                    _request_timeout=30,
                )
                for line in response.response:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch {recording.path}: {event['object']}")
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        recording.events.append((time.monotonic(), event["type"], event["object"]))
            except Exception as error:  # recorded: the test fails on it, never silently
                recording.errors.append(repr(error))
                return

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)


def timeline(recording: Recording, count: Callable[[Mapping[str, Any]], int]) -> list[tuple[float, int]]:
    """At the start and after each event, the sum of `count` over the objects that exist."""
    assert not recording.errors, recording.errors
    state: dict[str, Mapping[str, Any]] = {obj["metadata"]["name"]: obj for obj in recording.initial}
    out = [(0.0, sum(count(o) for o in state.values()))]
    for at, kind, obj in recording.events:
        if kind == "DELETED":
            state.pop(obj["metadata"]["name"], None)
        else:
            state[obj["metadata"]["name"]] = obj
        out.append((at, sum(count(o) for o in state.values())))
    return out


def serving(pod: Mapping[str, Any]) -> int:
    """A pod the front door may send requests to: Ready and not on its way out."""
    return int(ready(pod) and not pod["metadata"].get("deletionTimestamp"))


def ready_endpoints(slice_: Mapping[str, Any]) -> int:
    return sum(1 for e in slice_.get("endpoints") or [] if (e.get("conditions") or {}).get("ready"))


@dataclass
class Switch:
    """The recordings of one switch."""

    pods: Recording
    endpoints: Recording
    services: Recording

    def lowest_serving(self) -> tuple[int, int]:
        """The fewest serving pods the pool selected, and the fewest ready endpoints of the
        tier's Service, at any moment of the recording."""
        pods = timeline(self.pods, serving)
        endpoints = timeline(self.endpoints, ready_endpoints)
        assert self.pods.events and self.endpoints.events, "nothing recorded"
        return min(n for _, n in pods), min(n for _, n in endpoints)

    def statuses(self) -> list[dict[str, Any]]:
        assert not self.services.errors, self.services.errors
        return [obj.get("status") or {} for obj in self.services.initial] + [
            obj.get("status") or {} for _, _, obj in self.services.events
        ]


def record(cluster: Cluster, namespace: str) -> tuple[Watches, Switch]:
    """Watch the serving pods by the InferencePool's own selector (so a pod of either kind
    counts only if the front door selects it), the Service's EndpointSlices, the status."""
    pool = cluster.list("inference.networking.k8s.io/v1/inferencepools", namespace)[0]
    selector = ",".join(f"{k}={v}" for k, v in sorted(pool["spec"]["selector"]["matchLabels"].items()))
    watches = Watches(cluster)
    switch = Switch(
        pods=watches.watch(namespace, "v1/pods", {"labelSelector": selector}),
        endpoints=watches.watch(
            namespace,
            "discovery.k8s.io/v1/endpointslices",
            {"labelSelector": f"kubernetes.io/service-name={WORKLOAD}-api"},
        ),
        services=watches.watch(
            namespace, "inferfleet.dev/v1alpha1/inferenceservices", {"fieldSelector": f"metadata.name={NAME}"}
        ),
    )
    return watches, switch


# --- checks -------------------------------------------------------------------------------


def kinds(cluster: Cluster, namespace: str) -> set[str]:
    found = set()
    for kind, path in (("Deployment", DEPLOYMENTS), ("LeaderWorkerSet", LEADER_WORKER_SETS)):
        if any(o["metadata"]["name"] == WORKLOAD for o in cluster.list(path, namespace)):
            found.add(kind)
    return found


def settled_as(cluster: Cluster, namespace: str, kind: str) -> dict[str, Any]:
    """Only `kind` left for the tier, all its replicas Ready, status Ready=True."""
    assert kinds(cluster, namespace) == {kind}, kinds(cluster, namespace)
    path = DEPLOYMENTS if kind == "Deployment" else LEADER_WORKER_SETS
    (workload,) = [o for o in cluster.list(path, namespace) if o["metadata"]["name"] == WORKLOAD]
    assert (workload.get("status") or {}).get("readyReplicas") == WARM, workload.get("status")
    live = cluster.service(namespace, NAME)
    assert live["status"].get("observedGeneration") == live["metadata"]["generation"]
    assert conditions(live)["Ready"]["status"] == "True", conditions(live)["Ready"]
    return live


def events(cluster: Cluster, namespace: str) -> list[tuple[str, str]]:
    found = cluster.list("v1/events", namespace)
    ours = [
        e
        for e in found
        if e["involvedObject"].get("name") == NAME and e["involvedObject"]["kind"] == "InferenceService"
    ]
    return [
        (e["reason"], e["message"]) for e in sorted(ours, key=lambda e: e["metadata"]["creationTimestamp"])
    ]


def replacing(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        entry["replacing"]
        for status in statuses
        for entry in status.get("replicas") or []
        if entry.get("tier") == TIER and "replacing" in entry
    ]


# --- the tests ----------------------------------------------------------------------------


def test_deployment_to_leader_worker_set_serves_throughout_and_survives_a_restart_halfway(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    first = operators.start(namespace, name="first")
    cluster.apply([service(namespace, multi_node=False)])
    eventually(lambda: settled_as(cluster, namespace, "Deployment"), 120, what="the Deployment serving")

    watches, switch = record(cluster, namespace)
    try:
        cluster.apply([service(namespace, multi_node=True)])
        # The operator dies as soon as the LeaderWorkerSet exists and status says the tier
        # is being replaced; the new pods need the cold start (KWOK's Ready delay) before
        # anything may go, so this is halfway. (Killed before its status write, the next
        # operator may find the LeaderWorkerSet Ready and finish in one pass: nothing would
        # ever show `replacing`, which is no fault, so the test waits for it.)
        eventually(lambda: _has(cluster, namespace, "LeaderWorkerSet"), 60, interval_s=0.05, what="the LWS")
        eventually(lambda: _shows_replacing(cluster, namespace), 60, interval_s=0.05, what="status replacing")
        # ... and once it has said so in an Event (posted after the status write): an
        # operator killed in between never posts it, and the next one cannot know it is due.
        eventually(lambda: _announced(cluster, namespace), 60, interval_s=0.05, what="the TierReplaced Event")
        first.kill()
        assert kinds(cluster, namespace) == {"Deployment", "LeaderWorkerSet"}
        # With no operator, nothing goes: the LeaderWorkerSet comes up beside the Deployment.
        eventually(lambda: _ready(cluster, namespace, LEADER_WORKER_SETS, WARM), 60, what="the LWS Ready")
        assert kinds(cluster, namespace) == {"Deployment", "LeaderWorkerSet"}
        second: Operator = operators.start(namespace, name="second")
        live = eventually(lambda: settled_as(cluster, namespace, "LeaderWorkerSet"), 90, what="the switch")
        time.sleep(2)  # the watches catch up with the last changes
    finally:
        watches.stop()

    lowest_pods, lowest_endpoints = switch.lowest_serving()
    assert lowest_pods >= WARM, f"the front door had {lowest_pods} serving pod(s) at some moment"
    assert lowest_endpoints >= 1, "the tier's Service had no ready endpoint at some moment"
    # Both kinds served: the pods recorded include Deployment pods and LeaderWorkerSet leaders.
    pods = switch.pods.initial + [pod for _, _, pod in switch.pods.events]
    owners = {o["kind"] for pod in pods for o in pod["metadata"].get("ownerReferences") or []}
    assert owners >= {"ReplicaSet", "StatefulSet"}, owners

    # Status showed the switch while it ran, then the LeaderWorkerSet alone.
    assert {"kind": "Deployment", "ready": WARM, "needed": WARM} in replacing(switch.statuses())
    entry = next(e for e in live["status"]["replicas"] if e["tier"] == TIER)
    assert entry == {"tier": TIER, "desired": WARM, "ready": WARM}

    reasons = events(cluster, namespace)
    replaced = [message for reason, message in reasons if reason == "TierReplaced"]
    assert replaced == [
        f"tier {TIER} moves from Deployment to LeaderWorkerSet; the Deployment keeps serving until the "
        f"LeaderWorkerSet has {WARM} Ready replica(s)",
        f"tier {TIER} moved from Deployment to LeaderWorkerSet: the LeaderWorkerSet has {WARM}/{WARM} "
        "Ready replica(s); the Deployment was removed",
    ], reasons
    assert not [r for r in reasons if r[0] == "TierPruned"], reasons
    assert second.alive()


def test_leader_worker_set_to_deployment_serves_throughout(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    cluster.apply([service(namespace, multi_node=True)])
    eventually(lambda: settled_as(cluster, namespace, "LeaderWorkerSet"), 120, what="the LWS serving")

    watches, switch = record(cluster, namespace)
    try:
        cluster.apply([service(namespace, multi_node=False)])
        eventually(lambda: settled_as(cluster, namespace, "Deployment"), 90, what="the switch")
        time.sleep(2)
    finally:
        watches.stop()

    lowest_pods, lowest_endpoints = switch.lowest_serving()
    assert lowest_pods >= WARM, f"the front door had {lowest_pods} serving pod(s) at some moment"
    assert lowest_endpoints >= 1, "the tier's Service had no ready endpoint at some moment"
    assert {"kind": "LeaderWorkerSet", "ready": WARM, "needed": WARM} in replacing(switch.statuses())
    reasons = events(cluster, namespace)
    replaced = [message for reason, message in reasons if reason == "TierReplaced"]
    assert replaced == [
        f"tier {TIER} moves from LeaderWorkerSet to Deployment; the LeaderWorkerSet keeps serving until the "
        f"Deployment has {WARM} Ready replica(s)",
        f"tier {TIER} moved from LeaderWorkerSet to Deployment: the Deployment has {WARM}/{WARM} Ready "
        "replica(s); the LeaderWorkerSet was removed",
    ], reasons
    assert not [r for r in reasons if r[0] == "TierPruned"], reasons


def _has(cluster: Cluster, namespace: str, kind: str) -> None:
    assert kind in kinds(cluster, namespace)


def _shows_replacing(cluster: Cluster, namespace: str) -> None:
    status = cluster.service(namespace, NAME).get("status") or {}
    assert replacing([status]), status


def _announced(cluster: Cluster, namespace: str) -> None:
    found = events(cluster, namespace)
    assert any(reason == "TierReplaced" for reason, _ in found), found


def _ready(cluster: Cluster, namespace: str, path: str, count: int) -> None:
    (workload,) = [o for o in cluster.list(path, namespace) if o["metadata"]["name"] == WORKLOAD]
    assert (workload.get("status") or {}).get("readyReplicas") == count, workload.get("status")
