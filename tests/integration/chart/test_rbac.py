"""The chart's RBAC rules are exactly the API calls the operator makes.

`inferfleet.cluster.API_CALLS` is derived from the cluster port's access table (every
call the code makes goes through it) plus kopf's own calls. The chart grants exactly
that set; the only calls it leaves out are the peering kinds of the mode not in use
(no peering object at all with one replica).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from inferfleet.cluster import API_CALLS
from tests.integration.chart.helmchart import NAMESPACE, by_kind, render

pytestmark = pytest.mark.integration

Call = tuple[str, str, str]  # (apiGroup, resource, verb)

# Resources without a namespace: they can only be granted by a ClusterRole.
CLUSTER_SCOPED = {
    ("", "namespaces"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("kopf.dev", "clusterkopfpeerings"),
}
CLUSTER_PEERING = ("kopf.dev", "clusterkopfpeerings")
NAMESPACED_PEERING = ("kopf.dev", "kopfpeerings")
WATCHED = ["ml-serving", "ml-batch"]


def expand(calls: Iterable[Any]) -> set[Call]:
    return {(c.api_group, c.resource, verb) for c in calls for verb in c.verbs}


def rule_calls(rules: list[dict[str, Any]]) -> set[Call]:
    out: set[Call] = set()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def without(calls: set[Call], *resources: tuple[str, str]) -> set[Call]:
    return {c for c in calls if (c[0], c[1]) not in resources}


EXPECTED = expand(API_CALLS)


def test_api_calls_name_no_wildcards() -> None:
    assert EXPECTED and all("*" not in part for call in EXPECTED for part in call)


@pytest.mark.parametrize("values", [None, {"replicaCount": 2, "watchNamespaces": WATCHED}])
def test_operator_can_never_read_secrets(values: dict[str, Any] | None) -> None:
    """Model credentials reach pods as secret references; the operator itself reads none."""
    objects = render(values)
    for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role"):
        assert not {r for _, r, _ in rule_calls(role["rules"])} & {"secrets", "configmaps"}


@pytest.mark.parametrize(
    ("values", "unused"),
    [
        (None, [CLUSTER_PEERING, NAMESPACED_PEERING]),
        ({"replicaCount": 2}, [NAMESPACED_PEERING]),
    ],
    ids=["standalone", "peering"],
)
def test_cluster_mode_grants_exactly_the_api_calls(
    values: dict[str, Any] | None, unused: list[tuple[str, str]]
) -> None:
    objects = render(values)
    assert by_kind(objects, "Role") == [] and by_kind(objects, "RoleBinding") == []
    (role,) = by_kind(objects, "ClusterRole")
    assert rule_calls(role["rules"]) == without(EXPECTED, *unused)
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    (account,) = by_kind(objects, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]


@pytest.mark.parametrize(
    ("replicas", "unused"),
    [(1, [CLUSTER_PEERING, NAMESPACED_PEERING]), (2, [CLUSTER_PEERING])],
    ids=["standalone", "peering"],
)
def test_namespaced_mode_grants_roles_only_in_watched_namespaces(
    replicas: int, unused: list[tuple[str, str]]
) -> None:
    objects = render({"replicaCount": replicas, "watchNamespaces": WATCHED})
    expected = without(EXPECTED, *unused)
    (cluster_role,) = by_kind(objects, "ClusterRole")
    cluster_calls = rule_calls(cluster_role["rules"])
    # Only cluster-scoped resources stay cluster-wide.
    assert {(g, r) for g, r, _ in cluster_calls} <= CLUSTER_SCOPED
    roles = by_kind(objects, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(WATCHED)
    for role in roles:
        namespaced_calls = rule_calls(role["rules"])
        assert not {(g, r) for g, r, _ in namespaced_calls} & CLUSTER_SCOPED
        assert namespaced_calls | cluster_calls == expected
    bindings = by_kind(objects, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(WATCHED)
    for binding in bindings:
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"][0]["namespace"] == NAMESPACE


def test_rbac_can_be_left_to_the_platform_team() -> None:
    account = {"create": False, "name": "preprovisioned"}
    objects = render({"rbac": {"create": False}, "serviceAccount": account})
    assert not {o["kind"] for o in objects} & {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    assert by_kind(objects, "ServiceAccount") == []
    pod = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "preprovisioned"
