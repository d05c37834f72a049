"""Three teams on one shared Gateway object, on the real API server with the real operator.

Team A and team B each serve a model called `chat` on the platform's Gateway; team C,
which may create HTTPRoutes in its own namespace, writes one that copies what team A's
route will match, before team A deploys (so it is the older route, which the Gateway API
prefers on a tie). The operator must give A and B matches of their own, report C's copy
in A's status (route Shadowed, Degraded=RouteShadowed, a Warning Event naming it), leave
B alone, and refuse a spec of A's that names a Gateway in B's namespace (the settings do
not allow it). No Gateway controller runs here, so routes stay Pending: this tests what
the operator decides, not what a data plane does with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Operators
from tests.e2e.harness import NAMESPACE_LABEL, Cluster, conditions, controlplane, eventually
from tests.e2e.spec import gpu_service

ROUTES = "gateway.networking.k8s.io/v1/httproutes"
GATEWAY_CRD = ("sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_gateways.yaml")
NAME = "chat"
TIERS = [
    {
        "name": "l4",
        "gpu": "L4",
        "gpusPerNode": 1,
        "minReplicas": 1,
        "maxReplicas": 2,
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    }
]


@pytest.fixture
def teams(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    """Team A (the test's namespace), team B, team C (the attacker) and the platform's
    Gateway namespace; the extra ones are removed at the end."""
    suffix = uuid.uuid4().hex[:5]
    extra = {"b": f"e2e-tenant-b-{suffix}", "c": f"e2e-tenant-c-{suffix}", "gw": f"e2e-gateways-{suffix}"}
    for created in extra.values():
        cluster.kubectl("create", "namespace", created)
        cluster.kubectl("label", "namespace", created, f"{NAMESPACE_LABEL}=true")
    try:
        yield {"a": namespace, **extra}
    finally:
        for created in extra.values():
            cluster.kubectl("delete", "namespace", created, "--wait=false", check=False)


def shared_gateway(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shared", "namespace": namespace},
        "spec": {
            "gatewayClassName": "platform",
            "listeners": [
                {
                    "name": "http",
                    "protocol": "HTTP",
                    "port": 80,
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                }
            ],
        },
    }


def stolen_route(namespace: str, gateway_namespace: str, victim_prefix: str) -> dict[str, Any]:
    """All a tenant needs to capture another's prompts on a shared Gateway: the same match."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "steal", "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": "shared", "namespace": gateway_namespace}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": victim_prefix}}],
                    "backendRefs": [{"name": "collector", "port": 80}],
                }
            ],
        },
    }


def route_of(cluster: Cluster, namespace: str, name: str = NAME) -> dict[str, Any]:
    found = [r for r in cluster.list(ROUTES, namespace) if r["metadata"]["name"] == name]
    assert found, f"no HTTPRoute {namespace}/{name} yet"
    return found[0]


def test_tenants_on_one_gateway_get_their_own_match_and_a_copy_is_reported(
    cluster: Cluster, teams: dict[str, str], operators: Operators
) -> None:
    a, b, c, gw = teams["a"], teams["b"], teams["c"], teams["gw"]
    controlplane.install_crds(cluster.kubectl, [controlplane.module_dir(GATEWAY_CRD[0]) / GATEWAY_CRD[1]])
    cluster.apply([shared_gateway(gw)], manager="platform")
    # Team C's copy comes first: on a tie of matches the older route takes the requests.
    cluster.apply([stolen_route(c, gw, f"/{a}/{NAME}")], manager="tenant-c")
    time.sleep(1.5)  # creationTimestamp has whole seconds: C's route is strictly older
    operators.start(
        a,
        namespaces=(a, b, c),
        env={"INFERFLEET_GATEWAY_NAME": "shared", "INFERFLEET_GATEWAY_NAMESPACE": gw},
    )
    cluster.apply([gpu_service(NAME, team, TIERS, cache={"mode": "none"}) for team in (a, b)])

    # A match of its own for each, on the one Gateway.
    for team in (a, b):
        route = eventually(lambda team=team: route_of(cluster, team), 90, what=f"the route of {team}")
        assert route["spec"]["parentRefs"] == [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "shared", "namespace": gw}
        ]
        (rule,) = route["spec"]["rules"]
        assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{team}/{NAME}"}}]
        assert rule["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] == "/"

    def shadowed() -> dict[str, Any]:
        body = cluster.service(a, NAME)
        front = (body.get("status") or {}).get("frontDoor") or {}
        assert front.get("route") == "Shadowed", front
        return body

    body = eventually(shadowed, 90, what="team A's route reported as shadowed")
    front = body["status"]["frontDoor"]
    assert front["shadowedBy"] == [f"{c}/steal"], front
    assert f"{c}/steal" in front["routeMessage"] and "older" in front["routeMessage"], front
    degraded = conditions(body)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "RouteShadowed"), degraded
    assert f"{c}/steal" in degraded["message"]

    def warned() -> None:
        events = [e for e in cluster.list("v1/events", a) if e.get("reason") == "RouteShadowed"]
        assert events and events[0]["type"] == "Warning" and f"{c}/steal" in events[0]["message"], events

    eventually(warned, 30, what="a RouteShadowed event in team A's namespace")

    # Team B is served on its own match; C's copy of A's does not touch it.
    def b_settled() -> dict[str, Any]:
        body_b = cluster.service(b, NAME)
        front_b = (body_b.get("status") or {}).get("frontDoor") or {}
        assert (front_b.get("route"), front_b.get("shadowedBy")) == ("Pending", []), front_b
        return body_b

    body_b = eventually(b_settled, 60, what="team B's front door")
    assert conditions(body_b)["Degraded"]["status"] == "False"

    # A Gateway in another team's namespace is not A's to attach to.
    sneaky = gpu_service("sneaky", a, TIERS, cache={"mode": "none"})
    sneaky["spec"]["frontDoor"] = {"gateway": {"name": "private", "namespace": b}}
    cluster.apply([sneaky])

    def refused() -> dict[str, Any]:
        planned = conditions(cluster.service(a, "sneaky")).get("Planned") or {}
        assert (planned.get("status"), planned.get("reason")) == ("False", "InvalidSpec"), planned
        return planned

    planned = eventually(refused, 60, what="the spec naming another team's Gateway refused")
    assert "spec.frontDoor.gateway" in planned["message"] and f"{b}/private" in planned["message"], planned
    assert not [r for r in cluster.list(ROUTES, a) if r["metadata"]["name"] == "sneaky"]
    assert not [
        d for d in cluster.list("apps/v1/deployments", a) if d["metadata"]["name"].startswith("sneaky")
    ]


def test_in_model_mode_a_second_service_claiming_a_served_name_is_reported(
    cluster: Cluster, teams: dict[str, str], operators: Operators
) -> None:
    """`model` matches are first come, first served: the later service is told so, by
    name, and the earlier one keeps its requests."""
    a, b, gw = teams["a"], teams["b"], teams["gw"]
    operators.start(
        a,
        namespaces=(a, b),
        env={
            "INFERFLEET_GATEWAY_NAME": "shared",
            "INFERFLEET_GATEWAY_NAMESPACE": gw,
            "INFERFLEET_FRONT_DOOR_MATCH": "model",
        },
    )
    cluster.apply([gpu_service(NAME, a, TIERS, cache={"mode": "none"})])
    first = eventually(lambda: route_of(cluster, a), 90, what="team A's route")
    header = {"type": "Exact", "name": "X-Gateway-Model-Name", "value": "meta-llama/Llama-3.1-8B-Instruct"}
    assert first["spec"]["rules"][0]["matches"] == [
        {"path": {"type": "PathPrefix", "value": "/"}, "headers": [header]}
    ]
    time.sleep(1.5)  # whole seconds: B's route is strictly younger
    cluster.apply([gpu_service(NAME, b, TIERS, cache={"mode": "none"})])

    def b_shadowed() -> dict[str, Any]:
        front = (cluster.service(b, NAME).get("status") or {}).get("frontDoor") or {}
        assert front.get("route") == "Shadowed" and front.get("shadowedBy") == [f"{a}/{NAME}"], front
        return front

    eventually(b_shadowed, 90, what="team B's route reported as shadowed by team A's")

    def a_keeps_its_requests() -> None:
        body = cluster.service(a, NAME)
        front = (body.get("status") or {}).get("frontDoor") or {}
        assert (front.get("route"), front.get("shadowedBy")) == ("Pending", []), front
        assert conditions(body)["Degraded"]["status"] == "False"

    # A pass of A's once the operator's route list (10 s) holds B's route: B's younger
    # copy takes nothing of A's. (A changed annotation triggers the pass.)
    time.sleep(11)
    cluster.kubectl("annotate", "inferenceservice", NAME, "-n", a, "e2e/poke=1")
    time.sleep(5)
    eventually(a_keeps_its_requests, 30, what="team A unaffected")
