"""The node cache as one volume per namespace: the objects, and what a pass creates.

Written as the other tenant would try it: a claim in another namespace, a volume an
earlier namespace of the same name left, objects inferfleet did not make."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet.api import host_paths
from inferfleet.caching.precache.volumes import NodeCacheVolume, claim_name, owner_tree, volume_name
from inferfleet.reconcile.actions import Create, Delete
from inferfleet.reconcile.volume_rules import (
    REASON_VOLUME_CONFLICT,
    REASON_VOLUME_MISSING,
    REASON_VOLUME_PENDING,
    ObservedVolume,
    ensure,
)
from tests.unit.render.validation import validate

ROOT = "/mnt/nvme/inferfleet"
UID = "7d2c0e55-3b8f-4c1e-9d0a-6f7e8a9b0c1d"


def wanted(namespace: str = "team-a", uid: str | None = UID, root: str = ROOT) -> NodeCacheVolume:
    return NodeCacheVolume(
        namespace=namespace, namespace_uid=uid, node_path=root, default_node_path=ROOT, capacity_gib=500
    )


def test_the_volume_is_the_namespaces_tree_and_binds_only_its_claim() -> None:
    volume = wanted()
    pv, pvc = volume.objects()
    validate(pv)
    validate(pvc)
    assert pv["spec"]["hostPath"] == {"path": f"{ROOT}/.tenants/team-a-{UID}", "type": "DirectoryOrCreate"}
    # Only the claim of that name in that namespace can bind it; tenants cannot create
    # PersistentVolumes, so this is the only way into the tree.
    assert pv["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "team-a",
        "name": "inferfleet-node-cache",
    }
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert "nodeAffinity" not in pv["spec"]  # every node has its own copy of the tree
    assert pvc["metadata"]["namespace"] == "team-a"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    # Static binding only: no StorageClass, so no provisioner answers the claim instead.
    assert pvc["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == ""
    assert pvc["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"]
    assert "ownerReferences" not in pv["metadata"] and "ownerReferences" not in pvc["metadata"]


def test_names_per_namespace_and_root() -> None:
    assert claim_name(ROOT, ROOT) == "inferfleet-node-cache"
    assert claim_name("/mnt/nvme/other", ROOT) != claim_name(ROOT, ROOT)
    assert volume_name("team-a", ROOT) != volume_name("team-b", ROOT)
    assert volume_name("team-a", ROOT) != volume_name("team-a", "/mnt/nvme/other")
    # A re-created namespace of the same name gets another tree.
    assert owner_tree(ROOT, "team-a", "uid-1") != owner_tree(ROOT, "team-a", "uid-2")


@given(
    roots=st.lists(
        st.lists(
            st.sampled_from(["mnt", "nvme", "inferfleet", "x", "team-b", "tenants", "a-uid"]), min_size=1
        ),
        min_size=2,
        max_size=2,
    ),
    owners=st.lists(st.sampled_from(["team-a", "team-b", "x"]), min_size=2, max_size=2, unique=True),
)
def test_no_node_path_puts_one_owners_tree_inside_another(roots: list[list[str]], owners: list[str]) -> None:
    """Whatever node paths two tenants pick (each one the spec admits), neither's tree is
    inside the other's: the dot component no admissible node path may hold sees to it."""
    paths = ["/" + "/".join(parts) for parts in roots]
    assert all(host_paths.unsafe_reason(path) is None for path in paths)
    trees = [owner_tree(path, owner, "u") for path, owner in zip(paths, owners, strict=True)]
    assert not host_paths.is_under(trees[0], trees[1]) and not host_paths.is_under(trees[1], trees[0])


@pytest.mark.parametrize(
    "path",
    [
        f"{ROOT}/.tenants/team-a-{UID}/hf--victim/revisions/abc",
        f"{ROOT}/.tenants",
        "/mnt/nvme/.cache",
        "/mnt/./nvme",
    ],
)
def test_a_node_path_into_the_tenants_directory_is_refused(path: str) -> None:
    assert host_paths.unsafe_reason(path) is not None


def _pending(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": {"phase": "Pending"}}


def _ours_bound(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": {"phase": "Bound"}}


def test_missing_volume_and_claim_are_created_never_applied() -> None:
    verdict = ensure(wanted(), ObservedVolume(None, None, UID), provision=True)
    assert [type(a) for a in verdict.actions] == [Create, Create]
    assert [a.ref.kind for a in verdict.actions] == ["PersistentVolume", "PersistentVolumeClaim"]
    assert not verdict.ready and verdict.reason == REASON_VOLUME_PENDING


def test_a_bound_claim_needs_nothing() -> None:
    claim = _ours_bound(wanted().persistent_volume_claim())
    verdict = ensure(wanted(), ObservedVolume(claim), provision=True)
    assert verdict.ready and verdict.actions == ()


def test_a_volume_left_by_an_earlier_namespace_of_the_same_name_is_replaced() -> None:
    """team-a deleted and re-created (maybe for another team): the old volume points at the
    old tree and can never bind the new claim; it is deleted (the old tree stays on the
    nodes, unreachable) and a volume of the new namespace's own tree is created."""
    old = {**wanted(uid="old-uid").persistent_volume(), "status": {"phase": "Released"}}
    old["metadata"] = {**old["metadata"], "uid": "pv-uid-1"}
    verdict = ensure(wanted(), ObservedVolume(None, old, UID), provision=True)
    assert [type(a) for a in verdict.actions] == [Delete, Create, Create]
    deleted = verdict.actions[0]
    assert isinstance(deleted, Delete) and deleted.uid == "pv-uid-1"  # only the volume it saw
    created = verdict.actions[1]
    assert isinstance(created, Create) and created.obj["spec"]["hostPath"]["path"].endswith(UID)


def test_objects_inferfleet_did_not_make_are_never_touched() -> None:
    foreign_claim = {"metadata": {"name": "inferfleet-node-cache", "namespace": "team-a", "labels": {}}}
    verdict = ensure(wanted(), ObservedVolume(foreign_claim, None, UID), provision=True)
    assert verdict.actions == () and verdict.reason == REASON_VOLUME_CONFLICT
    foreign_volume = {"metadata": {"name": wanted().volume}, "spec": {"hostPath": {"path": "/"}}}
    verdict = ensure(wanted(), ObservedVolume(None, foreign_volume, UID), provision=True)
    assert verdict.actions == () and verdict.reason == REASON_VOLUME_CONFLICT


def test_without_the_namespaces_uid_nothing_is_created() -> None:
    verdict = ensure(wanted(uid=None), ObservedVolume(None, None, None), provision=True)
    assert verdict.actions == () and verdict.reason == REASON_VOLUME_PENDING


def test_pre_provisioned_volumes_are_only_used() -> None:
    verdict = ensure(wanted(uid=None), ObservedVolume(None), provision=False)
    assert verdict.actions == () and verdict.reason == REASON_VOLUME_MISSING
    assert "inferfleet cache volumes --namespace team-a" in str(verdict.message)
    pending = _pending(wanted(uid=None).persistent_volume_claim())
    assert ensure(wanted(uid=None), ObservedVolume(pending), provision=False).reason == REASON_VOLUME_PENDING


def test_the_cli_prints_what_a_platform_admin_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """`inferfleet cache volumes` prints the same two objects the operator creates."""
    import yaml
    from typer.testing import CliRunner

    import inferfleet.cli.cache  # noqa: F401  (registers `cache` on the app)
    from inferfleet.cli import app

    monkeypatch.delenv("INFERFLEET_CACHE_NODE_PATH", raising=False)
    result = CliRunner().invoke(app, ["cache", "volumes", "--namespace", "team-a", "--namespace-uid", UID])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load_all(result.output)) == wanted().objects()
    for bad in (["--namespace", "Team_A"], ["--namespace", "team-a", "--node-path", "/etc/cache"]):
        refused = CliRunner().invoke(app, ["cache", "volumes", *bad])
        assert refused.exit_code == 2, refused.output
