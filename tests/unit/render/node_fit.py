"""Does a rendered pod spec fit a node? The scheduler's filters that placement depends on.

A small, pure re-statement of kube-scheduler's NodeAffinity (nodeSelector plus required
node affinity: In, NotIn, Exists, DoesNotExist, Gt, Lt, matchFields on metadata.name),
TaintToleration (NoSchedule and NoExecute taints need a matching toleration) and
NodeResourcesFit for extended resources (a GPU limit needs that many allocatable). It
knows nothing about inferfleet, so tests can hold the renderer to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Resources every node has; only extended resources (vendor-domain/name) are checked.
_NATIVE = ("cpu", "memory", "ephemeral-storage", "hugepages-")


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    # What the node really is, for expectations: its catalog GPU and whether it is spot.
    gpu: str | None = None
    spot: bool = False


def _requirement_holds(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = requirement["key"], requirement["operator"]
    values = list(requirement.get("values") or [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    raise ValueError(f"unknown node selector operator {operator!r}")


def _term_holds(term: Mapping[str, Any], node: Node) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(_requirement_holds(e, node.labels) for e in expressions) and all(
        _requirement_holds(f, {"metadata.name": node.name}) for f in fields
    )


def affinity_fits(pod: Mapping[str, Any], node: Node) -> bool:
    selector = pod.get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return False
    node_affinity = (pod.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(_term_holds(term, node) for term in required.get("nodeSelectorTerms") or [])


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    operator = toleration.get("operator", "Equal")
    if not toleration.get("key"):
        return operator == "Exists"  # an empty key with Exists tolerates everything
    if toleration["key"] != taint["key"]:
        return False
    return operator == "Exists" or toleration.get("value", "") == taint.get("value", "")


def taints_tolerated(pod: Mapping[str, Any], node: Node) -> bool:
    tolerations = pod.get("tolerations") or []
    return all(
        any(_tolerates(t, taint) for t in tolerations)
        for taint in node.taints
        if taint["effect"] in ("NoSchedule", "NoExecute")
    )


def _extended(resources: Mapping[str, Any]) -> dict[str, int]:
    limits = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return {
        name: int(value) for name, value in limits.items() if "/" in name and not name.startswith(_NATIVE)
    }


def resources_fit(pod: Mapping[str, Any], node: Node) -> bool:
    needed: dict[str, int] = {}
    for container in pod.get("containers") or []:
        for name, count in _extended(container.get("resources") or {}).items():
            needed[name] = needed.get(name, 0) + count
    for container in pod.get("initContainers") or []:  # init containers run one at a time
        for name, count in _extended(container.get("resources") or {}).items():
            needed[name] = max(needed.get(name, 0), count)
    return all(node.allocatable.get(name, 0) >= count for name, count in needed.items())


def fits(pod: Mapping[str, Any], node: Node, *, check_resources: bool = True) -> bool:
    """Whether the scheduler could place this pod spec on this (empty) node."""
    return (
        affinity_fits(pod, node)
        and taints_tolerated(pod, node)
        and (not check_resources or resources_fit(pod, node))
    )
