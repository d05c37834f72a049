"""The pure diff and status rules, without a cluster."""

from __future__ import annotations

from typing import Any

from inferfleet.api import labels
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile import Apply, Claim, Delete, contains, diff, status_rules
from tests.unit.render import plans


def workload(
    name: str, tier: str, image: str = "v1", replicas: int = 1, rv: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {labels.LABEL_TIER: tier}}
    if rv:
        metadata["resourceVersion"] = rv
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"image": image}]}}},
    }


def test_contains_ignores_server_added_fields_but_not_list_changes() -> None:
    desired = {"spec": {"ports": [{"port": 80}]}}
    assert contains({"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "clusterIP": "10.0.0.1"}}, desired)
    assert not contains({"spec": {"ports": [{"port": 80}, {"port": 81}]}}, desired)
    assert not contains({"spec": {}}, desired)


def test_empty_maps_and_lists_the_api_server_drops_are_not_drift() -> None:
    # What the API server stores for a template rendered with `annotations: {}` and
    # `args: []`: both omitted (Go omitempty), so a settled object must not be re-applied.
    desired = {
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "1"}, "annotations": {}},
                "spec": {"containers": [{"name": "c", "args": []}]},
            }
        }
    }
    stored = {
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "1"}},
                "spec": {"containers": [{"name": "c", "imagePullPolicy": "Always"}]},
            }
        }
    }
    assert contains(stored, desired)
    # Someone added an argument: drift (an atomic list we own). An annotation someone
    # else added is theirs under server-side apply, not ours to remove.
    edited = {
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "1"}},
                "spec": {"containers": [{"name": "c", "args": ["--evil"]}]},
            }
        }
    }
    assert not contains(edited, desired)
    # An empty struct (emptyDir) is kept by the server: its absence is a different volume.
    volume = {"name": "shm", "emptyDir": {}}
    assert not contains({"name": "shm", "hostPath": {"path": "/x"}}, volume)
    assert contains({"name": "shm", "emptyDir": {}}, volume)


def test_missing_objects_are_created_and_matching_ones_left_alone() -> None:
    desired = [workload("a", "t1"), workload("b", "t2")]
    observed = [workload("a", "t1", rv="7") | {"status": {"readyReplicas": 1}}]
    actions = diff(desired, observed)
    assert [(type(a).__name__, str(a.ref.name)) for a in actions] == [("Apply", "b")]


def test_existing_workload_keeps_observed_replicas_and_is_conditional() -> None:
    actions = diff([workload("a", "t1", image="v2", replicas=1)], [workload("a", "t1", replicas=5, rv="9")])
    (action,) = actions
    assert isinstance(action, Apply)
    assert action.obj["spec"]["replicas"] == 5
    assert action.obj["metadata"]["resourceVersion"] == "9"
    assert action.why == "update"


def test_replica_difference_alone_is_not_drift() -> None:
    assert diff([workload("a", "t1", replicas=1)], [workload("a", "t1", replicas=8, rv="3")]) == []


def test_prune_spares_kept_tiers() -> None:
    observed = [workload("a", "gone", rv="1"), workload("b", "broken", rv="2")]
    actions = diff([], observed, keep_tiers=frozenset({"broken"}))
    assert actions == [Delete(ObjectRef("apps/v1", "Deployment", "ns", "a"))]


def test_condition_transition_time_moves_only_on_status_change() -> None:
    first = status_rules.set_condition([], "Ready", "False", "Progressing", "0/1", now="t1", generation=1)
    same = status_rules.set_condition(first, "Ready", "False", "Progressing", "0/2", now="t2", generation=2)
    flipped = status_rules.set_condition(same, "Ready", "True", "Available", "2/2", now="t3", generation=2)
    assert same[0]["lastTransitionTime"] == "t1" and same[0]["message"] == "0/2"
    assert flipped[0]["lastTransitionTime"] == "t3"


def test_status_keeps_other_writers_conditions_and_fields() -> None:
    previous = {
        "conditions": [
            {
                "type": "Scaling",
                "status": "True",
                "reason": "ScaledUp",
                "message": "",
                "lastTransitionTime": "t0",
            }
        ],
        "autoscalerState": {"h100": {"upCount": 2}},
    }
    result = status_rules.PassResult(generation=3, plan=plans.plan(), plan_hash="abc")
    new = status_rules.compute(previous, result, now="t1")
    assert new["autoscalerState"] == previous["autoscalerState"]
    assert {c["type"] for c in new["conditions"]} == {"Scaling", "Planned", "Ready", "Degraded", "SloAtRisk"}
    assert status_rules.changes(previous, new).keys() >= {"conditions", "plan", "observedGeneration"}
    assert "autoscalerState" not in status_rules.changes(previous, new)


def test_ready_needs_an_updated_rollout_not_only_ready_pods() -> None:
    def result(status: dict[str, Any], generation: int = 2) -> dict[str, Any]:
        obj = workload("a", "h100", replicas=2) | {"status": status}
        obj["metadata"]["generation"] = generation
        new = status_rules.compute(
            {},
            status_rules.PassResult(
                generation=1, plan=plans.plan(plans.tier_plan("h100")), plan_hash="h", workloads={"h100": obj}
            ),
            now="t",
        )
        ready: dict[str, Any] = next(c for c in new["conditions"] if c["type"] == "Ready")
        return ready

    assert result({"readyReplicas": 2, "updatedReplicas": 1, "observedGeneration": 2})["status"] == "False"
    assert result({"readyReplicas": 2, "updatedReplicas": 2, "observedGeneration": 1})["status"] == "False"
    assert result({"readyReplicas": 2, "updatedReplicas": 2, "observedGeneration": 2})["status"] == "True"
    # A LeaderWorkerSet reports no observedGeneration.
    assert result({"readyReplicas": 2, "updatedReplicas": 2})["status"] == "True"


def test_writes_to_owned_objects_carry_the_observed_uid() -> None:
    """So one someone deleted and made again meanwhile is refused, not written."""
    observed = workload("a", "t1", rv="4")
    observed["metadata"]["uid"] = "u-a"
    gone = workload("b", "old", rv="5")
    gone["metadata"]["uid"] = "u-b"
    actions = diff([workload("a", "t1", image="v2")], [observed, gone])
    update, prune = actions
    assert isinstance(update, Apply) and update.obj["metadata"]["uid"] == "u-a"
    assert prune == Delete(ObjectRef("apps/v1", "Deployment", "ns", "b"), uid="u-b")
    assert diff([workload("a", "t1")], [observed]) == []  # the carried uid is not drift


def test_an_owned_object_created_but_not_claimed_is_claimed_before_it_is_written() -> None:
    observed = workload("a", "t1", rv="4")
    observed["metadata"] |= {
        "uid": "u-a",
        "managedFields": [
            {"manager": labels.FIELD_MANAGER, "operation": "Update", "fieldsV1": {"f:spec": {}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"},
        ],
    }
    actions = diff([workload("a", "t1", image="v2")], [observed])
    assert [type(a).__name__ for a in actions] == ["Claim", "Apply"]
    assert actions[0] == Claim(ObjectRef("apps/v1", "Deployment", "ns", "a"), "u-a")
    observed["metadata"]["managedFields"][0]["operation"] = "Apply"
    assert [type(a).__name__ for a in diff([workload("a", "t1", image="v2")], [observed])] == ["Apply"]
