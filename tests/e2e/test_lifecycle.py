"""Status converging once KWOK makes the pods Ready, a spec change rolling the workload
(and one that must not), and deletion removing everything through owner references."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually, holds
from tests.e2e.spec import gpu_service
from tests.e2e.test_reconcile import OWNED_COLLECTIONS, SERVICE_LABEL

NAME = "chat"
TIERS = [
    {
        "name": "l4",
        "gpu": "L4",
        "gpusPerNode": 1,
        "minReplicas": 2,
        "maxReplicas": 4,
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    },
    {"name": "a100", "gpu": "A100-SXM-80GB", "gpusPerNode": 8, "minReplicas": 1, "maxReplicas": 2},
]


def converged(cluster: Cluster, namespace: str) -> dict[str, Any]:
    body = cluster.service(namespace, NAME)
    status = body.get("status") or {}
    assert status.get("observedGeneration") == body["metadata"]["generation"], (
        f"observedGeneration {status.get('observedGeneration')} != {body['metadata']['generation']}"
    )
    found = conditions(body)
    assert found.get("Planned", {}).get("status") == "True", found.get("Planned")
    assert found.get("Ready", {}).get("status") == "True", found.get("Ready")
    for condition in found.values():
        assert condition.get("observedGeneration") in (None, body["metadata"]["generation"]), condition
    return body


def replica_sets(cluster: Cluster, namespace: str, deployment: str) -> list[dict[str, Any]]:
    return [
        rs
        for rs in cluster.list("apps/v1/replicasets", namespace, f"{SERVICE_LABEL}={NAME}")
        if any(ref["name"] == deployment for ref in rs["metadata"].get("ownerReferences") or [])
    ]


def test_status_converges_and_spec_changes_roll_only_when_pods_change(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = gpu_service(NAME, namespace, TIERS, cache={"mode": "none"})
    cluster.apply([body])

    live = eventually(lambda: converged(cluster, namespace), 120, what="status to converge")
    status = live["status"]
    assert status["tierSummary"] == "l4:2/2,a100:1/1"
    assert (status["readyReplicas"], status["desiredReplicas"]) == (3, 3)
    assert conditions(live)["Degraded"]["status"] == "False", conditions(live)["Degraded"]
    assert status.get("planHash")
    (first_rs,) = replica_sets(cluster, namespace, f"{NAME}-l4")

    # A change that does not touch a pod template: new generation observed, nothing rolls.
    body["spec"]["workload"]["peakRequestsPerSecond"] = 6
    cluster.apply([body])

    def observed_second_generation() -> None:
        assert converged(cluster, namespace)["metadata"]["generation"] == 2

    eventually(observed_second_generation, 60, what="generation 2 observed")
    holds(lambda: _single_replica_set(cluster, namespace, first_rs["metadata"]["name"]), duration_s=8)

    # A change to vLLM's flags: a new pod template, a rollout, and status follows it.
    plan_hash = (
        cluster.apps()
        .read_namespaced_deployment(f"{NAME}-l4", namespace)
        .metadata.annotations["inferfleet.dev/plan-hash"]
    )
    body["spec"]["tiers"][0]["overrides"] = {"maxNumSeqs": 32}
    cluster.apply([body])

    def rolled() -> None:
        deployment = cluster.apps().read_namespaced_deployment(f"{NAME}-l4", namespace)
        assert deployment.metadata.annotations["inferfleet.dev/plan-hash"] != plan_hash
        args = deployment.spec.template.spec.containers[0].args
        assert args[args.index("--max-num-seqs") + 1] == "32", args
        sets = replica_sets(cluster, namespace, f"{NAME}-l4")
        assert len(sets) == 2, [rs["metadata"]["name"] for rs in sets]
        new = next(rs for rs in sets if rs["metadata"]["name"] != first_rs["metadata"]["name"])
        assert (new["status"].get("readyReplicas") or 0) == 2, new["status"]
        old = next(rs for rs in sets if rs["metadata"]["name"] == first_rs["metadata"]["name"])
        assert old["spec"]["replicas"] == 0, old["spec"]
        assert deployment.status.updated_replicas == 2 and deployment.status.ready_replicas == 2
        converged(cluster, namespace)

    eventually(rolled, 120, what="the l4 tier to roll to the new flags")
    # The a100 tier's pods did not change: it did not roll.
    assert len(replica_sets(cluster, namespace, f"{NAME}-a100")) == 1


def _single_replica_set(cluster: Cluster, namespace: str, name: str) -> None:
    sets = [rs["metadata"]["name"] for rs in replica_sets(cluster, namespace, f"{NAME}-l4")]
    assert sets == [name], f"a change outside the pod template rolled the workload: {sets}"


def test_deleting_the_service_removes_every_owned_object(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    cluster.apply([gpu_service(NAME, namespace, TIERS)])
    eventually(lambda: converged(cluster, namespace), 120, what="status to converge")
    assert cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}={NAME}")

    done = cluster.kubectl("delete", "ifs", NAME, "-n", namespace, "--timeout=30s", check=False)
    assert done.returncode == 0, f"the delete did not complete (a finalizer?): {done.stderr}"

    def gone() -> None:
        left = {
            kind: [o["metadata"]["name"] for o in cluster.list(path, namespace, f"{SERVICE_LABEL}={NAME}")]
            for kind, path in {
                **OWNED_COLLECTIONS,
                "Pod": "v1/pods",
                "ReplicaSet": "apps/v1/replicasets",
            }.items()
        }
        assert not any(left.values()), f"left behind: { {k: v for k, v in left.items() if v} }"

    eventually(gone, 90, what="the garbage collector to remove every owned object")
