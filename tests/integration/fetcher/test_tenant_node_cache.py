"""Two teams on one node, each running exactly the pods the operator renders for it.

Team A (namespace `team-a`) serves a gated model and an S3 model; team B (`team-b`), the
attacker, may create InferenceServices, Secrets and pods in its own namespace only. Each
pod's `inferfleet cache ...` command runs for real against one directory standing for
the node's disk, its mounts resolved as a kubelet resolves them (tests/integration/
fetcher/kubelet.py). What B tries, by the rows of the tenancy issue:

- read A's gated weights: name the same source without A's token;
- replace A's model: name the same `s3://` URI with a Secret of the same name whose
  endpoint is B's own server, so that A's next pod would load B's weights;
- evict A's revisions with a tiny eviction budget;
- write inside A's sealed revision;
- aim its own `spec.cache.nodePath` at A's tree or sealed revision.
"""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferfleet.api import InferenceService, SpecInvalid, load_all
from inferfleet.caching.precache.volumes import NodeCacheVolume
from inferfleet.config import OperatorSettings
from inferfleet.planner import plan_service
from tests.conftest import EXAMPLES_DIR
from tests.integration.fetcher.conftest import free_port
from tests.integration.fetcher.hub_server import FakeRepo, HubServer, tiny_model_files
from tests.integration.fetcher.kubelet import Node, Pod, visible_files, wipe
from tests.toolkit.design import render

pytestmark = pytest.mark.integration

SETTINGS = OperatorSettings()
GATED = "acme/gated-llama"
VICTIM_TOKEN = "hf_victim_token"
UIDS = {"team-a": "0a0a0a0a-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "team-b": "0b0b0b0b-bbbb-4bbb-8bbb-bbbbbbbbbbbb"}
FETCHER_UID = 65532


def service(
    namespace: str, source: str, secret: str | None, revision: str | None = None, **cache: Any
) -> InferenceService:
    body = yaml.safe_load((EXAMPLES_DIR / "llama-8b-chat.yaml").read_text())
    body["metadata"] = {"name": "chat", "namespace": namespace, "uid": f"{namespace}-chat"}
    body["spec"]["model"]["source"] = source
    if revision is not None:
        body["spec"]["model"]["revision"] = revision
    if secret is None:
        body["spec"]["model"].pop("credentialsSecretRef", None)
    else:
        body["spec"]["model"]["credentialsSecretRef"] = {"name": secret}
    body["spec"]["cache"] = {"mode": "nvme", **cache}
    return load_all(yaml.safe_dump(body), source="test")[0]


def pods(
    svc: InferenceService, node: Node, scratch: Path, secrets: dict[str, dict[str, str]]
) -> tuple[Pod, Pod]:
    """(the l4 tier's pre-cache pod, its serving pod) on `node`, as rendered."""
    objects = render(svc, plan_service(svc), SETTINGS)
    daemonset = next(
        o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("-l4-cache")
    )
    deployment = next(
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-l4")
    )
    make = lambda obj, name: Pod(  # noqa: E731
        node, svc.namespace, copy.deepcopy(obj["spec"]["template"]["spec"]), scratch / name, secrets
    )
    return make(daemonset, "precache"), make(deployment, "serving")


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """One node with each team's node-cache volume bound, as the operator creates them."""
    found = Node(tmp_path / "node")
    for namespace, uid in UIDS.items():
        volume = NodeCacheVolume(namespace, uid, SETTINGS.cache_node_path, SETTINGS.cache_node_path, 500)
        found.bind(volume.persistent_volume())
    return found


@pytest.fixture
def gated_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(FakeRepo(GATED, token=VICTIM_TOKEN)).add_commit(tiny_model_files(seed=11))
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
        yield server


def fetch(pod: Pod) -> subprocess.CompletedProcess[str]:
    return pod.run("fetch-model", drop=["--hold", "--gc-interval-s"])


def tree(node: Node, namespace: str) -> Path:
    return node.host(f"{SETTINGS.cache_node_path}/.tenants/{namespace}-{UIDS[namespace]}")


def test_another_team_cannot_read_gated_weights_without_its_own_token(
    node: Node, gated_hub: HubServer, tmp_path: Path
) -> None:
    victim = service("team-a", f"hf://{GATED}", "hf-token")
    victim_precache, victim_serving = pods(
        victim, node, tmp_path / "a", {"hf-token": {"token": VICTIM_TOKEN}}
    )
    done = fetch(victim_precache)
    assert done.returncode == 0, done.stderr
    verified = victim_serving.run("cache-verify")
    assert verified.returncode == 0, verified.stderr
    victim_files = {
        path for path in visible_files(victim_serving.sees("vllm")) if path.suffix == ".safetensors"
    }
    assert victim_files, "the victim's serving pod sees its own weights"

    # B names the exact commit A cached (a commit needs no network check once complete).
    commit = gated_hub.state.repos[GATED].resolve("main")
    attacker = service("team-b", f"hf://{GATED}", None, revision=commit)
    attacker_precache, attacker_serving = pods(attacker, node, tmp_path / "b", {})
    before = len(gated_hub.state.requests)
    stolen = fetch(attacker_precache)
    # Not "already complete, 0 hub requests": B's own tree holds nothing, and the hub
    # refuses B (no token); B's pre-cache fails with the reason.
    assert stolen.returncode != 0 and "BadCredentials" in stolen.stderr
    assert len(gated_hub.state.requests) > before
    # And B's pods, whatever image they run, mount nothing that holds A's files.
    for pod in (attacker_precache, attacker_serving):
        for container in [*pod.spec.get("initContainers", []), *pod.spec["containers"]]:
            assert not visible_files(pod.sees(container["name"])) & victim_files, container["name"]


@pytest.fixture
def two_stores(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two S3-compatible servers, each with its own state (one per process)."""
    pytest.importorskip("boto3", reason="s3:// needs inferfleet[cache]")
    pytest.importorskip("moto.server", reason="moto[server] is a test extra")
    servers: list[subprocess.Popen[bytes]] = []
    endpoints: list[str] = []
    for _ in range(2):
        port = free_port()
        servers.append(
            subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        endpoints.append(f"http://127.0.0.1:{port}")
    try:
        for endpoint in endpoints:
            _wait_for(endpoint)
        yield endpoints[0], endpoints[1]
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)


def _wait_for(endpoint: str) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _put_model(endpoint: str, seed: int) -> dict[str, bytes]:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    client.create_bucket(Bucket="models")
    files = tiny_model_files(seed=seed)
    for name, data in files.items():
        client.put_object(Bucket="models", Key=f"llama/{name}", Body=data)
    return files


def _s3_secret(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint,
    }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_another_team_cannot_replace_a_model_or_evict_its_revisions(
    node: Node, two_stores: tuple[str, str], tmp_path: Path
) -> None:
    victim_endpoint, attacker_endpoint = two_stores
    victim_files = _put_model(victim_endpoint, seed=21)
    _put_model(attacker_endpoint, seed=22)  # same bucket and key names, other weights
    weights = "model-00001-of-00002.safetensors"

    victim = service("team-a", "s3://models/llama", "s3-creds")
    victim_precache, victim_serving = pods(
        victim, node, tmp_path / "a", {"s3-creds": _s3_secret(victim_endpoint)}
    )
    done = fetch(victim_precache)
    assert done.returncode == 0, done.stderr

    # B: the same URI, a Secret of the same name, its own endpoint; and a tiny budget.
    attacker = service("team-b", "s3://models/llama", "s3-creds", eviction={"budgetGiB": 0.000001})
    attacker_precache, _ = pods(attacker, node, tmp_path / "b", {"s3-creds": _s3_secret(attacker_endpoint)})
    done = fetch(attacker_precache)
    assert done.returncode == 0, done.stderr

    # A's next serving pod: what its vLLM container loads (its model argument, through
    # the pod's mounts) holds A's own weights.
    verified = victim_serving.run("cache-verify")
    assert verified.returncode == 0, verified.stderr
    vllm = victim_serving.container("vllm")
    loaded = Path(victim_serving.translate(vllm, str(vllm["args"][0]))).resolve()
    assert _digest(loaded / weights) == hashlib.sha256(victim_files[weights]).hexdigest(), (
        "B replaced A's model"
    )
    assert loaded.is_relative_to(tree(node, "team-a"))
    # B's budget evicted only within B's own tree: A's revision is all there.
    deep = victim_precache.run(
        "fetch-model", drop=["--hold", "--gc-interval-s", "--budget-gib", "--node-root"]
    )
    assert deep.returncode == 0 and "already complete" in deep.stdout, deep.stderr


def test_a_sealed_revision_cannot_be_written_by_any_fetcher(
    node: Node, gated_hub: HubServer, tmp_path: Path
) -> None:
    victim = service("team-a", f"hf://{GATED}", "hf-token")
    precache, _ = pods(victim, node, tmp_path / "a", {"hf-token": {"token": VICTIM_TOKEN}})
    done = fetch(precache)
    assert done.returncode == 0, done.stderr
    (revision,) = list(tree(node, "team-a").glob("*/revisions/*"))
    for path in [revision, *revision.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o555 if path.is_dir() else 0o444), (path, oct(mode))
    # As the fetcher's own user, owning the tree as in the pod (the cache-owner container
    # chowns it): no new file, no rewritten weights.
    assert _writes_refused(revision), "a sealed revision took a write"
    wipe(tree(node, "team-a"))


def _writes_refused(revision: Path) -> bool:
    """Whether both a new file and a rewrite inside `revision` fail for the owner of the
    tree. Under root (which ignores file modes) the tree is handed to the fetcher's UID and
    a forked child drops to it; otherwise this process is already such a user."""
    if os.geteuid() == 0:
        for path in [revision, *revision.rglob("*")]:
            os.chown(path, FETCHER_UID, FETCHER_UID, follow_symlinks=False)
        pid = os.fork()
        if pid == 0:  # the child: drop to the fetcher's user, try, report by exit code
            code = 2
            try:
                os.setgroups([])
                os.setgid(FETCHER_UID)
                os.setuid(FETCHER_UID)
                code = 0 if _attempts_refused(revision) else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    return _attempts_refused(revision)


def _attempts_refused(revision: Path) -> bool:
    refused = 0
    for attempt in (
        lambda: (revision / "planted.safetensors").write_bytes(b"x"),
        lambda: next(revision.glob("*.safetensors")).write_bytes(b"x"),
    ):
        try:
            attempt()
        except PermissionError:
            refused += 1
    return refused == 2


def test_another_teams_tiny_budget_evicts_only_its_own_revisions(
    node: Node, gated_hub: HubServer, tmp_path: Path
) -> None:
    gated_hub.state.repos["acme/public"] = FakeRepo("acme/public")
    gated_hub.state.repos["acme/public"].add_commit(tiny_model_files(seed=12))
    victim = service("team-a", f"hf://{GATED}", "hf-token")
    victim_precache, _ = pods(victim, node, tmp_path / "a", {"hf-token": {"token": VICTIM_TOKEN}})
    done = fetch(victim_precache)
    assert done.returncode == 0, done.stderr
    victim_revisions = sorted(node.root.rglob("revisions/*"))
    assert victim_revisions

    # B fetches its own model with a budget far below one revision: its garbage collector
    # makes room in B's tree only (A's revision is not held: A's pre-cache pod is not
    # running, the case an eviction would hit first).
    attacker = service("team-b", "hf://acme/public", None, eviction={"budgetGiB": 0.000001})
    attacker_precache, _ = pods(attacker, node, tmp_path / "b", {})
    done = fetch(attacker_precache)
    assert done.returncode == 0, done.stderr
    assert all(revision.is_dir() for revision in victim_revisions), "B's budget evicted A's weights"


def test_a_node_path_aimed_at_another_teams_sealed_revision_is_refused(
    node: Node, gated_hub: HubServer, tmp_path: Path
) -> None:
    victim = service("team-a", f"hf://{GATED}", "hf-token")
    victim_precache, victim_serving = pods(
        victim, node, tmp_path / "a", {"hf-token": {"token": VICTIM_TOKEN}}
    )
    done = fetch(victim_precache)
    assert done.returncode == 0, done.stderr
    (revision,) = list(tree(node, "team-a").glob("*/revisions/*"))
    # B names, as its cache root, A's sealed revision, A's tree, and the directory of
    # every team's trees (host paths, as a spec would give them).
    for aimed in (revision, tree(node, "team-a"), tree(node, "team-a").parent):
        host_path = "/" + aimed.relative_to(node.root).as_posix()
        with pytest.raises(SpecInvalid) as refused:
            service("team-b", "hf://acme/public", None, nodePath=host_path)
        assert any("no component starting with '.'" in p.message for p in refused.value.problems), host_path

    # The closest root B may name is the shared one itself: B's fetch lands in B's own
    # tree, and A's revision is untouched (its next serving pod still verifies).
    gated_hub.state.repos["acme/public"] = FakeRepo("acme/public")
    gated_hub.state.repos["acme/public"].add_commit(tiny_model_files(seed=13))
    attacker = service("team-b", "hf://acme/public", None, nodePath=SETTINGS.cache_node_path)
    attacker_precache, _ = pods(attacker, node, tmp_path / "b", {})
    done = fetch(attacker_precache)
    assert done.returncode == 0, done.stderr
    assert list(tree(node, "team-b").glob("*/revisions/*")), "B's weights are in B's own tree"
    verified = victim_serving.run("cache-verify")
    assert verified.returncode == 0, verified.stderr
