"""The chart's RBAC rules are exactly the API calls the operator makes.

`inferfleet.cluster.API_CALLS` is derived from the cluster port's access table (every
call the code makes goes through it) plus kopf's own calls. The chart grants exactly
that set; the only calls it leaves out are those of features turned off: with one
replica the leader-election Lease, without the webhook its configuration, without
scaling.podDeletionCost patching pods. kopf runs without its own peering (the Lease is
the one election), so no kopf peering kind is granted in any mode. The Lease lives in
the release namespace, so its rule is a Role there, never a cluster-wide grant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from inferfleet.cluster import API_CALLS
from inferfleet.cluster.access import NAMED_CALLS
from tests.integration.chart.helmchart import NAMESPACE, by_kind, render

pytestmark = pytest.mark.integration

Call = tuple[str, str, str]  # (apiGroup, resource, verb)

# Resources without a namespace: they can only be granted by a ClusterRole.
CLUSTER_SCOPED = {
    ("", "namespaces"),
    ("", "persistentvolumes"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
}
LEASES = ("coordination.k8s.io", "leases")
WATCHED = ["ml-serving", "ml-batch"]
LEADER_ELECTION_ROLE = "inferfleet-leader-election"


def expand(calls: Iterable[Any]) -> set[Call]:
    return {(c.api_group, c.resource, verb) for c in calls for verb in c.verbs}


def rule_calls(rules: list[dict[str, Any]], peering: str = "inferfleet") -> set[Call]:
    """The calls a role's rules allow; every rule narrowed by resourceNames must be one the
    code declares (`access.NAMED_CALLS`), naming exactly the object the code uses."""
    out: set[Call] = set()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        assert "nonResourceURLs" not in rule
        calls = {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        if "resourceNames" in rule:
            for call in calls:
                assert call in NAMED_CALLS, f"resourceNames on a call the code does not name: {call}"
                assert rule["resourceNames"] == [NAMED_CALLS[call].replace("<peering>", peering)]
        out |= calls
    return out


def named_rules(objects: list[dict[str, Any]]) -> set[Call]:
    """Calls granted only by name, over every Role and ClusterRole."""
    found: set[Call] = set()
    for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role"):
        for rule in role["rules"]:
            if "resourceNames" in rule:
                found |= {
                    (g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
                }
    return found


def without(calls: set[Call], *resources: tuple[str, str]) -> set[Call]:
    return {c for c in calls if (c[0], c[1]) not in resources}


def only(calls: set[Call], *resources: tuple[str, str]) -> set[Call]:
    return {c for c in calls if (c[0], c[1]) in resources}


def split_roles(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the leader-election Role, if any; the per-watched-namespace Roles)."""
    roles = by_kind(objects, "Role")
    leader = [r for r in roles if r["metadata"]["name"] == LEADER_ELECTION_ROLE]
    return leader, [r for r in roles if r["metadata"]["name"] != LEADER_ELECTION_ROLE]


def check_leader_election(objects: list[dict[str, Any]], peering: bool) -> set[Call]:
    """The Lease rule: a Role in the release namespace with peering, nothing without."""
    leader, _ = split_roles(objects)
    bindings = [b for b in by_kind(objects, "RoleBinding") if b["metadata"]["name"] == LEADER_ELECTION_ROLE]
    if not peering:
        assert leader == [] and bindings == []
        return set()
    (role,) = leader
    (binding,) = bindings
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": LEADER_ELECTION_ROLE,
    }
    (account,) = by_kind(objects, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    calls = rule_calls(role["rules"])
    assert calls == only(EXPECTED, LEASES)
    # Only create is granted for any Lease; get and update name the one Lease.
    assert only(named_rules(objects), LEASES) == {c for c in calls if c[2] != "create"}
    return calls


EXPECTED = expand(API_CALLS)
WEBHOOK_CONFIGURATIONS = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
PATCH_PODS: Call = ("", "pods", "patch")
# Off by default, so its rule is absent: patch pods (only scaling.podDeletionCost
# annotates pods).
DEFAULT_OFF = {PATCH_PODS}
# What a namespace-only install cannot have: the webhook's configuration is cluster-scoped.
NO_WEBHOOK = {"webhook": {"enabled": False}}


def minus(calls: set[Call], removed: set[Call]) -> set[Call]:
    return calls - removed


def test_api_calls_name_no_wildcards() -> None:
    assert EXPECTED and all("*" not in part for call in EXPECTED for part in call)


@pytest.mark.parametrize(
    "values",
    [
        None,
        {"replicaCount": 2, "watchNamespaces": WATCHED},
        {"watchNamespaces": WATCHED, "rbac": {"namespaceOnly": True}, **NO_WEBHOOK},
        {"serving": {"fetchModelConfig": False}},
    ],
    ids=["cluster-wide", "watched", "namespace-only", "no-model-config"],
)
def test_no_install_mode_grants_any_secret_or_configmap(values: dict[str, Any] | None) -> None:
    """A tenant's credentials reach only the pods that use them (the pre-cache fetcher,
    the serving pods, the config.json probe Job, as mounted Secrets): the operator reads
    no Secret, in any namespace, whatever the values."""
    objects = render(values)
    roles = by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
    assert roles
    for role in roles:
        assert not {resource for _, resource, _ in rule_calls(role["rules"])} & {"secrets", "configmaps"}
    assert not any(call.resource == "secrets" for call in API_CALLS)


@pytest.mark.parametrize(
    ("values", "unused"),
    [
        ({"replicaCount": 1}, [LEASES]),
        (None, []),
    ],
    ids=["standalone", "leader-election"],
)
def test_cluster_mode_grants_exactly_the_api_calls(
    values: dict[str, Any] | None, unused: list[tuple[str, str]]
) -> None:
    objects = render(values)
    leases = check_leader_election(objects, peering=LEASES not in unused)
    assert split_roles(objects)[1] == []
    (role,) = by_kind(objects, "ClusterRole")
    expected = minus(EXPECTED, DEFAULT_OFF)
    assert rule_calls(role["rules"]) == without(expected, *unused, LEASES)
    assert rule_calls(role["rules"]) | leases == without(expected, *unused)
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
    [(1, [LEASES]), (2, [])],
    ids=["standalone", "leader-election"],
)
def test_namespaced_mode_grants_roles_only_in_watched_namespaces(
    replicas: int, unused: list[tuple[str, str]]
) -> None:
    objects = render({"replicaCount": replicas, "watchNamespaces": WATCHED})
    expected = without(minus(EXPECTED, DEFAULT_OFF), *unused)
    leases = check_leader_election(objects, peering=LEASES not in unused)
    (cluster_role,) = by_kind(objects, "ClusterRole")
    cluster_calls = rule_calls(cluster_role["rules"])
    # Only cluster-scoped resources stay cluster-wide.
    assert {(g, r) for g, r, _ in cluster_calls} <= CLUSTER_SCOPED
    roles = split_roles(objects)[1]
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(WATCHED)
    for role in roles:
        namespaced_calls = rule_calls(role["rules"])
        assert not {(g, r) for g, r, _ in namespaced_calls} & CLUSTER_SCOPED
        assert not only(namespaced_calls, LEASES)  # the Lease is granted in one namespace only
        assert namespaced_calls | cluster_calls | leases == expected
    bindings = [b for b in by_kind(objects, "RoleBinding") if b["metadata"]["name"] != LEADER_ELECTION_ROLE]
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


def test_features_add_exactly_their_rules() -> None:
    """The webhook's registration and patch pods appear only with their feature, narrowed."""
    objects = render({"replicaCount": 1, "scaling": {"podDeletionCost": True}})
    (role,) = by_kind(objects, "ClusterRole")
    calls = rule_calls(role["rules"])
    assert calls == without(EXPECTED, LEASES)
    # The webhook's configuration: created once, read and replaced only by its name.
    assert only(named_rules(objects), WEBHOOK_CONFIGURATIONS) == {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "update"),
    }
    assert PATCH_PODS in calls
    (off,) = by_kind(render({"replicaCount": 1, **NO_WEBHOOK}), "ClusterRole")
    assert rule_calls(off["rules"]) == without(EXPECTED, LEASES, WEBHOOK_CONFIGURATIONS) - DEFAULT_OFF


@pytest.mark.parametrize("replicas", [1, 2], ids=["standalone", "leader-election"])
def test_namespace_only_mode_grants_nothing_cluster_wide(replicas: int) -> None:
    """Roles in the watched namespaces and the release namespace: no ClusterRole at all."""
    objects = render(
        {"replicaCount": replicas, "watchNamespaces": WATCHED, "rbac": {"namespaceOnly": True}, **NO_WEBHOOK}
    )
    assert by_kind(objects, "ClusterRole") == [] and by_kind(objects, "ClusterRoleBinding") == []
    leases = check_leader_election(objects, peering=replicas > 1)
    roles = split_roles(objects)[1]
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(WATCHED)
    unused = [*CLUSTER_SCOPED] + ([] if replicas > 1 else [LEASES])
    for role in roles:
        assert rule_calls(role["rules"]) | leases == without(minus(EXPECTED, DEFAULT_OFF), *unused)
    env = {
        e["name"]: e.get("value")
        for e in by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["INFERFLEET_CLUSTER_SCANNING"] == "false"  # kopf then watches no CRDs or namespaces


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rbac": {"namespaceOnly": True}, **NO_WEBHOOK}, "needs watchNamespaces"),
        (
            {"rbac": {"namespaceOnly": True}, "watchNamespaces": WATCHED, "webhook": {"enabled": True}},
            "webhook",
        ),
    ],
)
def test_namespace_only_mode_refuses_what_it_cannot_grant(values: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        render(values)


def test_pre_provisioned_node_cache_volumes_grant_no_persistent_volumes() -> None:
    """With cache.volumes preProvisioned (and so with rbac.namespaceOnly) the operator
    neither creates PersistentVolumes nor reads namespaces; it uses the claims an admin made."""
    objects = render({"cache": {"volumes": "preProvisioned"}})
    (role,) = by_kind(objects, "ClusterRole")
    calls = rule_calls(role["rules"])
    assert not only(calls, ("", "persistentvolumes"))
    assert {verb for group, resource, verb in calls if resource == "namespaces"} == {"list", "watch"}
    assert ("", "persistentvolumeclaims", "get") in calls
    env = {
        e["name"]: e.get("value")
        for e in by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["INFERFLEET_CACHE_VOLUMES"] == "preProvisioned"
    default = render(None)
    assert ("", "persistentvolumes", "create") in rule_calls(by_kind(default, "ClusterRole")[0]["rules"])
