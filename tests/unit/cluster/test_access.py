"""API_CALLS: what the chart's RBAC must grant, derived from the port's own table."""

from __future__ import annotations

from inferfleet.cluster import API_CALLS, PERMISSIONS, ApiCall
from inferfleet.cluster.access import Operation, derive_api_calls


def rules() -> dict[tuple[str, str], frozenset[str]]:
    return {(call.api_group, call.resource): call.verbs for call in API_CALLS}


def test_one_rule_per_group_and_resource() -> None:
    assert len(rules()) == len(API_CALLS)
    assert all(isinstance(call, ApiCall) for call in API_CALLS)


def test_owned_kinds_can_be_applied_listed_and_pruned() -> None:
    table = rules()
    for key in [
        ("apps", "deployments"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        ("", "services"),
        ("policy", "poddisruptionbudgets"),
        ("monitoring.coreos.com", "podmonitors"),
    ]:
        assert {"create", "patch", "get", "list", "delete"} <= table[key], key


def test_subresources_the_operator_writes() -> None:
    table = rules()
    assert "patch" in table[("apps", "deployments/scale")]
    assert "patch" in table[("leaderworkerset.x-k8s.io", "leaderworkersets/scale")]
    assert table[("inferfleet.dev", "inferenceservices/status")] == {"patch"}
    assert "patch" in table[("", "pods")]  # pod-deletion-cost annotations
    assert "create" in table[("", "events")]


def test_kopf_needs_are_included() -> None:
    table = rules()
    assert {"list", "watch", "patch"} <= table[("inferfleet.dev", "inferenceservices")]
    # kopf runs standalone (the Lease is the one election): no peering kind at all.
    assert not {resource for group, resource in table if group == "kopf.dev"}
    # The webhook's configuration is the operator's own (controller.webhook_config).
    assert table[("admissionregistration.k8s.io", "validatingwebhookconfigurations")] == {
        "get",
        "create",
        "update",
    }
    assert {"list", "watch"} <= table[("apps", "deployments")]


def test_derived_from_the_permission_table() -> None:
    narrowed = {resource: frozenset({Operation.GET}) for resource in PERMISSIONS}
    calls = derive_api_calls(narrowed, framework=())
    assert {call.verbs for call in calls} == {frozenset({"get"})}
    assert len(calls) == len(PERMISSIONS)
