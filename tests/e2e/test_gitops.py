"""GitOps: the same InferenceService applied again and again (Argo CD, Flux, a CI job)
while the autoscaler owns the replicas. Nobody fights: the CR's spec stays the GitOps
tool's, the replica count stays the autoscaler's, and a settled operator writes nothing."""

from __future__ import annotations

import time

from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, eventually, holds
from tests.e2e.spec import gpu_service
from tests.e2e.test_lifecycle import NAME, TIERS, converged
from tests.e2e.test_restart import deployment_replicas, scale

GITOPS = "argocd-controller"


def test_reapplying_the_service_never_fights_the_autoscaler_over_replicas(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    operators.start(namespace)
    body = gpu_service(NAME, namespace, TIERS, cache={"mode": "none"})
    cluster.apply([body], manager=GITOPS)
    eventually(lambda: converged(cluster, namespace), 120, what="status to converge")
    scale(cluster, namespace, f"{NAME}-l4", 3)  # the autoscaler's write

    def three() -> None:
        assert deployment_replicas(cluster, namespace, f"{NAME}-l4") == 3

    # The same document again: a no-op, without --force-conflicts (nobody else owns spec).
    cluster.apply([body], manager=GITOPS)
    assert cluster.service(namespace, NAME)["metadata"]["generation"] == 1
    # A sync that changes something besides replicas (a label, the peak rate).
    body["metadata"]["labels"] = {"argocd.argoproj.io/instance": "serving"}
    body["spec"]["workload"]["peakRequestsPerSecond"] = 5
    cluster.apply([body], manager=GITOPS)

    def observed() -> None:
        assert converged(cluster, namespace)["metadata"]["generation"] == 2

    eventually(observed, 60, what="the new generation reconciled")
    holds(three, duration_s=15)
    # The operator never took any of the CR's spec: field ownership stays with GitOps.
    live = cluster.kubectl_json("get", "ifs", NAME, "-n", namespace, "--show-managed-fields")
    spec_owners = {
        entry["manager"]
        for entry in live["metadata"]["managedFields"]
        if "f:spec" in entry.get("fieldsV1", {})
    }
    assert spec_owners == {GITOPS}, spec_owners

    if audit is not None:
        # Settled: a quiet window in which the operator writes no workload at all (a
        # fight shows as writes back and forth on every pass).
        time.sleep(3)
        mark = audit.mark()
        time.sleep(20)
        user = f"system:serviceaccount:{namespace}:inferfleet-operator"
        writes = [
            f"{e.verb} {e.resource}/{e.name}"
            for e in audit.events(mark, users=[user])
            if e.write and e.resource.startswith("deployments")
        ]
        assert writes == [], writes
