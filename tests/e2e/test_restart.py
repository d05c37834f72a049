"""Operator restarts and replicas: a crash in the middle of a reconcile pass loses nothing
and shrinks nothing; two operator processes never both act (Lease election)."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, conditions, eventually, holds
from tests.e2e.spec import gpu_service
from tests.e2e.test_lifecycle import NAME, TIERS, converged, replica_sets
from tests.e2e.test_reconcile import OWNED_COLLECTIONS, SERVICE_LABEL

SCALE_MANAGER = "inferfleet-operator-scale"


def uids(cluster: Cluster, namespace: str) -> dict[str, str]:
    """kind/name -> uid of everything the service owns (a re-created object changes uid)."""
    return {
        f"{kind}/{obj['metadata']['name']}": obj["metadata"]["uid"]
        for kind, path in OWNED_COLLECTIONS.items()
        for obj in cluster.list(path, namespace, f"{SERVICE_LABEL}={NAME}")
    }


def scale(cluster: Cluster, namespace: str, deployment: str, replicas: int) -> None:
    """What the autoscaler does: a merge patch of the scale subresource, under its manager."""
    cluster.kubectl(
        "patch",
        "deployment",
        deployment,
        "-n",
        namespace,
        "--subresource=scale",
        "--type=merge",
        f"--field-manager={SCALE_MANAGER}",
        "-p",
        f'{{"spec": {{"replicas": {replicas}}}}}',
    )


def deployment_replicas(cluster: Cluster, namespace: str, name: str) -> int:
    return int(cluster.apps().read_namespaced_deployment(name, namespace).spec.replicas)


def test_crash_mid_reconcile_loses_no_status_duplicates_nothing_and_scales_nothing_down(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    first = operators.start(namespace, name="first")
    body = gpu_service(NAME, namespace, TIERS)
    cluster.apply([body])
    before = eventually(lambda: converged(cluster, namespace), 120, what="status to converge")
    # The autoscaler's doing (three replicas on the l4 tier), through the scale subresource.
    scale(cluster, namespace, f"{NAME}-l4", 3)
    eventually(lambda: _ready_replicas(cluster, namespace, f"{NAME}-l4", 3), 60, what="3 ready l4 replicas")
    owned = uids(cluster, namespace)
    l4_sets = [rs["metadata"]["name"] for rs in replica_sets(cluster, namespace, f"{NAME}-l4")]
    planned_at = conditions(before)["Planned"]["lastTransitionTime"]

    # A spec change that rolls the a100 tier; the operator dies (SIGKILL) inside that pass,
    # as soon as its first write of the pass reaches the API server.
    mark = audit.mark() if audit else 0
    body["spec"]["tiers"][1]["overrides"] = {"maxNumSeqs": 16}
    cluster.apply([body])
    user = f"system:serviceaccount:{namespace}:inferfleet-first"
    if audit is not None:
        eventually(lambda: _wrote(audit, mark, user), 30, interval_s=0.02, what="the pass's first write")
    else:
        time.sleep(0.3)
    first.kill()
    if audit is not None:
        writes = [e for e in audit.events(mark, users=[user]) if e.write]
        assert writes, "the operator was killed before it wrote anything"

    operators.start(namespace, name="second")

    def settled() -> dict[str, Any]:
        live = converged(cluster, namespace)
        assert live["metadata"]["generation"] == 2
        sets = replica_sets(cluster, namespace, f"{NAME}-a100")
        assert len(sets) == 2, "the a100 tier has not rolled (or rolled twice)"
        active = [rs for rs in sets if rs["spec"]["replicas"] > 0]
        assert len(active) == 1 and (active[0]["status"].get("readyReplicas") or 0) == 1, [
            rs["status"] for rs in sets
        ]
        return live

    after = eventually(settled, 120, what="the second operator to finish the pass")
    # Nothing duplicated or re-created: the same objects, by uid, and no extra ones.
    assert uids(cluster, namespace) == owned
    # The l4 tier did not roll, and kept the autoscaler's three replicas.
    assert [rs["metadata"]["name"] for rs in replica_sets(cluster, namespace, f"{NAME}-l4")] == l4_sets
    holds(lambda: _exactly(cluster, namespace, f"{NAME}-l4", 3), duration_s=15)
    # Status carried over: the Planned condition did not flap, the plan hash moved on.
    assert conditions(after)["Planned"]["lastTransitionTime"] == planned_at
    assert after["status"]["planHash"] != before["status"]["planHash"]


def _wrote(audit: Audit, mark: int, user: str) -> None:
    assert any(e.write for e in audit.events(mark, users=[user])), "no write yet"


def _ready_replicas(cluster: Cluster, namespace: str, name: str, count: int) -> None:
    deployment = cluster.apps().read_namespaced_deployment(name, namespace)
    assert deployment.status.ready_replicas == count, deployment.status


def _exactly(cluster: Cluster, namespace: str, name: str, count: int) -> None:
    found = deployment_replicas(cluster, namespace, name)
    assert found == count, f"{name} went from {count} to {found} replicas after the restart"


def test_two_operator_processes_have_exactly_one_active_leader(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    peering = "inferfleet"
    cluster.apply(
        [
            {
                "apiVersion": "kopf.dev/v1",
                "kind": "KopfPeering",
                "metadata": {"name": peering, "namespace": namespace},
            }
        ]
    )
    mark = audit.mark() if audit else 0
    replicas = {
        name: operators.start(
            namespace, name=name, standalone=False, peering=peering, lease_namespace=namespace
        )
        for name in ("replica-a", "replica-b")
    }
    cluster.apply([gpu_service(NAME, namespace, TIERS[:1], cache={"mode": "none"})])
    eventually(lambda: converged(cluster, namespace), 120, what="one of the two to reconcile")

    def lease_holder() -> str:
        lease = cluster.kubectl_json("get", "lease", peering, "-n", namespace)
        holder = str(lease["spec"].get("holderIdentity") or "")
        assert holder in replicas, f"lease holder {holder!r}"
        return holder

    holder = eventually(lease_holder, 30, what="a lease holder")
    holds(lambda: _held_by(lease_holder(), holder), duration_s=15, interval_s=1)
    leaders = [name for name, process in replicas.items() if "is now the leader" in process.text()]
    assert leaders == [holder], f"processes that ever led: {leaders}"
    if audit is not None:
        # Only the leader's loops (autoscaler, resync) list InferenceServices; kopf's own
        # watch (user agent kopf/...) runs on both.
        listers = _loop_listers(audit, mark, namespace)
        assert listers == {f"system:serviceaccount:{namespace}:inferfleet-{holder}"}, listers

    # The leader shuts down cleanly: it releases the Lease, the other takes over at once.
    other = next(name for name in replicas if name != holder)
    replicas[holder].stop()
    assert not replicas[holder].alive()
    handover = audit.mark() if audit else 0
    eventually(lambda: _held_by(lease_holder(), other), 20, what=f"{other} to take the lease over")
    assert "is now the leader" in replicas[other].text()
    if audit is not None:
        time.sleep(6)  # at least one autoscaler tick of the new leader
        listers = _loop_listers(audit, handover, namespace)
        assert listers == {f"system:serviceaccount:{namespace}:inferfleet-{other}"}, listers


def _held_by(holder: str, expected: str) -> None:
    assert holder == expected, f"the lease moved to {holder} while {expected} was alive"


def _loop_listers(audit: Audit, mark: int, namespace: str) -> set[str]:
    return {
        e.user
        for e in audit.events(mark)
        if e.verb == "list"
        and e.resource == "inferenceservices"
        and e.namespace == namespace
        and not e.user_agent.startswith("kopf/")
        and e.user.startswith("system:serviceaccount:")
    }
