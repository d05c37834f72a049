"""Operator restarts and replicas: a crash in the middle of a reconcile pass loses nothing
and shrinks nothing; of two replicas exactly one writes (one Lease election decides who
reconciles and who autoscales), both serve the webhook, and a standby handles an edit
within 15 s of the leader's `kill -9`."""

from __future__ import annotations

import time
import uuid
from typing import Any

import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, conditions, controlplane, eventually, holds
from tests.e2e.spec import gpu_service
from tests.e2e.test_lifecycle import NAME, TIERS, converged, replica_sets
from tests.e2e.test_reconcile import OWNED_COLLECTIONS, SERVICE_LABEL
from tests.e2e.test_tenancy_probe import LOCAL_SETTINGS
from tests.integration.chart.helmchart import gen_install

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


def test_two_chart_replicas_have_one_writer_and_an_edit_is_handled_within_15_s_of_killing_it(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """Two replicas started as the chart starts them (its arguments and settings, its
    default of two replicas): exactly one of them writes, reconciling and autoscaling
    (the API server's audit log, by identity); both serve the webhook; after a `kill -9`
    of that one, a spec edit is handled by the other within 15 s."""
    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    assert audit is not None, "the one-writer check reads the local control plane's audit log"
    release = f"ha-{uuid.uuid4().hex[:5]}"
    objects = gen_install.render_chart(
        {"replicaCount": 2, "watchNamespaces": [namespace]}, name=release, namespace=namespace
    )
    # Whatever the chart makes replicas coordinate through (kopf peering objects, where a
    # version renders them); identities are the suite's own, one per replica.
    peerings = [o for o in objects if o["kind"] in ("KopfPeering", "ClusterKopfPeering")]
    if peerings:
        cluster.apply(peerings, manager="helm")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"][1:] if not a.startswith(("--webhook-host", "--webhook-cert-dir"))]
    env = {
        e["name"]: e["value"] for e in container["env"] if "value" in e and e["name"] not in LOCAL_SETTINGS
    }
    # One webhook address for both (a Service in a cluster): each binds it (SO_REUSEPORT).
    env["INFERFLEET_WEBHOOK_PORT"] = str(controlplane.free_port())
    lease_name = next(a.split("=", 1)[1] for a in args if a.startswith("--peering="))
    mark = audit.mark()
    replicas = {
        name: operators.start(
            namespace,
            name=name,
            run_args=args,
            env=env,
            lease_namespace=namespace,
            webhook=True,
            webhook_certificate=False,
        )
        for name in ("replica-a", "replica-b")
    }
    users = {name: f"system:serviceaccount:{namespace}:inferfleet-{name}" for name in replicas}
    body = gpu_service(NAME, namespace, TIERS[:1], cache={"mode": "none"})
    cluster.apply([body])
    eventually(lambda: converged(cluster, namespace), 120, what="one of the two to reconcile")

    def lease_holder() -> str:
        lease = cluster.kubectl_json("get", "lease", lease_name, "-n", namespace)
        holder = str(lease["spec"].get("holderIdentity") or "")
        assert holder in replicas, f"lease holder {holder!r}"
        return holder

    leader = eventually(lease_holder, 30, what="a lease holder")
    other = next(name for name in replicas if name != leader)
    time.sleep(12)  # two autoscaler ticks and more
    writers = _writers(audit, mark, namespace, set(users.values()))
    assert writers == {users[leader]}, f"writers in {namespace}: {writers} (leader {leader})"
    # The leader's loops (autoscaler, resync) list InferenceServices; the standby's do not.
    assert _loop_listers(audit, mark, namespace) == {users[leader]}
    assert _standby_writes(audit, mark, users[other]) == set(), "the standby wrote"

    # kill -9 the leader, then edit at once.
    killed = audit.mark()
    replicas[leader].kill()
    started = time.monotonic()
    body["spec"]["tiers"][0]["maxReplicas"] += 1
    cluster.apply([body])
    # The standby serves the webhook before (and whether or not) it leads.
    bad = gpu_service("bad", namespace, [{**TIERS[0], "gpu": "H1000"}], cache={"mode": "none"})
    eventually(lambda: _denied(cluster, bad), 5, interval_s=0.2, what="the standby's webhook")
    served_s = time.monotonic() - started

    def handled() -> None:
        live = cluster.service(namespace, NAME)
        assert (live.get("status") or {}).get("observedGeneration") == 2, live.get("status", {}).get(
            "observedGeneration"
        )

    eventually(handled, 60, interval_s=0.2, what="the edit to be handled")
    handled_s = time.monotonic() - started
    assert handled_s <= 15.0, f"the edit was handled {handled_s:.1f} s after the leader was killed"
    assert lease_holder() == other
    assert served_s < handled_s
    assert _writers(audit, killed, namespace, set(users.values())) == {users[other]}
    print(f"failover: webhook answered after {served_s:.1f} s, edit handled after {handled_s:.1f} s")


def _writers(audit: Audit, mark: int, namespace: str, users: set[str]) -> set[str]:
    """Who of `users` wrote anything in `namespace` but the Lease (kopf's annotations,
    status, children, events, scales)."""
    return {
        e.user
        for e in audit.events(mark)
        if e.user in users and e.write and e.namespace == namespace and e.resource != "leases"
    }


def _standby_writes(audit: Audit, mark: int, user: str) -> set[str]:
    """A standby's writes, but its own webhook registration."""
    return {
        f"{e.verb} {e.resource} {e.namespace}"
        for e in audit.events(mark, users=[user])
        if e.write and e.resource != "validatingwebhookconfigurations"
    }


def _denied(cluster: Cluster, body: dict[str, Any]) -> None:
    done = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(body), check=False
    )
    assert done.returncode != 0 and "denied the request" in done.stderr, done.stderr


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
