"""Two teams' namespaces at Pod Security `baseline` on the real control plane: the node
cache reaches each only through its own claim, and the other team cannot get at it.

What runs for real here: the API server's Pod Security admission (enforce=baseline on
both namespaces), RBAC for a tenant identity (a ServiceAccount that may create pods and
claims in its own namespace only), the PersistentVolume controller binding (or not
binding) claims, and the scheduler placing pods that mount them on KWOK's GPU nodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import NAMESPACE_LABEL, Cluster, conditions, eventually, holds, token_kubeconfig
from tests.e2e.spec import gpu_service

NAME = "chat"
TIERS = [
    {
        "name": "l4",
        "gpu": "L4",
        "gpusPerNode": 1,
        "minReplicas": 1,
        "maxReplicas": 2,
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    }
]
NODE_CACHE = "inferfleet.dev/component=node-cache"


def pod_security_namespace(cluster: Cluster, name: str, level: str) -> str:
    """A namespace enforcing Pod Security `level` (removed with the suite's); its uid."""
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl(
        "label", "namespace", name, f"{NAMESPACE_LABEL}=true", f"pod-security.kubernetes.io/enforce={level}"
    )
    return str(cluster.core().read_namespace(name).metadata.uid)


@pytest.fixture
def teams(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """Two namespaces that enforce Pod Security `baseline`."""
    names = tuple(f"e2e-team-{which}-{uuid.uuid4().hex[:5]}" for which in "ab")
    for name in names:
        pod_security_namespace(cluster, name, "baseline")
    yield names[0], names[1]
    for name in names:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def node_cache_volume(cluster: Cluster, namespace: str) -> dict[str, Any]:
    found = [
        pv
        for pv in cluster.list("v1/persistentvolumes", None, NODE_CACHE)
        if pv["metadata"]["labels"].get("inferfleet.dev/owner-namespace") == namespace
    ]
    assert len(found) == 1, [pv["metadata"]["name"] for pv in found]
    return found[0]


def running_pods(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    pods = cluster.list("v1/pods", namespace, f"inferfleet.dev/service={NAME}")
    return {
        pod["metadata"]["labels"]["inferfleet.dev/component"]: pod
        for pod in pods
        if pod["spec"].get("nodeName")
    }


def tenant(cluster: Cluster, namespace: str, workdir: Path) -> Path:
    """A team's identity: pods, claims and Secrets in its own namespace, nothing else."""
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "team", "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "team", "namespace": namespace},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["pods", "persistentvolumeclaims", "secrets"],
                        "verbs": ["get", "list", "create", "delete"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "team", "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team"},
                "subjects": [{"kind": "ServiceAccount", "name": "team", "namespace": namespace}],
            },
        ],
        manager="platform-admin",
    )
    return token_kubeconfig(cluster, namespace, "team", workdir / f"{namespace}-team.kubeconfig")


def test_each_team_reaches_only_its_own_tree_and_its_namespace_stays_at_baseline(
    cluster: Cluster, teams: tuple[str, str], operators: Operators, tmp_path: Path
) -> None:
    victim, attacker = teams
    operators.start(victim, namespaces=teams)
    for namespace in teams:
        body = gpu_service(NAME, namespace, TIERS)
        # A front door too: its endpoint picker runs in the team's namespace as well.
        body["spec"]["frontDoor"] = {"gateway": {"name": "shared"}}
        cluster.apply([body])

    def both_running() -> None:
        for namespace in teams:
            pods = running_pods(cluster, namespace)
            # Pod Security admission let every pod the operator renders in: the pre-cache
            # pod and the serving pod are both scheduled (on a claim that is bound).
            assert {"cache", "vllm", "epp"} <= set(pods), (namespace, sorted(pods))
            claim = cluster.core().read_namespaced_persistent_volume_claim("inferfleet-node-cache", namespace)
            assert claim.status.phase == "Bound", (namespace, claim.status.phase)

    eventually(both_running, 120, what="both teams' pre-cache and serving pods scheduled on bound claims")
    volumes = {namespace: node_cache_volume(cluster, namespace) for namespace in teams}
    paths = {namespace: pv["spec"]["hostPath"]["path"] for namespace, pv in volumes.items()}
    for namespace, pv in volumes.items():
        uid = cluster.core().read_namespace(namespace).metadata.uid
        assert pv["spec"]["claimRef"]["namespace"] == namespace
        assert paths[namespace] == f"/mnt/nvme/inferfleet/.tenants/{namespace}-{uid}"
    assert paths[victim] != paths[attacker]
    for namespace in teams:
        for pod in running_pods(cluster, namespace).values():
            assert not any("hostPath" in volume for volume in pod["spec"]["volumes"]), pod["metadata"]["name"]

    def cache_ready() -> None:
        for namespace in teams:
            ready = conditions(cluster.service(namespace, NAME)).get("CacheReady") or {}
            assert (ready.get("status"), ready.get("reason")) == ("True", "CacheReady"), ready

    eventually(cache_ready, 90, what="CacheReady once the claims are bound and the pre-cache pods Ready")

    team_b = tenant(cluster, attacker, tmp_path)

    def as_b(obj: dict[str, Any]) -> Any:
        text = yaml.safe_dump(obj)
        return cluster.kubectl("apply", "-f", "-", check=False, stdin=text, kubeconfig=team_b)

    # 1. Claim the victim's volume by name: the volume's claimRef names the victim's claim,
    #    so the PersistentVolume controller never binds B's claim to it.
    stolen_claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "borrowed", "namespace": attacker},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volumes[victim]["metadata"]["name"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    created = as_b(stolen_claim)
    assert created.returncode == 0, created.stderr
    holds(lambda: _not_bound(cluster, attacker, "borrowed"), duration_s=10)
    assert node_cache_volume(cluster, victim)["spec"]["claimRef"]["name"] == "inferfleet-node-cache"

    # 2. Mount the node's cache root directly: Pod Security baseline refuses a hostPath.
    refused = as_b(_host_path_pod(attacker, "/mnt/nvme/inferfleet"))
    assert refused.returncode != 0 and "hostPath" in refused.stderr, refused.stderr

    # 3. Make a volume of its own pointing anywhere: tenants cannot create PersistentVolumes.
    forged = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"forged-{attacker}"},
        "spec": {
            key: volumes[victim]["spec"][key]
            for key in (
                "capacity",
                "accessModes",
                "hostPath",
                "persistentVolumeReclaimPolicy",
            )
        },
    }
    denied = as_b(forged)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr


def _not_bound(cluster: Cluster, namespace: str, name: str) -> None:
    claim = cluster.core().read_namespaced_persistent_volume_claim(name, namespace)
    assert claim.status.phase != "Bound", "another namespace's claim bound the victim's node-cache volume"


def _host_path_pod(namespace: str, path: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reader", "namespace": namespace},
        "spec": {
            "containers": [{"name": "reader", "image": "busybox", "command": ["cat", "/cache"]}],
            "volumes": [{"name": "cache", "hostPath": {"path": path}}],
        },
    }


def test_a_recreated_namespace_gets_a_new_tree_not_the_old_teams(
    cluster: Cluster, operators: Operators, tmp_path: Path
) -> None:
    """A namespace deleted and created again under the same name (another team, say): the
    old volume pointed at the old tree; the operator replaces it with the new namespace's."""
    name = f"e2e-reused-{uuid.uuid4().hex[:5]}"

    first_uid = pod_security_namespace(cluster, name, "baseline")
    operators.start(name, namespaces=(name,), name="first")
    cluster.apply([gpu_service(NAME, name, TIERS)])
    first = eventually(lambda: node_cache_volume(cluster, name), 60, what="the first namespace's volume")
    assert first["spec"]["hostPath"]["path"].endswith(first_uid)
    operators.stop_all()
    cluster.kubectl("delete", "namespace", name, "--timeout=120s")

    second_uid = pod_security_namespace(cluster, name, "baseline")
    operators.start(name, namespaces=(name,), name="second")
    cluster.apply([gpu_service(NAME, name, TIERS)])

    def replaced() -> None:
        volume = node_cache_volume(cluster, name)
        assert volume["spec"]["hostPath"]["path"].endswith(second_uid), volume["spec"]["hostPath"]
        claim = cluster.core().read_namespaced_persistent_volume_claim("inferfleet-node-cache", name)
        assert claim.status.phase == "Bound"

    eventually(replaced, 120, what="a volume of the new namespace's own tree, bound")
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_serving_and_picker_pods_meet_restricted(cluster: Cluster, operators: Operators) -> None:
    """Without the node cache (whose cache-owner container needs root and CAP_CHOWN), every
    pod the operator renders is admitted where `restricted` is enforced."""
    name = f"e2e-restricted-{uuid.uuid4().hex[:5]}"
    pod_security_namespace(cluster, name, "restricted")
    try:
        operators.start(name, namespaces=(name,))
        body = gpu_service(NAME, name, TIERS, cache={"mode": "none"})
        body["spec"]["frontDoor"] = {"gateway": {"name": "shared"}}
        cluster.apply([body])

        def admitted() -> None:
            assert {"vllm", "epp"} <= set(running_pods(cluster, name)), sorted(running_pods(cluster, name))

        eventually(admitted, 120, what="serving and picker pods admitted under restricted")
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
