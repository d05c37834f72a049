"""pvc:// and file:// copies, disk-full handling, garbage collection and pins."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from inferfleet.caching.fetcher import store
from inferfleet.caching.fetcher.fetch import fetch
from inferfleet.caching.precache.fetch_errors import DiskFull
from tests.integration.fetcher.conftest import _cli, fast_options, run_cli
from tests.integration.fetcher.hub_server import tiny_model_files

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_pvc_copy_and_a_copied_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The claim "models" mounted under INFERFLEET_PVC_ROOT, holding a plain model directory.
    monkeypatch.setenv("INFERFLEET_PVC_ROOT", str(tmp_path / "claims"))
    files = tiny_model_files(seed=4)
    _write_tree(tmp_path / "claims" / "models" / "llama", files)

    plain = fetch("pvc://models/llama", tmp_path / "node" / "llama", fast_options())
    assert {e.path for e in plain.manifest.files} == {
        n for n in files if n not in {"README.md", "pytorch_model.bin"}
    }
    # A directory publishes no checksums: only the size is checked, and the bytes' own
    # SHA-256 is recorded so verify --deep (and a copy of this cache) can check them.
    assert all(e.verified == ["size"] for e in plain.manifest.files)
    for entry in plain.manifest.files:
        assert (plain.revision_dir / entry.path).read_bytes() == files[entry.path]
        assert entry.sha256 == hashlib.sha256(files[entry.path]).hexdigest()
    store.verify_revision(tmp_path / "node" / "llama", plain.manifest.revision_id, deep=True)

    # A cache copied onto a volume carries its marker: a second node checks against it.
    source = tmp_path / "exported"
    shutil.copytree(plain.revision_dir, source)
    copied = fetch(f"file://{source}", tmp_path / "node2" / "llama", fast_options())
    assert all(e.verified == ["size", "sha256"] for e in copied.manifest.files)


def test_file_source_with_published_sha256(tmp_path: Path) -> None:
    # A marker with sha256 sums (as a hub-fetched cache has) makes a copy verify them.
    source = tmp_path / "src"
    files = tiny_model_files(seed=5)
    _write_tree(source, files)

    from inferfleet.caching.precache.manifest import FileEntry, Manifest

    entries = [
        FileEntry(path=name, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        for name, data in files.items()
    ]
    marker = Manifest(
        source="hf://acme/x", ref="main", revision_id="r", files=entries, total_bytes=0, weight_bytes=0,
        fetched_at="2026-01-01T00:00:00Z", fetch_seconds=0, bytes_transferred=0,
    )  # fmt: skip
    (source / ".inferfleet").mkdir()
    (source / ".inferfleet" / "manifest.json").write_text(marker.to_json())

    result = fetch(f"file://{source}", tmp_path / "node" / "m", fast_options())
    assert all(e.verified == ["size", "sha256"] for e in result.manifest.files)
    assert ".inferfleet/manifest.json" not in {e.path for e in result.manifest.files}

    # Flip one byte in the source: the copy fails its checksum instead of becoming a cache.
    shard = source / "model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(1, 1))
    with pytest.raises(Exception, match="sha256"):
        fetch(f"file://{source}", tmp_path / "node" / "m", fast_options(revision="again"))


def test_disk_full_is_reported_before_downloading(tmp_path: Path) -> None:
    source = tmp_path / "src"
    _write_tree(source, tiny_model_files())
    dest = tmp_path / "node" / "m"
    with pytest.raises(DiskFull, match="GiB free"):
        fetch(f"file://{source}", dest, fast_options(free_bytes=lambda _: 1024))
    assert not (dest / "revisions").exists()


def _model_dir(tmp_path: Path, name: str, size_mib: int, seed: int) -> Path:
    source = tmp_path / "sources" / name / str(seed)
    files = tiny_model_files(seed=seed, shard_bytes=size_mib * MIB // 2)
    _write_tree(source, files)
    return source


def _age(dest: Path, revision_id: str, seconds_ago: float) -> None:
    marker = dest / "revisions" / revision_id / ".inferfleet" / "manifest.json"
    when = time.time() - seconds_ago
    os.utime(marker, (when, when))


def test_gc_evicts_least_recently_used_never_in_use_or_just_fetched(tmp_path: Path) -> None:
    node = tmp_path / "node"
    a, b = node / "model-a", node / "model-b"
    a_old = fetch(f"file://{_model_dir(tmp_path, 'a', 2, 1)}", a, fast_options(revision="v1")).manifest
    a_new = fetch(f"file://{_model_dir(tmp_path, 'a', 2, 2)}", a, fast_options(revision="v2")).manifest
    b_old = fetch(f"file://{_model_dir(tmp_path, 'b', 2, 3)}", b, fast_options(revision="v1")).manifest
    _age(a, a_old.revision_id, 3000)  # oldest, but a serving pod holds it
    _age(b, b_old.revision_id, 2000)
    _age(a, a_new.revision_id, 1000)

    pin = store.pin_revision(a, a_old.revision_id)
    try:
        # Budget for about two revisions; fetching a third one must evict one old revision.
        budget = int(2.5 * a_old.total_bytes)
        third = fetch(
            f"file://{_model_dir(tmp_path, 'b', 2, 4)}", b, fast_options(revision="v2", budget_bytes=budget)
        )
        assert third.gc is not None
        evicted = {(v.model_key, v.revision_id) for v in third.gc.evict}
        # LRU order skipping the pinned revision: b@v1 (2000 s) goes first, then a@v2 (1000 s).
        assert ("model-b", b_old.revision_id) in evicted
        assert ("model-a", a_old.revision_id) not in evicted
        assert ("model-b", third.manifest.revision_id) not in evicted
        assert (a / "revisions" / a_old.revision_id).is_dir()  # still there for the pod
        assert not (b / "refs" / "v1").exists() and not (b / "refs" / "v1").is_symlink()  # no dangling ref
    finally:
        os.close(pin)

    # Once the pod is gone the old revision is fair game.
    plan = store.collect_garbage(node, budget_bytes=int(1.5 * a_old.total_bytes), log=lambda _: None)
    assert ("model-a", a_old.revision_id) in {(v.model_key, v.revision_id) for v in plan.evict}
    assert not (a / "revisions" / a_old.revision_id).exists()


def test_disk_full_makes_room_by_evicting_unused_revisions(tmp_path: Path) -> None:
    node = tmp_path / "node"
    old = fetch(f"file://{_model_dir(tmp_path, 'a', 4, 1)}", node / "a", fast_options(revision="v1")).manifest
    capacity = old.total_bytes + 3 * MIB + 64 * MIB  # room for one revision (and the reserve)

    def free(_: Path) -> int:
        used = sum(r.size_bytes for r in store.scan(node))
        return capacity - used

    new = fetch(
        f"file://{_model_dir(tmp_path, 'a', 4, 2)}",
        node / "a",
        fast_options(revision="v2", budget_bytes=100 * MIB, free_bytes=free),
    )
    assert [p.name for p in (node / "a" / "revisions").iterdir()] == [new.manifest.revision_id]


def test_hold_cli_pins_a_revision_until_it_exits(tmp_path: Path) -> None:
    node = tmp_path / "node"
    dest = node / "m"
    fetched = fetch(f"file://{_model_dir(tmp_path, 'm', 1, 1)}", dest, fast_options())
    os.chmod(dest / "revisions", 0o555)  # the serving pod's mount is read-only; flock does not care
    holder = subprocess.Popen(
        [_cli(), "cache", "hold", "--dest", str(dest), "--revision", "main"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not store.scan(node)[0].in_use:
            time.sleep(0.05)
        assert store.scan(node)[0].in_use
    finally:
        holder.terminate()
        _, err = holder.communicate(timeout=20)
        os.chmod(dest / "revisions", 0o755)
    assert holder.returncode == 0 and "released" in err
    assert not store.scan(node)[0].in_use
    gone = run_cli("cache", "gc", "--root", str(node), "--budget-gib", "0")
    assert gone.returncode == 0, gone.stderr
    assert not (dest / "revisions" / fetched.manifest.revision_id).exists()


def test_a_pod_loads_and_holds_the_revision_it_verified_whatever_the_ref_does_later(tmp_path: Path) -> None:
    """verify --pin resolves the ref once; when a later fetch moves the ref, the pod's link
    and its hold stay on what it verified, and the garbage collector keeps that revision."""
    node = tmp_path / "node"
    dest = node / "m"
    first = fetch(f"file://{_model_dir(tmp_path, 'm', 1, 1)}", dest, fast_options()).manifest
    link = tmp_path / "pod" / "pinned" / "model"
    verified = run_cli("cache", "verify", "--dest", str(dest), "--revision", "main", "--pin", str(link))
    assert verified.returncode == 0, verified.stderr
    assert link.resolve() == (dest / "revisions" / first.revision_id).resolve()

    second = fetch(f"file://{_model_dir(tmp_path, 'm', 1, 2)}", dest, fast_options()).manifest
    assert second.revision_id != first.revision_id
    assert store.resolve_ref(dest, "main") == second.revision_id  # the ref moved on ...
    assert link.resolve() == (dest / "revisions" / first.revision_id).resolve()  # ... the pin did not

    holder = subprocess.Popen(
        [_cli(), "cache", "hold", "--pinned", str(link)], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 20
        held = lambda: {r.revision_id for r in store.scan(node) if r.in_use}  # noqa: E731
        while time.monotonic() < deadline and first.revision_id not in held():
            time.sleep(0.05)
        assert held() == {first.revision_id}
        plan = store.collect_garbage(node, budget_bytes=0, log=lambda _: None)
        assert first.revision_id not in {v.revision_id for v in plan.evict}
        assert (dest / "revisions" / first.revision_id).is_dir()
    finally:
        holder.terminate()
        holder.communicate(timeout=20)


@pytest.mark.parametrize(
    "target",
    [
        "relative/revisions/abc",
        "/cache/m/refs/main",
        "/cache/m/revisions/../../../etc",
        "/cache/m/revisions/.x",
    ],
)
def test_a_pin_that_is_no_revision_link_is_refused(tmp_path: Path, target: str) -> None:
    link = tmp_path / "model"
    os.symlink(target, link)
    held = run_cli("cache", "hold", "--pinned", str(link))
    assert held.returncode == 1 and "UnsafeSource" in held.stderr, held.stderr
