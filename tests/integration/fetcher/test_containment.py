"""Hostile sources and a tampered cache: nothing is written outside the cache, nothing wrong sealed.

Loopback fakes play the hostile side: a hub whose listing holds traversal names or whose
commit id is a path, an S3 bucket whose keys climb into another model's revision, a
source tree with symlinks out of it, and a cache with symlinks and hard links planted
where the fetcher writes. Every case ends in a reason (UnsafeSource, MalformedListing,
WriteFailed), never a traceback, and the directories outside stay as they were.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from inferfleet.caching.fetcher import store
from inferfleet.caching.fetcher.fetch import fetch
from inferfleet.caching.precache.fetch_errors import (
    CacheCorrupt,
    MalformedListing,
    SourceInvalid,
    UnsafeSource,
)
from tests.integration.fetcher.conftest import REPO_ID, _cli, fast_options, run_cli
from tests.integration.fetcher.hub_server import FakeRepo, HubServer, tiny_model_files

pytestmark = pytest.mark.integration

OUTSIDE_CONTENT = b"precious: not the fetcher's to touch\n"


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry below `root` with its bytes (files) or target (symlinks)."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the cache root, holding one file nobody may change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_bytes(OUTSIDE_CONTENT)
    return folder


def hub_with(hub: HubServer, extra: dict[str, bytes]) -> None:
    repo = hub.add_repo(FakeRepo(REPO_ID))
    repo.add_commit({**tiny_model_files(), **extra})


HOSTILE_NAMES = {
    "parent": "../evil.json",
    "grandparent": "../../outside/evil.safetensors",
    "deep traversal": "sub/../../../outside/evil.json",
    "absolute": "/tmp/evil.json",
    "backslash": "..\\evil.json",
    "nul": "evil\x00.json",
    "newline": "evil\n.json",
    "part suffix": "model-00001-of-00002.safetensors.part",
    "dot segment": "./config.json",
    "empty segment": "sub//config.json",
}


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_hub_listing_with_an_unsafe_name_writes_nothing(
    hub: HubServer, tmp_path: Path, outside: Path, name: str
) -> None:
    hub_with(hub, {name: b'{"evil": true}'})
    before = snapshot(tmp_path)
    with pytest.raises(UnsafeSource) as caught:
        fetch(f"hf://{REPO_ID}", tmp_path / "cache" / "model", fast_options(allow_patterns=("*",)))
    assert repr(name) in caught.value.message
    assert snapshot(outside) == {"keep.txt": OUTSIDE_CONTENT}
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("cache/")}
    assert after == before
    assert not (tmp_path / "cache" / "model" / "revisions").exists()


@pytest.mark.parametrize(
    ("first", "second"),
    [("config.json", "Config.json"), ("caf\u00e9.json", "cafe\u0301.json"), ("a.json", "a.json/b.json")],
    ids=["case", "unicode normalisation", "file and directory"],
)
def test_names_that_would_collide_are_refused(
    hub: HubServer, tmp_path: Path, first: str, second: str
) -> None:
    hub_with(hub, {first: b"{}", second: b"{}"})
    with pytest.raises(UnsafeSource):
        fetch(f"hf://{REPO_ID}", tmp_path / "model", fast_options())


def test_a_commit_id_that_is_a_path_is_refused(hub: HubServer, tmp_path: Path, outside: Path) -> None:
    hub_with(hub, {})
    hub.state.info_override = {"sha": "../../../../outside/EVILREV"}
    with pytest.raises(UnsafeSource) as caught:
        fetch(f"hf://{REPO_ID}", tmp_path / "cache" / "model", fast_options())
    assert "40-hex" in caught.value.message
    assert snapshot(outside) == {"keep.txt": OUTSIDE_CONTENT}
    assert not (outside / "EVILREV").exists()


def test_a_requested_revision_that_is_a_path_is_a_usage_error(tmp_path: Path, outside: Path) -> None:
    with pytest.raises(SourceInvalid):
        fetch(
            f"hf://{REPO_ID}", tmp_path / "cache" / "m", fast_options(revision="../../../../outside/EVILREV")
        )
    result = run_cli(
        "cache", "fetch", "--source", f"hf://{REPO_ID}", "--dest", str(tmp_path / "m"),
        "--revision", "../../../../outside/EVILREV",
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "revision" in result.stderr


@pytest.mark.parametrize(
    "answer",
    [
        b"{not json",
        b'{"sha": "' + b"a" * 40 + b'", "siblings": "not a list"}',
        b'{"sha": "' + b"a" * 40 + b'", "siblings": [{"rfilename": 5, "size": 1}]}',
        b'{"sha": "' + b"a" * 40 + b'", "siblings": [{"rfilename": "config.json", "size": -1}]}',
        b'{"sha": "' + b"a" * 40 + b'", "siblings": [{"rfilename": "x.json", "size": 1, '
        b'"lfs": {"sha256": "../etc", "size": 1}}]}',
        b"[]",
        b"null",
    ],
    ids=[
        "bad json",
        "siblings a string",
        "name a number",
        "negative size",
        "sha256 a path",
        "a list",
        "null",
    ],
)
def test_a_malformed_hub_answer_is_a_reason_not_a_traceback(
    hub: HubServer, tmp_path: Path, answer: bytes
) -> None:
    hub_with(hub, {})
    hub.state.info_raw = answer
    with pytest.raises((MalformedListing, UnsafeSource)):
        fetch(f"hf://{REPO_ID}", tmp_path / "model", fast_options())
    result = run_cli("cache", "fetch", "--source", f"hf://{REPO_ID}", "--dest", str(tmp_path / "cli"))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: MalformedListing: " in result.stderr or "error: UnsafeSource: " in result.stderr


def upload(client: Any, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    client.create_bucket(Bucket=bucket)
    for name, data in files.items():
        client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)


def test_one_tenants_listing_never_adds_files_to_anothers_revision(s3: Any, tmp_path: Path) -> None:
    node = tmp_path / "node"
    upload(s3, "tenant-b", "m", tiny_model_files(seed=7))
    victim = fetch("s3://tenant-b/m", node / "s3--tenant-b--m", fast_options())
    before = snapshot(victim.revision_dir)
    # Tenant A's keys climb out of A's partial directory into B's finished revision.
    climb = f"../../../s3--tenant-b--m/revisions/{victim.manifest.revision_id}"
    upload(s3, "tenant-a", "m", {**tiny_model_files(seed=8), f"{climb}/evil.json": b'{"evil": 1}'})
    with pytest.raises(UnsafeSource):
        fetch("s3://tenant-a/m", node / "s3--tenant-a--m", fast_options())
    assert snapshot(victim.revision_dir) == before
    store.verify_revision(node / "s3--tenant-b--m", victim.manifest.revision_id, deep=True)
    # And had anything put a file there, verify (even without --deep) would say so.
    (victim.revision_dir / "evil.json").write_bytes(b"{}")
    with pytest.raises(CacheCorrupt, match=r"evil\.json: on disk but not in the marker"):
        store.verify_revision(node / "s3--tenant-b--m", victim.manifest.revision_id)


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.mark.parametrize("scheme", ["file", "pvc"])
def test_source_trees_are_walked_without_leaving_them(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    monkeypatch.setenv("INFERFLEET_PVC_ROOT", str(tmp_path / "claims"))
    tree = tmp_path / "claims" / "claim" / "model"
    write_tree(tree, tiny_model_files(seed=9))
    uri = f"file://{tree}" if scheme == "file" else "pvc://claim/model"
    # A link to a file inside the tree is fine, and is copied as a file.
    (tree / "generation_config.json").symlink_to("config.json")
    inside = fetch(uri, tmp_path / "node" / "inside", fast_options())
    copied = inside.revision_dir / "generation_config.json"
    assert not copied.is_symlink() and copied.read_bytes() == (tree / "config.json").read_bytes()
    # One leaving it (a file or a directory) is refused.
    for link, target in (("tokenizer_config.json", outside / "keep.txt"), ("extra", outside)):
        (tree / link).unlink(missing_ok=True)
        (tree / link).symlink_to(target)
        with pytest.raises(UnsafeSource, match="outside the source tree"):
            fetch(uri, tmp_path / "node" / f"out-{link}", fast_options())
        (tree / link).unlink()


# (where, what the planted symlink points at): the fetcher writes (or empties) each place.
PLANTS = [
    (".lock", "file"),
    (".partial", "dir"),
    (".partial/REV", "dir"),
    (".partial/REV/config.json.part", "file"),
    (".partial/REV/config.json", "file"),
    ("revisions", "dir"),
    ("refs", "dir"),
    (".trash", "dir"),
]


@pytest.mark.parametrize(("planted", "kind"), PLANTS, ids=[where for where, _ in PLANTS])
def test_a_symlink_planted_in_the_cache_is_never_written_through(
    hub: HubServer, tmp_path: Path, outside: Path, planted: str, kind: str
) -> None:
    commit = hub.add_repo(FakeRepo(REPO_ID)).add_commit(tiny_model_files())
    dest = tmp_path / "cache" / "model"
    link = dest / planted.replace("REV", commit)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "keep.txt" if kind == "file" else outside)
    with pytest.raises(UnsafeSource):
        fetch(f"hf://{REPO_ID}", dest, fast_options())
    assert snapshot(outside) == {"keep.txt": OUTSIDE_CONTENT}
    assert link.is_symlink()  # refused, not "repaired" behind anyone's back


def test_the_marker_is_always_the_fetchers_own(hub: HubServer, tmp_path: Path) -> None:
    """A listed `.inferfleet/manifest.json` is never selected, whatever --allow-pattern says."""
    hub_with(hub, {".inferfleet/manifest.json": b'{"evil": true}'})
    result = fetch(f"hf://{REPO_ID}", tmp_path / "model", fast_options(allow_patterns=("*",)))
    assert ".inferfleet/manifest.json" not in {entry.path for entry in result.manifest.files}
    store.verify_revision(tmp_path / "model", result.manifest.revision_id, deep=True)


def test_a_hard_link_planted_at_a_part_file_is_refused(hub: HubServer, tmp_path: Path, outside: Path) -> None:
    commit = hub.add_repo(FakeRepo(REPO_ID)).add_commit(tiny_model_files())
    dest = tmp_path / "cache" / "model"
    partial = dest / ".partial" / commit
    partial.mkdir(parents=True)
    os.link(outside / "keep.txt", partial / "config.json.part")
    with pytest.raises(UnsafeSource, match="one link"):
        fetch(f"hf://{REPO_ID}", dest, fast_options())
    assert (outside / "keep.txt").read_bytes() == OUTSIDE_CONTENT


def test_a_symlink_planted_in_a_sealed_revision_fails_verify(
    hub: HubServer, tmp_path: Path, outside: Path
) -> None:
    hub.add_repo(FakeRepo(REPO_ID)).add_commit(tiny_model_files())
    dest = tmp_path / "model"
    result = fetch(f"hf://{REPO_ID}", dest, fast_options())
    config = result.revision_dir / "config.json"
    size = config.stat().st_size
    (outside / "same-size.json").write_bytes(b"x" * size)
    config.unlink()
    config.symlink_to(outside / "same-size.json")
    with pytest.raises(CacheCorrupt, match=r"config\.json"):
        store.verify_revision(dest, result.manifest.revision_id)


def test_unhashed_sources_are_hashed_so_deep_verify_catches_a_flipped_byte(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    write_tree(tree, tiny_model_files(seed=11))
    dest = tmp_path / "model"
    result = fetch(f"file://{tree}", dest, fast_options())
    shard = next(e for e in result.manifest.files if e.path.endswith(".safetensors"))
    assert shard.sha256 == hashlib.sha256((tree / shard.path).read_bytes()).hexdigest()
    path = result.revision_dir / shard.path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, header intact: only a checksum sees it
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    store.verify_revision(dest, result.manifest.revision_id)  # sizes and headers: fine
    with pytest.raises(CacheCorrupt, match="sha256"):
        store.verify_revision(dest, result.manifest.revision_id, deep=True)
    cli = run_cli("cache", "verify", "--dest", str(dest), "--deep")
    assert cli.returncode == 1 and "CacheCorrupt" in cli.stderr


def test_efbig_is_a_reason_not_a_traceback(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    write_tree(tree, tiny_model_files(seed=12, shard_bytes=2 * 1024 * 1024))

    def small_file_limit() -> None:
        # Writes past 1 MiB fail with EFBIG instead of killing the process (SIGXFSZ ignored).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))

    result = subprocess.run(
        [
            _cli(),
            "cache",
            "fetch",
            "--source",
            f"file://{tree}",
            "--dest",
            str(tmp_path / "model"),
            "--retries",
            "1",
        ],
        capture_output=True,
        text=True,
        preexec_fn=small_file_limit,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: WriteFailed: " in result.stderr and "EFBIG" in result.stderr
    assert not (tmp_path / "model" / "revisions").exists()
