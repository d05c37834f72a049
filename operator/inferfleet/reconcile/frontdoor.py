"""`status.frontDoor`: whether clients can reach the service through its front door (pure).

From what one reconcile pass saw: the HTTPRoute's status as the Gateway's controller
wrote it (Accepted for our Gateway, or not, or not yet), each InferencePool's Ready
endpoints (the serving pods its selector matches, Ready and not terminating: what the
endpoint picker can choose from), and whether each pool's picker is up. `kubectl get
ifs` and the Argo CD health check read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.api import InferenceService
from inferfleet.kubedata import labels_of, matches, ready_replicas_of
from inferfleet.render import frontdoor

ROUTE_ACCEPTED = "Accepted"
ROUTE_NOT_ACCEPTED = "NotAccepted"
ROUTE_PENDING = "Pending"  # no Gateway controller has answered yet
ROUTE_MISSING = "Missing"  # not in the cluster (yet, or its CRD is not installed)
ROUTE_NONE = "None"  # service mode: no route by design


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
    route: Mapping[str, Any] | None, gateway: frontdoor.Gateway, namespace: str
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


def summarize(
    service: InferenceService,
    front: frontdoor.FrontDoor,
    objects: Sequence[Mapping[str, Any]],
    serving_pods: Sequence[Mapping[str, Any]],
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
    gateway = f"{front.gateway.namespace or service.namespace}/{front.gateway.name}"
    return {
        "mode": "gateway",
        "gateway": gateway,
        "route": state,
        "routeMessage": message[:1024],
        "endpoints": len(endpoints),
        "pools": pools,
    }
