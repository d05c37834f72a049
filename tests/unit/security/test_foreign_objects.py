"""Objects the operator does not own stay untouched (in-memory API server).

A platform admin made a Role, a RoleBinding and a Service in a tenant's namespace whose
names happen to be those the operator renders for the tenant's InferenceService. At
6e505f6 a forced server-side apply rewrote their rules and subjects, added the tenant's
owner reference, and the garbage collector deleted them with the tenant's CR. Now they
are reported, never written; and an owned object someone replaces after the operator
looked at it is neither updated nor pruned.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from inferfleet.api import labels
from inferfleet.cluster import InMemoryCluster, TransientApiError
from inferfleet.controller import executor
from inferfleet.controller.reconciler import Reconciler, cr_ref
from inferfleet.kubedata import ObjectRef, owner_uids, ref_of
from inferfleet.reconcile import Apply, Delete, compute
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

RBAC = "rbac.authorization.k8s.io/v1"
PLATFORM = "platform-admin"


def platform_objects() -> list[dict[str, Any]]:
    meta = {"namespace": NAMESPACE, "labels": {"team": "platform"}}
    return [
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": f"{NAME}-epp", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": f"{NAME}-epp", **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-epp"},
            "subjects": [
                {"kind": "Group", "name": "platform-auditors", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, **meta},
            "spec": {"selector": {"app": "platform-proxy"}, "ports": [{"port": 443}]},
        },
    ]


def made_by_the_platform(cluster: InMemoryCluster) -> dict[ObjectRef, dict[str, Any]]:
    return {ref_of(obj): cluster.user_apply(obj, manager=PLATFORM) for obj in platform_objects()}


def writes_to(cluster: InMemoryCluster, refs: set[ObjectRef]) -> list[tuple[str, ObjectRef]]:
    return [(op, ref) for op, ref in cluster.calls if ref in refs and op not in {"get", "list"}]


def test_same_named_platform_objects_are_reported_never_taken_over() -> None:
    control = Control()
    before = made_by_the_platform(control.cluster)
    control.submit(example())
    control.reconcile()

    for ref, obj in before.items():
        assert control.cluster.objects[ref] == obj, f"{ref} was changed"
        assert control.cluster.managed[ref] == {
            (PLATFORM, "Apply"): control.cluster.managed[ref][(PLATFORM, "Apply")]
        }
    assert writes_to(control.cluster, set(before)) == [("create", ref) for ref in before]
    degraded = control.condition(labels.CONDITION_DEGRADED)
    assert (degraded["status"], degraded["reason"]) == ("True", labels.REASON_OBJECT_CONFLICT)
    for ref in before:
        assert (
            f"{ref.kind} {ref.namespace}/{ref.name} exists and is not this InferenceService's"
            in degraded["message"]
        )
    assert "Delete or rename it, or rename this InferenceService" in degraded["message"]
    warnings = [e for e in control.cluster.events if e["reason"] == labels.REASON_OBJECT_CONFLICT]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    # The rest of the fleet is there, and ours.
    owner = str(control.cr()["metadata"]["uid"])
    deployments = control.cluster.kinds("Deployment")
    assert {d["metadata"]["name"] for d in deployments} >= {f"{NAME}-l4", f"{NAME}-a100-burst"}
    assert all(owner in owner_uids(d) for d in deployments)
    # Made with POST: the fields are our Update entry's until the first apply claims them
    # for our Apply entry, so a field the spec drops goes (the Update entry would keep it).
    l4 = control.workload_ref("l4")
    assert set(control.cluster.managed[l4]) == {(labels.FIELD_MANAGER, "Update")}
    assert control.workloads()["l4"]["spec"]["template"]["spec"]["nodeSelector"]
    control.edit(lambda body: body["spec"]["tiers"][0].pop("nodeSelector"))
    control.reconcile()
    assert set(control.cluster.managed[l4]) == {(labels.FIELD_MANAGER, "Apply")}
    assert "nodeSelector" not in control.workloads()["l4"]["spec"]["template"]["spec"]

    # A later pass changes nothing either, and says nothing new.
    statuses = sum(op == "patch_status" for op, _ in control.cluster.calls)
    control.reconcile()
    assert writes_to(control.cluster, set(before)) == [("create", ref) for ref in before] * 3
    assert sum(op == "patch_status" for op, _ in control.cluster.calls) == statuses

    # Deleting the tenant's InferenceService takes its objects, not the platform's.
    control.cluster.user_delete(cr_ref(NAMESPACE, NAME))
    assert control.cluster.kinds("Deployment") == []
    for ref, obj in before.items():
        assert control.cluster.objects[ref] == obj


def created() -> Control:
    control = Control()
    control.submit(example())
    control.reconcile()
    return control


def reconciler(control: Control) -> Reconciler:
    found: Reconciler = control.memo["reconciler"]
    return found


def test_owned_means_our_owner_reference_and_uid_not_a_label_or_a_name() -> None:
    control = created()
    role = ObjectRef(RBAC, "Role", NAMESPACE, f"{NAME}-epp")
    # Someone takes our service label off (observe no longer finds it) and edits it: the
    # create finds it, it carries our owner reference, so it is written back.
    uid = control.cluster.objects[role]["metadata"]["uid"]
    control.cluster.update(
        role, lambda r: r["metadata"]["labels"].pop(labels.LABEL_SERVICE), manager="kubectl"
    )
    control.cluster.update(role, lambda r: r.__setitem__("rules", []), manager="kubectl-edit")
    control.reconcile()
    restored = control.cluster.objects[role]
    assert restored["metadata"]["uid"] == uid and restored["rules"]
    assert restored["metadata"]["labels"][labels.LABEL_SERVICE] == NAME
    assert control.condition(labels.CONDITION_DEGRADED)["status"] == "False"

    # A human edits our Role, so the next pass wants to write it back...
    control.cluster.update(role, lambda r: r.__setitem__("rules", []), manager="kubectl-edit")
    read = reconciler(control).read(NAMESPACE, NAME)
    assert read is not None
    intent = compute.compute(read[1])
    assert any(isinstance(a, Apply) and a.ref == role and a.why == "update" for a in intent.actions)
    # ...and between the read and the write the platform replaces it with its own.
    control.cluster.user_delete(role)
    platform = control.cluster.user_apply(platform_objects()[0], manager=PLATFORM)

    report = executor.execute(control.cluster, list(intent.actions))
    assert control.cluster.objects[role] == platform
    assert len(report.conflicts) == 1 and f"Role {NAMESPACE}/{NAME}-epp" in report.conflicts[0]
    assert report.failures == []


def test_an_owned_object_replaced_after_it_was_observed_is_not_pruned() -> None:
    control = created()
    read = reconciler(control).read(NAMESPACE, NAME)
    assert read is not None
    observed = {ref_of(obj): obj for obj in read[1].observed}
    role = ObjectRef(RBAC, "Role", NAMESPACE, f"{NAME}-epp")
    prune = Delete(role, uid=str(observed[role]["metadata"]["uid"]))
    control.cluster.user_delete(role)
    platform = control.cluster.user_apply(platform_objects()[0], manager=PLATFORM)

    report = executor.execute(control.cluster, [prune])
    assert report.deleted == [] and control.cluster.objects[role] == platform


def test_objects_of_a_deleted_service_of_the_same_name_are_waited_for_not_adopted() -> None:
    """Deleted and made again at once: the old objects go with the old owner (garbage
    collection); until then the pass waits (a retry), and takes none of them over."""
    control = Control()
    gone_owner = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "name": NAME,
        "uid": "uid-of-the-deleted-one",
        "controller": True,
    }
    leftover = platform_objects()[0]
    leftover["metadata"]["ownerReferences"] = [gone_owner]
    # The in-memory server refuses a dangling owner; the real one keeps it until its GC runs.
    control.cluster.user_apply({**leftover, "metadata": {**leftover["metadata"], "ownerReferences": []}})
    ref = ref_of(leftover)
    control.cluster.update(
        ref, lambda obj: obj["metadata"].__setitem__("ownerReferences", [gone_owner]), manager="gc-test"
    )
    before = control.cluster.objects[ref]
    control.submit(example())
    with pytest.raises(kopf.TemporaryError, match="still being deleted"):
        control.reconcile()
    assert control.cluster.objects[ref] == before
    control.cluster.user_delete(ref)  # the garbage collector's turn
    control.reconcile()
    assert str(control.cr()["metadata"]["uid"]) in owner_uids(control.cluster.objects[ref])


def test_an_api_error_quoting_tenant_text_reaches_kopf_escaped_and_capped() -> None:
    """kopf posts a TemporaryError's text as an Event on the InferenceService."""
    control = Control()
    control.submit(example())
    control.cluster.inject(
        "create", TransientApiError("etcd said: \u202eevil\nDegraded: False " + "x" * 100_000)
    )
    with pytest.raises(kopf.TemporaryError) as raised:
        control.reconcile()
    text = str(raised.value)
    assert len(text) <= 1024 and "\u202e" not in text and "\n" not in text
    assert "\\u202eevil\\nDegraded: False" in text
