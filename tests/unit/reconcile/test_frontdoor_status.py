"""status.frontDoor through real reconcile passes on the in-memory cluster."""

from __future__ import annotations

from typing import Any

from inferfleet.api import labels
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile import frontdoor_status
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

ROUTE = ObjectRef("gateway.networking.k8s.io/v1", "HTTPRoute", NAMESPACE, NAME)
GATEWAY = {
    "group": "gateway.networking.k8s.io",
    "kind": "Gateway",
    "name": "inference-gateway",
    "namespace": "ml-serving",
}


def created() -> Control:
    control = Control()
    control.submit(example())
    control.reconcile()
    return control


def add_pod(control: Control, tier: str, index: int, *, ready: bool) -> None:
    template = control.workloads()[tier]["spec"]["template"]
    name = f"{NAME}-{tier}-pod{index}"
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "labels": template["metadata"]["labels"],
    }
    control.cluster.user_apply({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {}})
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    ref = ObjectRef("v1", "Pod", NAMESPACE, name)
    control.cluster.set_status(ref, status)


def answer(control: Control, accepted: str, reason: str, message: str, parent: dict[str, str]) -> None:
    control.cluster.set_status(
        ROUTE,
        {
            "parents": [
                {
                    "parentRef": parent,
                    "controllerName": "example.net/gateway",
                    "conditions": [
                        {
                            "type": "Accepted",
                            "status": accepted,
                            "reason": reason,
                            "message": message,
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                }
            ]
        },
    )


def test_endpoints_count_the_ready_serving_pods_of_every_tier() -> None:
    control = created()
    add_pod(control, "l4", 0, ready=True)
    add_pod(control, "l4", 1, ready=False)
    add_pod(control, "a100-burst", 0, ready=True)
    control.reconcile()
    front = control.status()["frontDoor"]
    assert front["endpoints"] == 2
    assert front["pools"][0]["endpoints"] == 2


def test_route_state_follows_what_the_gateway_controller_wrote() -> None:
    control = created()
    assert control.status()["frontDoor"]["route"] == frontdoor_status.ROUTE_PENDING
    answer(control, "False", "NotAllowedByListeners", "no listener allows ml-serving", GATEWAY)
    control.reconcile()
    front = control.status()["frontDoor"]
    assert front["route"] == frontdoor_status.ROUTE_NOT_ACCEPTED
    assert "NotAllowedByListeners" in front["routeMessage"]
    answer(control, "True", "Accepted", "Route is accepted", GATEWAY)
    control.reconcile()
    assert control.status()["frontDoor"]["route"] == frontdoor_status.ROUTE_ACCEPTED


def test_an_answer_about_another_gateway_is_not_ours() -> None:
    control = created()
    answer(control, "True", "Accepted", "ok", {**GATEWAY, "name": "someone-elses"})
    control.reconcile()
    assert control.status()["frontDoor"]["route"] == frontdoor_status.ROUTE_PENDING


def test_without_the_gateway_crds_the_service_is_served_and_degraded_says_why() -> None:
    control = Control()
    control.cluster.served -= {
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("inference.networking.k8s.io/v1", "InferencePool"),
    }
    control.submit(example())
    control.reconcile()
    degraded = control.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", labels.REASON_FRONT_DOOR_UNAVAILABLE)
    assert "HTTPRoute" in degraded["message"] and "InferencePool" in degraded["message"]
    assert set(control.workloads()) == {"l4", "a100-burst"}  # the tiers are deployed all the same
    assert control.status()["frontDoor"]["route"] == frontdoor_status.ROUTE_MISSING


def test_switching_to_service_mode_prunes_the_front_door() -> None:
    control = created()
    control.edit(
        lambda body: (
            body["spec"].update(frontDoor={"mode": "service"})
            or body["spec"]["scaling"].update(allowScaleToZero=False)
            or [tier.update(minReplicas=max(1, tier["minReplicas"])) for tier in body["spec"]["tiers"]]
        )
    )
    control.reconcile()
    kinds = {ref.kind for ref in control.cluster.objects}
    assert not kinds & {"InferencePool", "HTTPRoute", "Role", "RoleBinding", "ServiceAccount"}
    assert control.status()["frontDoor"] == {
        "mode": "service",
        "gateway": "",
        "route": "None",
        "routeMessage": "",
        "shadowedBy": [],
        "endpoints": 0,
        "pools": [],
    }


def test_a_terminating_pod_is_no_endpoint() -> None:
    ready = {"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    leaving = {**ready, "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert frontdoor_status.pod_ready(ready) and not frontdoor_status.pod_ready(leaving)
    assert not frontdoor_status.pod_ready({"metadata": {"name": "p"}})
