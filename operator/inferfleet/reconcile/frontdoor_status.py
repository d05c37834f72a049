"""`status.frontDoor`: whether clients can reach the service through its front door (pure).

From what one reconcile pass saw: the HTTPRoute's status as the Gateway's controller
wrote it (Accepted for our Gateway, or not, or not yet), whether another route on the
same Gateway takes requests our match covers (Shadowed), each InferencePool's Ready
endpoints (the serving pods its selector matches, Ready and not terminating: what the
endpoint picker can choose from), and whether each pool's picker is up. `kubectl get
ifs` and the Argo CD health check read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.api import InferenceService, labels
from inferfleet.config import OperatorSettings
from inferfleet.design import topology
from inferfleet.kubedata import labels_of, matches, ready_replicas_of
from inferfleet.reconcile.status_rules import set_condition
from inferfleet.render import frontdoor
from inferfleet.render import route_matching as routes

ROUTE_ACCEPTED = "Accepted"
ROUTE_NOT_ACCEPTED = "NotAccepted"
ROUTE_PENDING = "Pending"  # no Gateway controller has answered yet
ROUTE_MISSING = "Missing"  # not in the cluster (yet, or its CRD is not installed)
ROUTE_NONE = "None"  # service mode: no route by design
# Another route on the Gateway takes requests our match covers (render.route_matching): whatever
# the Gateway's controller says, some of this service's clients reach someone else.
ROUTE_SHADOWED = "Shadowed"
REASON_ROUTE_SHADOWED = "RouteShadowed"
# How many shadowing routes status names (the message says how many more).
SHADOWS_LISTED = 10


def pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _find(objects: Sequence[Mapping[str, Any]], kind: str, name: str) -> Mapping[str, Any] | None:
    return next(
        (o for o in objects if o.get("kind") == kind and (o.get("metadata") or {}).get("name") == name), None
    )


def route_state(
    route: Mapping[str, Any] | None, gateway: topology.Gateway, namespace: str
) -> tuple[str, str]:
    """(state, message) of the route on our Gateway, from the route's status.parents."""
    if route is None:
        return ROUTE_MISSING, "the HTTPRoute is not in the cluster (are the Gateway API CRDs installed?)"
    want_namespace = gateway.namespace or namespace
    for parent in (route.get("status") or {}).get("parents") or []:
        ref = parent.get("parentRef") or {}
        if ref.get("name") != gateway.name or (ref.get("namespace") or namespace) != want_namespace:
            continue
        accepted = next((c for c in parent.get("conditions") or [] if c.get("type") == "Accepted"), None)
        if accepted is None:
            continue
        words = f"{accepted.get('reason', '')}: {accepted.get('message', '')}".strip(": ")
        if accepted.get("status") == "True":
            return ROUTE_ACCEPTED, words
        return ROUTE_NOT_ACCEPTED, words or "the Gateway did not accept the route"
    return (
        ROUTE_PENDING,
        f"no controller of Gateway {want_namespace}/{gateway.name} has accepted the route yet",
    )


def gateway_key(service: InferenceService, gateway: topology.Gateway) -> tuple[str, str]:
    """(namespace, name) of the Gateway, the service's own namespace when unnamed."""
    return gateway.namespace or service.namespace, gateway.name


def our_route(
    service: InferenceService,
    front: topology.FrontDoor,
    settings: OperatorSettings,
    live: Mapping[str, Any] | None,
    now: str,
) -> routes.Route:
    """Our HTTPRoute as it competes on the Gateway: the match we render, and its age (the
    live route's, or this pass's instant for one not created yet)."""
    shape = frontdoor.route_shape(service, settings)
    created = str(((live or {}).get("metadata") or {}).get("creationTimestamp") or now)
    section = front.gateway.section_name if front.gateway is not None else None
    return routes.Route(
        namespace=service.namespace,
        name=frontdoor.route_name(service),
        created=created,
        hostnames=shape.hostnames,
        matches=tuple(routes.request_match(match) for match in shape.matches),
        sections=frozenset({section}) if section else None,
    )


def shadows(
    service: InferenceService,
    front: topology.FrontDoor,
    settings: OperatorSettings,
    live: Mapping[str, Any] | None,
    *,
    gateway_routes: Sequence[routes.Observed],
    now: str,
) -> list[routes.Shadow]:
    """Every other route on our Gateway (any tenant's, hand-made or another service's)
    that takes requests our route's match covers, oldest first."""
    if front.mode != "gateway" or front.gateway is None:
        return []
    namespace, name = gateway_key(service, front.gateway)
    ours = our_route(service, front, settings, live, now)
    others = (routes.on_gateway(route, namespace, name) for route in gateway_routes)
    return routes.shadowing(ours, [other for other in others if other is not None])


def shadow_words(found: Sequence[routes.Shadow]) -> str:
    first = found[0]
    more = f" (and {len(found) - 1} more route(s): {', '.join(s.route for s in found[1:SHADOWS_LISTED])})"
    return (
        f"HTTPRoute {first.route} on the same Gateway takes requests this service's route covers: "
        f"{first.reason}{more if len(found) > 1 else ''}; its owner must narrow it, or the platform "
        "team remove it (the Gateway API gives each request to one route)"
    )


def degraded_when_shadowed(
    status: Mapping[str, Any],
    previous: Mapping[str, Any],
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The conditions with Degraded=True (RouteShadowed) when the route is shadowed and
    nothing worse is Degraded already; its transition time is the previous pass's when it
    was already True, so a pass that changes nothing writes nothing."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    front = status.get("frontDoor") or {}
    degraded = next((c for c in conditions if c.get("type") == labels.CONDITION_DEGRADED), None)
    if front.get("route") != ROUTE_SHADOWED or (degraded is not None and degraded.get("status") == "True"):
        return conditions
    before = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == labels.CONDITION_DEGRADED), None
    )
    if before is not None:
        conditions = [dict(before) if c.get("type") == labels.CONDITION_DEGRADED else c for c in conditions]
    message = f"front door: {front.get('routeMessage', '')}"
    return set_condition(
        conditions,
        labels.CONDITION_DEGRADED,
        "True",
        REASON_ROUTE_SHADOWED,
        message,
        now=now,
        generation=generation,
    )


def summarize(
    service: InferenceService,
    front: topology.FrontDoor,
    objects: Sequence[Mapping[str, Any]],
    serving_pods: Sequence[Mapping[str, Any]],
    shadowed_by: Sequence[routes.Shadow] = (),
) -> dict[str, Any]:
    """The wire form of status.frontDoor."""
    if front.mode != "gateway" or front.gateway is None:
        # Every key, always: status is written as a merge patch, which would keep a key
        # this pass leaves out.
        return {
            "mode": "service",
            "gateway": "",
            "route": ROUTE_NONE,
            "routeMessage": "",
            "shadowedBy": [],
            "endpoints": sum(map(pod_ready, serving_pods)),
            "pools": [],
        }
    ready = [pod for pod in serving_pods if pod_ready(pod)]
    pools = []
    endpoints: set[str] = set()
    for pool in front.pools:
        selector = frontdoor.pool_selector(service, pool)
        members = [pod for pod in ready if matches(selector, labels_of(pod))]
        endpoints.update(str((pod.get("metadata") or {}).get("name")) for pod in members)
        entry: dict[str, Any] = {
            "name": pool.name,
            "tiers": list(pool.tiers),
            "endpoints": len(members),
            "holdSeconds": pool.hold_s,
        }
        if front.picker is None:
            picker = _find(objects, "Deployment", frontdoor.picker_name(pool))
            entry["pickerReady"] = picker is not None and ready_replicas_of(picker) > 0
        pools.append(entry)
    state, message = route_state(
        _find(objects, "HTTPRoute", frontdoor.route_name(service)), front.gateway, service.namespace
    )
    if shadowed_by and state != ROUTE_NOT_ACCEPTED:
        # Accepted or not yet answered, the route still loses these requests.
        state, message = ROUTE_SHADOWED, shadow_words(shadowed_by)
    gateway = "/".join(gateway_key(service, front.gateway))
    return {
        "mode": "gateway",
        "gateway": gateway,
        "route": state,
        "routeMessage": message[:1024],
        "shadowedBy": [shadow.route for shadow in shadowed_by[:SHADOWS_LISTED]],
        "endpoints": len(endpoints),
        "pools": pools,
    }
