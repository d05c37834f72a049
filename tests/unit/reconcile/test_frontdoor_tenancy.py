"""Tenants on one shared Gateway, through the real reconciler on the in-memory cluster.

Two teams serve a model of the same name on the platform's Gateway; a third team, which
may create HTTPRoutes in its own namespace only, copies the victim's match to capture its
prompts. The operator gives each service a match of its own, reports the copy in the
victim's status (route Shadowed, Degraded=RouteShadowed, a Warning Event naming it), and
refuses a spec naming a Gateway in a namespace the platform has not allowed.
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
import yaml
from typer.testing import CliRunner

from inferfleet import admission_handlers, handlers
from inferfleet.api import labels
from inferfleet.cli import app
from inferfleet.cli import schema as schema_cli  # noqa: F401 - registers `validate`
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.controller.reconciler import Reconciler, cr_ref
from inferfleet.controller.routes import GatewayRoutes
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile import frontdoor_status
from tests.unit.reconcile.fixtures import FakeClock, example

SHARED = OperatorSettings(gateway_name="shared", gateway_namespace="gateway-system")
NAME = "llama-8b-chat"
ROUTES = "gateway.networking.k8s.io/v1"


def route_ref(namespace: str, name: str = NAME) -> ObjectRef:
    return ObjectRef(ROUTES, "HTTPRoute", namespace, name)


def tenant_service(namespace: str, gateway: dict[str, str] | None = None) -> dict[str, Any]:
    body = example()
    body["metadata"]["namespace"] = namespace
    body["spec"]["frontDoor"] = {"gateway": gateway} if gateway else {}
    return body


class Platform:
    """One operator on one cluster; its route list is never stale (max age 0)."""

    def __init__(self, settings: OperatorSettings = SHARED) -> None:
        self.cluster = InMemoryCluster()
        self.settings = settings
        routes = GatewayRoutes(self.cluster, settings.namespaces, max_age_s=0)
        self.reconciler = Reconciler(self.cluster, settings, FakeClock(), routes=routes)

    def deploy(self, namespace: str, gateway: dict[str, str] | None = None) -> None:
        self.cluster.user_apply(tenant_service(namespace, gateway), manager="kubectl")
        self.reconciler.reconcile(namespace, NAME)

    def status(self, namespace: str) -> dict[str, Any]:
        found = self.cluster.get(cr_ref(namespace, NAME))
        assert found is not None
        return dict(found.get("status") or {})

    def condition(self, namespace: str, type_: str) -> dict[str, Any]:
        return next(c for c in self.status(namespace)["conditions"] if c["type"] == type_)


def copy_of(route: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """What a tenant can write in its own namespace: the victim's parent and match."""
    return {
        "apiVersion": ROUTES,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": copy.deepcopy(route["spec"]["parentRefs"]),
            "rules": [
                {
                    "matches": copy.deepcopy(route["spec"]["rules"][0]["matches"]),
                    "backendRefs": [{"name": "collector", "port": 8080}],
                }
            ],
        },
    }


def test_two_tenants_on_one_gateway_get_matches_of_their_own() -> None:
    platform = Platform()
    platform.deploy("team-a")
    platform.deploy("team-b")
    for team in ("team-a", "team-b"):
        route = platform.cluster.objects[route_ref(team)]
        assert route["spec"]["parentRefs"] == [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": "shared",
                "namespace": "gateway-system",
            }
        ]
        (rule,) = route["spec"]["rules"]
        assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{team}/{NAME}"}}]
        platform.reconciler.reconcile(team, NAME)  # each now sees the other's route
        front = platform.status(team)["frontDoor"]
        assert (front["route"], front["shadowedBy"]) == (frontdoor_status.ROUTE_PENDING, []), front
        assert platform.condition(team, "Degraded")["status"] == "False"


def test_a_third_tenants_copy_of_the_victims_match_is_reported_not_accepted_in_silence() -> None:
    platform = Platform()
    platform.deploy("team-a")
    platform.deploy("team-b")
    victim_route = platform.cluster.objects[route_ref("team-a")]
    platform.cluster.user_apply(copy_of(victim_route, "team-c", "steal"), manager="kubectl")
    platform.reconciler.reconcile("team-a", NAME)

    front = platform.status("team-a")["frontDoor"]
    assert front["route"] == frontdoor_status.ROUTE_SHADOWED
    assert front["shadowedBy"] == ["team-c/steal"]
    assert "team-c/steal" in front["routeMessage"]
    degraded = platform.condition("team-a", "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", frontdoor_status.REASON_ROUTE_SHADOWED)
    assert "team-c/steal" in degraded["message"]
    warnings = [e for e in platform.cluster.events if e["reason"] == frontdoor_status.REASON_ROUTE_SHADOWED]
    assert (
        len(warnings) == 1 and warnings[0]["type"] == "Warning" and "team-c/steal" in warnings[0]["message"]
    )
    # The other tenant's route is untouched by the copy.
    platform.reconciler.reconcile("team-b", NAME)
    assert platform.status("team-b")["frontDoor"]["route"] == frontdoor_status.ROUTE_PENDING

    # Still shadowed: a pass writes nothing and announces nothing again.
    before = platform.cluster.get(cr_ref("team-a", NAME))
    platform.reconciler.reconcile("team-a", NAME)
    after = platform.cluster.get(cr_ref("team-a", NAME))
    assert before is not None and after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert (
        len([e for e in platform.cluster.events if e["reason"] == frontdoor_status.REASON_ROUTE_SHADOWED])
        == 1
    )

    # Gone: the condition clears, with a Normal event.
    platform.cluster.user_delete(route_ref("team-c", "steal"))
    platform.reconciler.reconcile("team-a", NAME)
    assert platform.status("team-a")["frontDoor"]["route"] == frontdoor_status.ROUTE_PENDING
    assert platform.condition("team-a", "Degraded")["status"] == "False"


def test_the_gateways_refusal_is_reported_over_a_shadow() -> None:
    platform = Platform()
    platform.deploy("team-a")
    victim_route = platform.cluster.objects[route_ref("team-a")]
    platform.cluster.user_apply(copy_of(victim_route, "team-c", "steal"), manager="kubectl")
    parent = victim_route["spec"]["parentRefs"][0]
    refused = {"type": "Accepted", "status": "False", "reason": "NotAllowedByListeners", "message": "no"}
    platform.cluster.set_status(
        route_ref("team-a"), {"parents": [{"parentRef": parent, "conditions": [refused]}]}
    )
    platform.reconciler.reconcile("team-a", NAME)
    assert platform.status("team-a")["frontDoor"]["route"] == frontdoor_status.ROUTE_NOT_ACCEPTED


def test_a_gateway_in_a_namespace_the_platform_has_not_allowed_is_refused() -> None:
    platform = Platform()
    platform.deploy("team-a", gateway={"name": "private", "namespace": "team-b"})
    planned = platform.condition("team-a", "Planned")
    assert (planned["status"], planned["reason"]) == ("False", labels.REASON_INVALID_SPEC)
    assert "spec.frontDoor.gateway" in planned["message"] and "team-b/private" in planned["message"]
    assert route_ref("team-a") not in platform.cluster.objects
    assert not [ref for ref in platform.cluster.objects if ref.kind == "Deployment"]


@pytest.mark.parametrize(
    ("gateway", "allowed"),
    [
        ({"name": "shared", "namespace": "gateway-system"}, ()),  # the default Gateway, named
        ({"name": "own"}, ()),  # the service's own namespace
        ({"name": "own", "namespace": "team-a"}, ()),
        ({"name": "edge", "namespace": "gateways"}, ("gateways/edge",)),
        ({"name": "any", "namespace": "gateways"}, ("gateways/*",)),
    ],
)
def test_allowed_gateways_are_planned(gateway: dict[str, str], allowed: tuple[str, ...]) -> None:
    platform = Platform(SHARED.model_copy(update={"allowed_gateways": allowed}))
    platform.deploy("team-a", gateway=gateway)
    assert platform.condition("team-a", "Planned")["status"] == "True"
    route = platform.cluster.objects[route_ref("team-a")]
    assert route["spec"]["parentRefs"][0]["name"] == gateway["name"]


def test_the_webhook_and_the_cli_refuse_it_with_the_field_path(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = Platform(SHARED.model_copy(update={"allowed_gateways": ("gateways/edge",)}))
    memo = kopf.Memo(reconciler=platform.reconciler)
    body = tenant_service("team-a", gateway={"name": "other", "namespace": "gateways"})
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=memo, warnings=[])
    assert "spec.frontDoor.gateway" in str(error.value)

    spec_file = tmp_path / "svc.yaml"
    spec_file.write_text(yaml.safe_dump(body))
    monkeypatch.setenv("INFERFLEET_ALLOWED_GATEWAYS", "gateways/edge")
    result = CliRunner().invoke(app, ["validate", "-f", str(spec_file)])
    assert result.exit_code == 2 and "spec.frontDoor.gateway" in result.output, result.output
    monkeypatch.setenv("INFERFLEET_ALLOWED_GATEWAYS", "gateways/*")
    result = CliRunner().invoke(app, ["validate", "-f", str(spec_file)])
    assert result.exit_code == 0, result.output


class CountingCluster(InMemoryCluster):
    def __init__(self) -> None:
        super().__init__()
        self.route_lists = 0

    def list(self, api_version: str, kind: str, namespace: str | None, selector: Any) -> list[dict[str, Any]]:
        if kind == "HTTPRoute" and not selector:
            self.route_lists += 1
        return super().list(api_version, kind, namespace, selector)


def test_one_list_of_routes_serves_every_pass_for_a_while() -> None:
    cluster = CountingCluster()
    now = [0.0]
    routes = GatewayRoutes(cluster, (), max_age_s=10.0, clock=lambda: now[0])
    reconciler = Reconciler(cluster, SHARED, FakeClock(), routes=routes)
    for team in ("team-a", "team-b", "team-c"):
        cluster.user_apply(tenant_service(team), manager="kubectl")
        reconciler.reconcile(team, NAME)
    assert cluster.route_lists == 1
    now[0] = 10.0
    reconciler.reconcile("team-a", NAME)
    assert cluster.route_lists == 2
    # Watched namespaces: one list per namespace, never the whole cluster.
    scoped = GatewayRoutes(cluster, ("team-a", "team-b"), max_age_s=0)
    assert {r.namespace for r in scoped.all()} == {"team-a", "team-b"}


def test_the_operator_reads_routes_where_kopf_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    """`inferfleet run -n a -n b` with namespaced RBAC: a cluster-wide list would be refused."""
    cluster = InMemoryCluster()
    memo = kopf.Memo(settings=SHARED, cluster=cluster, namespaces=("team-a", "team-b"))
    monkeypatch.setattr(handlers.resync.Resync, "start", lambda self: None)
    handlers.configure(settings=kopf.OperatorSettings(), memo=memo)
    reconciler: Reconciler = memo["reconciler"]
    assert reconciler.routes.watched.namespaces == ("team-a", "team-b")
