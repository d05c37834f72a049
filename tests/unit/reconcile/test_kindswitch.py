"""A tier that changes kind (Deployment <-> LeaderWorkerSet) is replaced make-before-break:
the pure rule, then the operator on the in-memory cluster (real handlers, planner,
renderer), both directions, with a restart halfway."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from inferfleet.api import labels
from inferfleet.cluster import Conflict
from inferfleet.kubedata import ObjectRef, ref_of
from inferfleet.reconcile import kindswitch
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

DEPLOYMENT = ObjectRef("apps/v1", "Deployment", NAMESPACE, f"{NAME}-l4")
LWS = ObjectRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", NAMESPACE, f"{NAME}-l4")


def workload(ref: ObjectRef, replicas: int, ready: int | None = None, tier: str = "l4") -> dict[str, Any]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": {"name": ref.name, "namespace": ref.namespace, "labels": {labels.LABEL_TIER: tier}},
        "spec": {"replicas": replicas},
        "status": {} if ready is None else {"readyReplicas": ready},
    }


@pytest.mark.parametrize(
    ("old_replicas", "old_ready", "new", "needed", "done"),
    [
        # The new one must match what the old one serves with...
        (3, 3, workload(LWS, 3, 2), 3, False),
        (3, 3, workload(LWS, 3, 3), 3, True),
        # ... but no more than it is asked to run (the autoscaler scaled it down meanwhile)
        (3, 3, workload(LWS, 1, 1), 1, True),
        # ... and at least one, even when the old one has none Ready yet.
        (2, 0, workload(LWS, 2, 0), 1, False),
        (2, 0, workload(LWS, 2, 1), 1, True),
        # Not created yet: it will start at the old one's replicas.
        (4, 4, None, 4, False),
        # An old workload scaled to zero serves nothing: it goes at once.
        (0, 0, None, 0, True),
    ],
)
def test_the_old_workload_goes_when_the_new_one_serves_as_much(
    old_replicas: int, old_ready: int, new: dict[str, Any] | None, needed: int, done: bool
) -> None:
    old = workload(DEPLOYMENT, old_replicas, old_ready)
    desired = [workload(LWS, 0 if old_replicas == 0 else 2)]  # rendered at the warm minimum
    observed = [old] + ([new] if new is not None else [])
    (switch,) = kindswitch.switches(desired, observed)
    assert (switch.tier, switch.old, switch.new) == ("l4", DEPLOYMENT, LWS)
    assert (switch.needed, switch.done) == (needed, done)
    assert kindswitch.kept([switch]) == (frozenset() if done else {DEPLOYMENT})


def test_no_switch_for_a_tier_of_the_same_kind_or_one_that_left() -> None:
    observed = [workload(DEPLOYMENT, 2, 2), workload(LWS, 1, 1, tier="gone")]
    assert kindswitch.switches([workload(DEPLOYMENT, 2)], observed) == ()


def test_a_new_workload_starts_at_the_old_ones_replicas_never_below_the_warm_minimum() -> None:
    desired = [workload(LWS, 2)]
    (busy,) = kindswitch.switches(desired, [workload(DEPLOYMENT, 5, 5)])
    assert [obj["spec"]["replicas"] for obj in kindswitch.with_start_replicas(desired, [busy])] == [5]
    (idle,) = kindswitch.switches(desired, [workload(DEPLOYMENT, 1, 1)])
    assert [obj["spec"]["replicas"] for obj in kindswitch.with_start_replicas(desired, [idle])] == [2]
    # Once it exists, its replicas are the autoscaler's (diff carries them back).
    (running,) = kindswitch.switches(desired, [workload(DEPLOYMENT, 5, 5), workload(LWS, 3, 0)])
    assert kindswitch.with_start_replicas(desired, [running]) == desired


def test_the_preferred_workload_is_the_kind_the_plan_renders() -> None:
    both = [workload(DEPLOYMENT, 3, 3), workload(LWS, 3, 0)]
    assert ref_of(kindswitch.preferred(both, multi_node=True)) == LWS
    assert ref_of(kindswitch.preferred(both, multi_node=False)) == DEPLOYMENT
    assert ref_of(kindswitch.preferred(both[:1], multi_node=True)) == DEPLOYMENT  # the only one


# --- the operator -----------------------------------------------------------------------


def multi_node(body: dict[str, Any]) -> None:
    """The L4 tier, one GPU per node, split in two pipeline stages: two nodes per replica."""
    body["spec"]["tiers"][0]["overrides"] = {"tensorParallelSize": 1, "pipelineParallelSize": 2}


def single_node(body: dict[str, Any]) -> None:
    body["spec"]["tiers"][0].pop("overrides", None)


def kinds_of_l4(control: Control) -> set[str]:
    return {ref.kind for ref in control.cluster.objects if ref in (DEPLOYMENT, LWS)}


def set_ready(control: Control, ref: ObjectRef, ready: int) -> None:
    obj = control.cluster.objects[ref]
    replicas = obj["spec"]["replicas"]
    control.cluster.set_status(
        ref, {"replicas": replicas, "updatedReplicas": replicas, "readyReplicas": ready}
    )


def events(control: Control, reason: str) -> list[str]:
    return [e["message"] for e in control.cluster.events if e["reason"] == reason]


def l4_entry(control: Control) -> dict[str, Any]:
    return next(entry for entry in control.status()["replicas"] if entry["tier"] == "l4")


def serving(control: Control) -> Control:
    """The example with its L4 Deployment scaled to 3 by the autoscaler, all Ready."""
    control.submit(example())
    control.reconcile()
    control.cluster.scale(DEPLOYMENT, 3)
    control.mark_ready()
    control.reconcile()
    return control


def test_deployment_to_leader_worker_set_keeps_the_deployment_until_the_new_one_is_ready() -> None:
    control = serving(Control())
    control.edit(multi_node)
    control.reconcile()

    # Both now: the LeaderWorkerSet starts at the Deployment's 3 replicas; the Deployment is
    # untouched and serving.
    assert kinds_of_l4(control) == {"Deployment", "LeaderWorkerSet"}
    assert control.cluster.objects[LWS]["spec"]["replicas"] == 3
    assert control.cluster.objects[DEPLOYMENT]["status"]["readyReplicas"] == 3
    assert events(control, "TierPruned") == []
    assert events(control, "TierReplaced") == [
        "tier l4 moves from Deployment to LeaderWorkerSet; the Deployment keeps serving until the "
        "LeaderWorkerSet has 3 Ready replica(s)"
    ]
    assert l4_entry(control) == {
        "tier": "l4",
        "desired": 3,
        "ready": 3,
        "replacing": {"kind": "Deployment", "ready": 3, "needed": 3},
    }
    ready = control.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Progressing")
    assert "moving from Deployment to LeaderWorkerSet: 0/3 LeaderWorkerSet replicas Ready" in ready["message"]

    # A restart halfway, and groups coming up one by one: the Deployment stays, no new event.
    control.restart()
    for ready_groups in (0, 1, 2):
        set_ready(control, LWS, ready_groups)
        control.reconcile()
        assert kinds_of_l4(control) == {"Deployment", "LeaderWorkerSet"}, ready_groups
        assert l4_entry(control)["ready"] == 3 + ready_groups
    assert len(events(control, "TierReplaced")) == 1

    set_ready(control, LWS, 3)
    control.reconcile()
    assert kinds_of_l4(control) == {"LeaderWorkerSet"}
    assert events(control, "TierReplaced")[1:] == [
        "tier l4 moved from Deployment to LeaderWorkerSet: the LeaderWorkerSet has 3/3 Ready replica(s); "
        "the Deployment was removed"
    ]
    assert events(control, "TierPruned") == []
    assert l4_entry(control) == {"tier": "l4", "desired": 3, "ready": 3}
    control.reconcile()  # settled: nothing more happens
    assert len(events(control, "TierReplaced")) == 2


def test_leader_worker_set_to_deployment_keeps_the_leader_worker_set_until_the_new_one_is_ready() -> None:
    control = Control()
    body = example()
    multi_node(body)
    control.submit(body)
    control.reconcile()
    control.cluster.scale(LWS, 3)
    control.mark_ready()
    control.reconcile()
    assert kinds_of_l4(control) == {"LeaderWorkerSet"}

    control.edit(single_node)
    control.reconcile()
    assert kinds_of_l4(control) == {"Deployment", "LeaderWorkerSet"}
    assert control.cluster.objects[DEPLOYMENT]["spec"]["replicas"] == 3
    assert events(control, "TierReplaced") == [
        "tier l4 moves from LeaderWorkerSet to Deployment; the LeaderWorkerSet keeps serving until the "
        "Deployment has 3 Ready replica(s)"
    ]
    set_ready(control, DEPLOYMENT, 2)
    control.reconcile()
    assert kinds_of_l4(control) == {"Deployment", "LeaderWorkerSet"}
    set_ready(control, DEPLOYMENT, 3)
    control.reconcile()
    assert kinds_of_l4(control) == {"Deployment"}
    assert events(control, "TierReplaced")[-1].endswith("the LeaderWorkerSet was removed")
    assert events(control, "TierPruned") == []


def test_the_old_workload_removed_is_announced_even_when_the_status_write_conflicts() -> None:
    """The pass that removes the old workload loses its status write to another writer (the
    autoscaler): the removal is done and the next pass cannot see it again, so its Event
    is posted anyway; the retried pass then writes status and announces nothing twice."""
    control = serving(Control())
    control.edit(multi_node)
    control.reconcile()
    set_ready(control, LWS, 3)
    control.cluster.inject("patch_status", Conflict("moved on", 409))
    with pytest.raises(kopf.TemporaryError):
        control.reconcile()
    assert kinds_of_l4(control) == {"LeaderWorkerSet"}
    finished = (
        "tier l4 moved from Deployment to LeaderWorkerSet: the LeaderWorkerSet has 3/3 Ready replica(s); "
        "the Deployment was removed"
    )
    assert events(control, "TierReplaced")[1:] == [finished]
    control.reconcile()
    assert l4_entry(control) == {"tier": "l4", "desired": 3, "ready": 3}
    assert events(control, "TierReplaced")[1:] == [finished]
    assert events(control, "TierPruned") == []


def test_a_tier_removed_while_it_changes_kind_is_pruned_whole() -> None:
    control = serving(Control())
    control.edit(multi_node)
    control.reconcile()

    def remove_l4(body: dict[str, Any]) -> None:
        body["spec"]["tiers"].pop(0)
        body["spec"]["scaling"].pop("prewarm")  # it names the tier

    control.edit(remove_l4)
    control.reconcile()
    assert control.condition("Planned")["status"] == "True"
    assert kinds_of_l4(control) == set()
    assert events(control, "TierPruned") == ["tier l4 removed from the spec; its objects were deleted"]


def test_the_front_door_and_the_tier_service_select_the_serving_pods_of_both_kinds() -> None:
    control = serving(Control())
    control.edit(multi_node)
    control.reconcile()
    objects = control.cluster.objects
    deployment_pods = objects[DEPLOYMENT]["spec"]["template"]["metadata"]["labels"]
    lws_template = objects[LWS]["spec"]["leaderWorkerTemplate"]
    leaders = lws_template["leaderTemplate"]["metadata"]["labels"]
    workers = lws_template["workerTemplate"]["metadata"]["labels"]
    pool = next(obj for ref, obj in objects.items() if ref.kind == "InferencePool")
    tier_service = objects[ObjectRef("v1", "Service", NAMESPACE, f"{NAME}-l4-api")]
    for selector in (pool["spec"]["selector"]["matchLabels"], tier_service["spec"]["selector"]):
        assert selector.items() <= deployment_pods.items(), selector
        assert selector.items() <= leaders.items(), selector
        assert not selector.items() <= workers.items(), selector  # workers serve no HTTP
