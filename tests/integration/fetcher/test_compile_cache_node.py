"""The engine's compile caches on one node, through the pods the operator renders.

Each pod's `inferfleet cache ...` commands run for real against a directory standing for
the node's disk, their mounts resolved as a kubelet resolves them (kubelet.py); a small
HTTP server stands for vLLM's /health, and the test writes what vLLM would have compiled
into the pod's home. What is shown:

- the pre-cache pod makes the tier's key directory; a first start restores nothing, the
  hold sidecar publishes after /health answers (sealed, with its marker) and only then
  says ready; the next pod on the node restores it (warm) into its own home;
- the vLLM container never mounts the key; the restore container mounts it read-only;
  another team's pods, with the same model and flags, reach only their own tree;
- an entry changed after publishing is not used (a first start instead);
- a failed publish exits once with `CompilePublishFailed` and is not retried;
- garbage collection takes a compile cache with its weights revision, and an orphan
  whatever the budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from inferfleet.caching.fetcher import compile_store
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache.fetch_errors import UnsafeSource
from tests.integration.fetcher.conftest import _cli, free_port
from tests.integration.fetcher.hub_server import FakeRepo, HubServer, tiny_model_files
from tests.integration.fetcher.kubelet import Node, Pod, visible_files, wipe
from tests.integration.fetcher.test_tenant_node_cache import SETTINGS, fetch, node, pods, service, tree

pytestmark = pytest.mark.integration
__all__ = ["node"]  # the fixture, shared with the tenancy tests

PUBLIC = "acme/open-llama"


@pytest.fixture
def public_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    with HubServer() as server:
        server.add_repo(FakeRepo(PUBLIC)).add_commit(tiny_model_files(seed=21))
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
        yield server


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def engine() -> Iterator[str]:
    """vLLM's /health, answering 200 (the engine is built)."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/health"
    finally:
        server.shutdown()
        server.server_close()


def _compiled_by_vllm(pod: Pod) -> Path:
    """What vLLM writes into the pod's home while it starts (and a symlink a hostile
    engine could leave, which publishing skips)."""
    home = pod.translate(pod.container("vllm"), "/home/vllm/.cache")
    graph = Path(home) / "vllm" / "torch_compile_cache" / "0123456789" / "rank_0_0" / "backbone"
    graph.mkdir(parents=True)
    (graph / "artifact.bin").write_bytes(b"compiled graph" * 100)
    kernels = Path(home) / "triton" / "ABCDEF"
    kernels.mkdir(parents=True)
    (kernels / "kernel.cubin").write_bytes(b"\x7fELF kernel")
    (Path(home) / "vllm" / "escape").symlink_to("/etc")
    return Path(home)


def _hold(pod: Pod, engine_url: str, termination_log: Path) -> subprocess.Popen[str]:
    """The hold sidecar as rendered (its --engine-url aimed at the stand-in)."""
    container = pod.container(compile_cache.HOLD_CONTAINER)
    args = [pod.translate(container, str(arg)) for arg in container["args"]]
    args[args.index("--engine-url") + 1] = engine_url
    env = {**os.environ, "INFERFLEET_TERMINATION_LOG": str(termination_log)}
    termination_log.write_text("")
    with (termination_log.parent / f"{termination_log.name}.stderr").open("w") as stderr:
        return subprocess.Popen(
            [_cli(), *container["command"][1:], *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            env=env,
        )


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)


def _state(pod: Pod) -> Path:
    return Path(pod.translate(pod.container(compile_cache.HOLD_CONTAINER), compile_cache.STATE_PATH))


def _wait_ready(pod: Pod, what: str, timeout_s: float = 60.0) -> None:
    """Until the hold sidecar's readiness file appears."""
    deadline = time.monotonic() + timeout_s
    while not (_state(pod) / compile_cache.READY_FILE).exists():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _restore(pod: Pod) -> Mapping[str, Any]:
    done = pod.run(compile_cache.RESTORE_CONTAINER)
    assert done.returncode == 0, done.stderr
    result: Mapping[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _serving(svc: Any, node: Node, scratch: Path) -> tuple[Pod, Pod]:
    precache, serving = pods(svc, node, scratch, {})
    verified = serving.run("cache-verify")
    assert verified.returncode == 0, verified.stderr
    return precache, serving


def _key_dir(node: Node, namespace: str) -> Path:
    (key,) = list((tree(node, namespace) / compile_cache.COMPILE_DIR).glob("*/*"))
    return key


def test_a_first_start_publishes_and_the_next_one_on_the_node_restores_it(
    node: Node, public_hub: HubServer, engine: str, tmp_path: Path
) -> None:
    svc = service("team-a", f"hf://{PUBLIC}", None)
    precache, first = pods(svc, node, tmp_path / "first", {})
    done = fetch(precache)
    assert done.returncode == 0, done.stderr
    key = _key_dir(node, "team-a")  # made by the pre-cache pod, empty
    assert list(key.iterdir()) == []
    verified = first.run("cache-verify")
    assert verified.returncode == 0, verified.stderr
    restored = _restore(first)
    assert restored["compileCache"] == "first" and restored["bytes"] == 0
    assert restored["key"] == "/".join(key.parts[-2:])
    revision = restored["revision"]
    assert revision == public_hub.state.repos[PUBLIC].resolve("main")

    _compiled_by_vllm(first)
    hold = _hold(first, engine, tmp_path / "first-termination")
    try:
        _wait_ready(first, "the sidecar never said ready")
        entry = key / revision
        assert (entry / "vllm/torch_compile_cache/0123456789/rank_0_0/backbone/artifact.bin").is_file()
        assert (entry / "triton/ABCDEF/kernel.cubin").read_bytes() == b"\x7fELF kernel"
        assert not (entry / "vllm" / "escape").exists()  # the symlink was not published
        for path in [entry, *entry.rglob("*")]:
            mode = path.stat().st_mode & 0o777
            assert mode == (0o555 if path.is_dir() else 0o444), (path, oct(mode))
        marker = json.loads((entry / compile_cache.COMPILE_MARKER).read_text())
        assert marker["revisionId"] == revision and len(marker["files"]) == 2
    finally:
        _stop(hold)

    _, second = _serving(svc, node, tmp_path / "second")
    warm = _restore(second)
    assert warm["compileCache"] == "warm" and warm["revision"] == revision and warm["bytes"] > 1000
    home = Path(second.translate(second.container("vllm"), "/home/vllm/.cache"))
    assert (home / "triton/ABCDEF/kernel.cubin").read_bytes() == b"\x7fELF kernel"
    assert os.access(home / "triton/ABCDEF/kernel.cubin", os.W_OK)  # the pod's own copy

    # Who mounts the key: the restore (read-only) and the hold sidecar; never vLLM.
    assert not any(str(host).startswith(str(key)) for host in second.sees("vllm"))
    restore_mounts = second.container(compile_cache.RESTORE_CONTAINER)["volumeMounts"]
    store = next(m for m in restore_mounts if m["mountPath"] == compile_cache.STORE_MOUNT_PATH)
    assert store["readOnly"] is True

    # An entry changed after publishing is not used: a first start instead.
    os.chmod(key / revision / "triton", 0o755)
    (key / revision / "triton" / "planted.py").write_text("import os; os.system('id')")
    _, third = _serving(svc, node, tmp_path / "third")
    assert _restore(third)["compileCache"] == "first"
    # ... and that pod's first start replaces it with what its own engine compiled.
    _compiled_by_vllm(third)
    hold = _hold(third, engine, tmp_path / "third-termination")
    try:
        _wait_ready(third, "the third pod's sidecar never said ready")
    finally:
        _stop(hold)
    assert not (key / revision / "triton" / "planted.py").exists()
    assert compile_store.entry_state(key, revision) == "intact"
    # An engine that wrote more than a compile cache ever is does not fill the node.
    with pytest.raises(UnsafeSource, match="more than"):
        compile_store.publish(key, "b" * 40, home_of(third), ["vllm", "triton"], print, max_bytes=10)
    wipe(tree(node, "team-a"))


def home_of(pod: Pod) -> Path:
    return Path(pod.translate(pod.container("vllm"), "/home/vllm/.cache"))


def test_another_team_with_the_same_model_and_flags_reaches_only_its_own_tree(
    node: Node, public_hub: HubServer, engine: str, tmp_path: Path
) -> None:
    victim = service("team-a", f"hf://{PUBLIC}", None)
    precache, first = pods(victim, node, tmp_path / "a", {})
    assert fetch(precache).returncode == 0
    assert first.run("cache-verify").returncode == 0
    assert _restore(first)["compileCache"] == "first"
    _compiled_by_vllm(first)
    hold = _hold(first, engine, tmp_path / "a-termination")
    try:
        _wait_ready(first, "no publish")
    finally:
        _stop(hold)
    victim_files = visible_files([_key_dir(node, "team-a")])
    assert victim_files

    attacker = service("team-b", f"hf://{PUBLIC}", None)
    attacker_precache, attacker_pod = pods(attacker, node, tmp_path / "b", {})
    assert fetch(attacker_precache).returncode == 0
    assert attacker_pod.run("cache-verify").returncode == 0
    # The same key name (same model, flags, image) in B's own tree, which holds nothing.
    assert _restore(attacker_pod)["compileCache"] == "first"
    assert _key_dir(node, "team-b").parts[-2:] == _key_dir(node, "team-a").parts[-2:]
    seen: set[Path] = set()
    for container in [*attacker_pod.spec["initContainers"], *attacker_pod.spec["containers"]]:
        seen |= visible_files(attacker_pod.sees(container["name"]))
    assert not seen & victim_files, "team B's pods reach team A's compile cache"
    wipe(tree(node, "team-a"))
    wipe(tree(node, "team-b"))


def test_a_failed_publish_exits_once_saying_why_and_is_not_retried(
    node: Node, public_hub: HubServer, engine: str, tmp_path: Path
) -> None:
    svc = service("team-a", f"hf://{PUBLIC}", None)
    precache, first = pods(svc, node, tmp_path / "a", {})
    assert fetch(precache).returncode == 0
    assert first.run("cache-verify").returncode == 0
    assert _restore(first)["compileCache"] == "first"
    _compiled_by_vllm(first)
    (_key_dir(node, "team-a") / ".partial").write_text("not a directory")  # the copy cannot start
    log = tmp_path / "termination"
    failed = _hold(first, engine, log)
    assert failed.wait(timeout=60) == 1
    _stop(failed)
    assert log.read_text().startswith("CompilePublishFailed: "), log.read_text()
    assert not (_state(first) / compile_cache.READY_FILE).exists()
    again = _hold(first, engine, log)  # the kubelet restarts the sidecar
    try:
        _wait_ready(first, "the restarted sidecar is not ready")
        assert not list(_key_dir(node, "team-a").glob("[0-9a-f]*")), "it published after all"
    finally:
        _stop(again)
    wipe(tree(node, "team-a"))


def test_a_compile_cache_is_collected_with_its_revision_and_an_orphan_whatever_the_budget(
    node: Node, public_hub: HubServer, engine: str, tmp_path: Path
) -> None:
    svc = service("team-a", f"hf://{PUBLIC}", None)
    precache, first = pods(svc, node, tmp_path / "a", {})
    assert fetch(precache).returncode == 0
    assert first.run("cache-verify").returncode == 0
    revision = _restore(first)["revision"]
    _compiled_by_vllm(first)
    hold = _hold(first, engine, tmp_path / "termination")
    try:
        _wait_ready(first, "no publish")
    finally:
        _stop(hold)
    key = _key_dir(node, "team-a")
    # An orphan: an entry of a revision this node no longer has (copied, marker and all).
    orphan = key / ("f" * 40)
    subprocess.run(["cp", "-a", str(key / revision), str(orphan)], check=True)
    root = tree(node, "team-a")
    dry = subprocess.run(
        [_cli(), "cache", "gc", "--root", str(root), "--budget-gib", "1000", "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert dry.returncode == 0 and f"{'f' * 40}" in dry.stdout and revision not in dry.stdout, dry.stdout
    roomy = subprocess.run(
        [_cli(), "cache", "gc", "--root", str(root), "--budget-gib", "1000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert roomy.returncode == 0, roomy.stderr
    assert not orphan.exists() and (key / revision).is_dir()
    # Nothing holds the revision now: a zero budget takes the weights and their compile cache.
    empty = subprocess.run(
        [_cli(), "cache", "gc", "--root", str(root), "--budget-gib", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert empty.returncode == 0, empty.stderr
    assert not (key / revision).exists()
    assert not list(root.glob("*/revisions/*"))
    assert SETTINGS.cache_node_path  # the node paths come from the operator's settings
    wipe(root)
