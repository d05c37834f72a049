"""The in-memory adapter behaves like the API server where the operator depends on it."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.cluster import (
    SCALE_FIELD_MANAGER,
    AlreadyExists,
    Conflict,
    InMemoryCluster,
    KindNotServed,
    NotPermitted,
    PermanentApiError,
    Replaced,
)
from inferfleet.kubedata import ObjectRef, ref_of

OWNER = {
    "apiVersion": labels.API_VERSION,
    "kind": labels.KIND,
    "metadata": {"name": "chat", "namespace": "ns"},
    "spec": {},
}


def deployment(
    name: str = "chat-a", replicas: int | None = 2, owner_uid: str | None = None, **labels_: str
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels_ or {"app": "x"}}
    if owner_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": labels.API_VERSION,
                "kind": labels.KIND,
                "name": "chat",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "vllm", "image": "v1"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def test_apply_creates_then_updates_with_new_resource_version_and_generation() -> None:
    cluster = InMemoryCluster()
    first = cluster.apply(deployment())
    assert first["metadata"]["generation"] == 1
    same = cluster.apply(deployment())
    assert same["metadata"]["generation"] == 1
    changed = deployment()
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "v2"
    second = cluster.apply(changed)
    assert second["metadata"]["generation"] == 2
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_stale_resource_version_is_a_conflict() -> None:
    cluster = InMemoryCluster()
    stored = cluster.apply(deployment())
    cluster.scale(ref_of(stored), 5)
    stale = deployment(replicas=2)
    stale["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):
        cluster.apply(stale)
    owner = cluster.user_apply(OWNER)
    cluster.patch_status(ref_of(owner), {"x": 1}, resource_version=owner["metadata"]["resourceVersion"])
    with pytest.raises(Conflict):
        cluster.patch_status(ref_of(owner), {"x": 2}, resource_version=owner["metadata"]["resourceVersion"])


def test_a_field_its_only_applier_stops_sending_is_removed() -> None:
    cluster = InMemoryCluster()
    cluster.apply(deployment(replicas=4))
    after = cluster.apply(deployment(replicas=None))
    # The API server's default comes back, not the 4 we had: why the diff carries replicas.
    assert "replicas" not in after["spec"]


def test_scale_moves_replicas_to_the_scaler_and_later_applies_keep_them() -> None:
    cluster = InMemoryCluster()
    ref = ref_of(cluster.apply(deployment(replicas=2)))
    cluster.scale(ref, 6)
    assert cluster.owners_of(ref, ("spec", "replicas")) == {(SCALE_FIELD_MANAGER, "Update")}
    kept = cluster.apply(deployment(replicas=None))
    assert kept["spec"]["replicas"] == 6


def test_conflicting_apply_without_force_fails_and_force_takes_over() -> None:
    cluster = InMemoryCluster()
    ref = ref_of(cluster.apply(deployment()))
    cluster.update(
        ref,
        lambda obj: obj["spec"]["template"]["spec"].__setitem__("hostNetwork", True),
        manager="kubectl-edit",
    )
    with pytest.raises(Conflict):
        cluster.user_apply(
            deployment() | {"spec": {"template": {"spec": {"hostNetwork": False}}}}, manager="someone"
        )
    cluster.apply(deployment() | {"spec": {"template": {"spec": {"hostNetwork": False}}}}, force=True)
    assert cluster.objects[ref]["spec"]["template"]["spec"]["hostNetwork"] is False


def test_list_selects_by_labels_and_namespace() -> None:
    cluster = InMemoryCluster()
    cluster.apply(deployment("a", app="x", tier="1"))
    cluster.apply(deployment("b", app="x", tier="2"))
    cluster.apply(deployment("c", app="y"))
    names = [o["metadata"]["name"] for o in cluster.list("apps/v1", "Deployment", "ns", {"app": "x"})]
    assert names == ["a", "b"]
    assert cluster.list("apps/v1", "Deployment", "other", {}) == []


def test_delete_cascades_through_owner_references() -> None:
    cluster = InMemoryCluster()
    owner = cluster.user_apply(OWNER)
    uid = owner["metadata"]["uid"]
    cluster.apply(deployment("a", owner_uid=uid))
    cluster.apply(deployment("b"))
    cluster.user_delete(ref_of(owner))
    assert [r.name for r in cluster.objects] == ["b"]
    assert cluster.delete(ref_of(deployment("b"))) is True
    assert cluster.delete(ref_of(deployment("b"))) is False


def test_dangling_owner_reference_is_refused() -> None:
    with pytest.raises(PermanentApiError):
        InMemoryCluster().apply(deployment(owner_uid="nobody"))


def test_undeclared_operations_and_unserved_kinds() -> None:
    cluster = InMemoryCluster()
    with pytest.raises(NotPermitted):
        cluster.scale(ObjectRef("v1", "Service", "ns", "x"), 2)
    with pytest.raises(NotPermitted):
        cluster.get(ObjectRef("v1", "ConfigMap", "ns", "settings"))
    # a tenant's Secrets reach only the pods that use them: the operator reads none
    with pytest.raises(NotPermitted):
        cluster.get(ObjectRef("v1", "Secret", "ns", "hf"))
    with pytest.raises(NotPermitted):
        cluster.list("v1", "Secret", "ns", {})
    cluster.served.discard(("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"))
    with pytest.raises(KindNotServed):
        cluster.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "ns", {})


def test_injected_faults_fire_then_clear() -> None:
    cluster = InMemoryCluster()
    cluster.inject("apply", Conflict("busy", 409), kind="Deployment")
    with pytest.raises(Conflict):
        cluster.apply(deployment())
    assert cluster.apply(deployment())["metadata"]["name"] == "chat-a"


def test_events_are_recorded_against_their_object() -> None:
    cluster = InMemoryCluster()
    owner = cluster.user_apply(OWNER)
    cluster.create_event(owner, type_="Warning", reason="InfeasibleTier", message="too big")
    assert cluster.events[0]["reason"] == "InfeasibleTier"
    assert cluster.events[0]["uid"] == owner["metadata"]["uid"]


# --- writes that cannot take over (answers as a v1.34 API server gave them) -------------


def test_create_refuses_an_existing_object_whoever_made_it() -> None:
    cluster = InMemoryCluster()
    made = cluster.user_create(deployment("theirs"), manager="platform")
    with pytest.raises(AlreadyExists):
        cluster.create(deployment("theirs", replicas=9, team="us"))
    assert cluster.objects[ref_of(made)] == made


def test_an_apply_carrying_a_uid_writes_only_that_object() -> None:
    cluster = InMemoryCluster()
    ours = cluster.apply(deployment("a"))
    uid = ours["metadata"]["uid"]
    cluster.user_delete(ref_of(ours))
    theirs = cluster.user_create(deployment("a", replicas=5), manager="platform")
    with pytest.raises(Replaced):  # 422: metadata.uid is immutable
        cluster.apply(
            {**deployment("a", replicas=1), "metadata": {**deployment("a")["metadata"], "uid": uid}}
        )
    assert cluster.objects[ref_of(theirs)] == theirs
    cluster.user_delete(ref_of(theirs))
    with pytest.raises(Conflict):  # 409: the uid names no existing object; nothing is created
        cluster.apply({**deployment("a"), "metadata": {**deployment("a")["metadata"], "uid": uid}})
    assert ref_of(theirs) not in cluster.objects


def test_a_delete_carrying_a_uid_deletes_only_that_object() -> None:
    cluster = InMemoryCluster()
    ours = cluster.apply(deployment("a"))
    cluster.user_delete(ref_of(ours))
    theirs = cluster.user_create(deployment("a"), manager="platform")
    with pytest.raises(Replaced):
        cluster.delete(ref_of(theirs), uid=ours["metadata"]["uid"])
    assert cluster.delete(ref_of(theirs), uid=theirs["metadata"]["uid"]) is True


def test_a_created_object_keeps_a_field_its_applies_drop_until_its_fields_are_claimed() -> None:
    """POST owns every field through an Update entry; an apply by the same manager is
    another entry, so a field it stops sending stays (measured on a real server). Once
    claimed (the Update entry merged into the Apply one) the field goes."""
    for claim in (False, True):
        cluster = InMemoryCluster()
        created = cluster.create(deployment("a", app="x", extra="drop-me"))
        if claim:
            cluster.claim_fields(ref_of(created), uid=created["metadata"]["uid"])
            assert set(cluster.managed[ref_of(created)]) == {(labels.FIELD_MANAGER, "Apply")}
        after = cluster.apply(deployment("a", app="x"))
        assert ("extra" in after["metadata"]["labels"]) is not claim


def test_a_claim_is_for_one_object() -> None:
    cluster = InMemoryCluster()
    created = cluster.create(deployment("a"))
    with pytest.raises(Replaced):
        cluster.claim_fields(ref_of(created), uid="uid-of-another")
