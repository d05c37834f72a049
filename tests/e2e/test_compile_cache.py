"""Serving pods mount only their own compile-cache key, on the real control plane.

Two namespaces at Pod Security `restricted` (so the serving pods, the compile cache's
restore container and its publishing sidecar included, are admitted where `restricted`
is enforced; the pre-cache pods, whose cache-owner container needs root, are not, which
changes nothing the serving pods mount). In team A two services that differ only in a
flag that changes what the engine compiles (max model len); in team B the first one
again, with the same model and flags. The API server, the PersistentVolume controller
and the scheduler run for real (KWOK nodes); the pods' specs are what is checked:
- the key (status.cache[].compileKey) differs with the flag and not across namespaces,
  but each namespace's claim leads to its own tree (its own PersistentVolume);
- every mount of the node cache is one model directory (read-only) or the pod's own
  key: read-only in the restore container, writable only in the hold sidecar, which runs
  as the tree's owner; the vLLM container never mounts the key, and its cache variables
  point at its pod-local home;
- the pre-cache DaemonSet makes that same key.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, eventually
from tests.e2e.spec import gpu_service
from tests.e2e.test_tenancy_cache import TIERS, node_cache_volume, pod_security_namespace

RESTORE, HOLD, STORE_PATH = "compile-cache", "cache-hold", "/var/cache/inferfleet-compile"
FETCHER_UID = 65532


@pytest.fixture
def teams(cluster: Cluster) -> Iterator[tuple[str, str]]:
    names = tuple(f"e2e-compile-{which}-{uuid.uuid4().hex[:5]}" for which in "ab")
    for name in names:
        pod_security_namespace(cluster, name, "restricted")
    yield names[0], names[1]
    for name in names:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _service(name: str, namespace: str, max_model_len: int | None = None) -> dict[str, Any]:
    tiers = [dict(tier) for tier in TIERS]
    if max_model_len is not None:
        tiers[0]["overrides"] = {"maxModelLen": max_model_len}
    return gpu_service(name, namespace, tiers)


def _serving_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    pods = [
        pod
        for pod in cluster.list(
            "v1/pods", namespace, f"inferfleet.dev/service={name},inferfleet.dev/component=vllm"
        )
        if pod["spec"].get("nodeName")
    ]
    assert pods, f"{namespace}/{name}: no serving pod scheduled yet"
    return pods[0]


def _key(cluster: Cluster, namespace: str, name: str) -> str:
    entries = (cluster.service(namespace, name).get("status") or {}).get("cache") or []
    found = [e for e in entries if e.get("tier") == "l4"]
    assert len(found) == 1, entries
    key = found[0].get("compileKey")
    entry = found[0]
    assert key, entry
    return str(key)


def _check_pod(pod: dict[str, Any], key: str) -> None:
    spec = pod["spec"]
    claims = {
        v["name"]
        for v in spec["volumes"]
        if v.get("persistentVolumeClaim", {}).get("claimName") == "inferfleet-node-cache"
    }
    assert claims == {"model-cache", "compile-cache"}, spec["volumes"]
    containers = {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}
    model_dir = key.split("/", maxsplit=1)[0]
    for name, container in containers.items():
        for mount in container.get("volumeMounts") or []:
            if mount["name"] not in claims:
                continue
            sub = mount.get("subPath")
            if sub == f"compile/{key}":
                assert name in (RESTORE, HOLD), (name, mount)
                assert mount["mountPath"] == STORE_PATH
                assert bool(mount.get("readOnly")) is (name == RESTORE), (name, mount)
            else:
                assert sub == model_dir and mount.get("readOnly") is True, (name, mount)
    assert containers[HOLD]["securityContext"]["runAsUser"] == FETCHER_UID
    assert containers[HOLD]["restartPolicy"] == "Always"
    assert "runAsUser" not in containers[RESTORE]["securityContext"]  # the pod's own UID
    env = {e["name"]: e.get("value") for e in containers["vllm"].get("env") or []}
    assert env["VLLM_CACHE_ROOT"] == "/home/vllm/.cache/vllm"
    assert env["TRITON_CACHE_DIR"] == "/home/vllm/.cache/triton"
    restore_args = containers[RESTORE]["args"]
    assert restore_args[restore_args.index("--key") + 1] == key


def test_serving_pods_mount_only_their_own_compile_key(
    cluster: Cluster, teams: tuple[str, str], operators: Operators
) -> None:
    team_a, team_b = teams
    operators.start(team_a, namespaces=teams)
    cluster.apply(
        [
            _service("chat", team_a),
            _service("chat-long", team_a, max_model_len=4096),
            _service("chat", team_b),
        ]
    )
    deployed = [(team_a, "chat"), (team_a, "chat-long"), (team_b, "chat")]

    def scheduled() -> None:
        for namespace, name in deployed:
            _key(cluster, namespace, name)
            _serving_pod(cluster, namespace, name)

    eventually(scheduled, 150, what="serving pods admitted under restricted and scheduled; keys in status")
    keys = {(namespace, name): _key(cluster, namespace, name) for namespace, name in deployed}
    # A flag that changes what the engine compiles makes another key; the same model and
    # flags in another namespace make the same key name, in that namespace's own tree.
    assert keys[(team_a, "chat")] != keys[(team_a, "chat-long")]
    assert keys[(team_a, "chat")] == keys[(team_b, "chat")]
    paths = {
        namespace: node_cache_volume(cluster, namespace)["spec"]["hostPath"]["path"] for namespace in teams
    }
    assert paths[team_a] != paths[team_b]
    for (namespace, name), key in keys.items():
        _check_pod(_serving_pod(cluster, namespace, name), key)
        (daemonset,) = cluster.list("apps/v1/daemonsets", namespace, f"inferfleet.dev/service={name}")
        args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--compile-key") + 1] == key
