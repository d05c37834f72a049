"""The fetcher against a loopback Hugging Face hub, through huggingface_hub."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferfleet.caching.fetcher import store
from inferfleet.caching.fetcher.fetch import fetch
from inferfleet.caching.precache.fetch_errors import (
    BadCredentials,
    ChecksumMismatch,
    SourceNotFound,
    SourceUnreachable,
)
from tests.integration.fetcher.conftest import REPO_ID, _cli, fast_options, revisions, run_cli
from tests.integration.fetcher.hub_server import (
    CDN_PREFIX,
    FakeRepo,
    HubServer,
    cdn_host,
    safetensors_bytes,
    tiny_model_files,
)

pytestmark = pytest.mark.integration

SOURCE = f"hf://{REPO_ID}"


def test_fresh_download_fetches_only_serving_files_and_records_the_model(
    hub: HubServer, tmp_path: Path
) -> None:
    dest = tmp_path / "cache" / "model"
    result = fetch(SOURCE, dest, fast_options())

    commit = hub.state.repos[REPO_ID].branches["main"]
    assert not result.reused
    assert result.manifest.revision_id == commit == result.manifest.commit
    files = {entry.path: entry for entry in result.manifest.files}
    # README and pickled weights are not what vLLM loads from safetensors repos.
    assert set(files) == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    }
    assert files["model-00001-of-00002.safetensors"].verified == ["size", "sha256"]
    assert files["config.json"].verified == ["size", "git-sha1"]
    source_files = tiny_model_files()
    shards = [name for name in files if name.endswith(".safetensors")]
    assert result.manifest.weight_bytes == sum(len(source_files[name]) for name in shards)
    assert result.manifest.hf_config is not None
    assert result.manifest.hf_config["model_type"] == "llama"
    for name in files:
        assert (result.revision_dir / name).read_bytes() == source_files[name]
    # refs/main is a relative symlink vLLM can load through, and nothing partial is left.
    assert os.readlink(dest / "refs" / "main") == f"../revisions/{commit}"
    assert (dest / "refs" / "main" / "config.json").is_file()
    assert list((dest / ".partial").iterdir()) == []
    assert store.verify_revision(dest, commit, deep=True).revision_id == commit


def test_second_run_is_a_no_op(hub: HubServer, tmp_path: Path) -> None:
    dest = tmp_path / "model"
    first = fetch(SOURCE, dest, fast_options())
    gets_after_first = len(hub.state.file_gets())

    again = fetch(SOURCE, dest, fast_options())
    assert again.reused and again.bytes_transferred == 0
    assert len(hub.state.file_gets()) == gets_after_first  # a branch costs one metadata call, no files

    calls_before = len(hub.state.requests)
    pinned = fetch(SOURCE, dest, fast_options(revision=first.manifest.revision_id))
    assert pinned.reused
    assert len(hub.state.requests) == calls_before  # a commit id needs no network at all


def test_cli_fetch_then_verify(hub: HubServer, tmp_path: Path) -> None:
    dest = tmp_path / "model"
    done = run_cli("cache", "fetch", "--source", SOURCE, "--dest", str(dest), "-o", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["reused"] is False and summary["modelType"] == "llama"
    again = run_cli("cache", "fetch", "--source", SOURCE, "--dest", str(dest))
    assert again.returncode == 0 and "already complete" in again.stdout

    verified = run_cli("cache", "verify", "--dest", str(dest), "--revision", "main", "--deep")
    assert verified.returncode == 0, verified.stderr
    assert "ok" in verified.stdout

    # Damage a shard: verify names the file and fails; fetch repairs it.
    shard = dest / "refs" / "main" / "model-00002-of-00002.safetensors"
    with shard.open("r+b") as handle:
        handle.truncate(1000)
    broken = run_cli("cache", "verify", "--dest", str(dest), "--revision", "main")
    assert broken.returncode == 1
    assert "CacheCorrupt" in broken.stderr and "model-00002-of-00002.safetensors" in broken.stderr
    repaired = run_cli("cache", "fetch", "--source", SOURCE, "--dest", str(dest))
    assert repaired.returncode == 0, repaired.stderr
    assert run_cli("cache", "verify", "--dest", str(dest), "--revision", "main").returncode == 0


def test_verify_of_a_missing_revision_fails_with_a_clear_message(tmp_path: Path) -> None:
    done = run_cli(
        "cache", "verify", "--dest", str(tmp_path / "model"), "--revision", "v2", "--wait-s", "0.3",
        "--poll-s", "0.1", "--hint", "fetched by DaemonSet demo-h100-cache",
    )  # fmt: skip
    assert done.returncode == 1
    assert "CacheMissing" in done.stderr and "'v2' is not cached" in done.stderr
    assert "DaemonSet demo-h100-cache" in done.stderr


def test_revision_switch_keeps_the_old_revision_beside_the_new(hub: HubServer, tmp_path: Path) -> None:
    dest = tmp_path / "model"
    old = fetch(SOURCE, dest, fast_options()).manifest.revision_id
    new_commit = hub.state.repos[REPO_ID].add_commit(tiny_model_files(seed=1))
    tagged = hub.state.repos[REPO_ID]
    tagged.branches["v1"] = old

    new = fetch(SOURCE, dest, fast_options())
    assert new.manifest.revision_id == new_commit != old
    assert revisions(dest) == sorted([old, new_commit])
    assert os.readlink(dest / "refs" / "main") == f"../revisions/{new_commit}"
    # Going back to the old revision (by tag) downloads nothing.
    back = fetch(SOURCE, dest, fast_options(revision="v1"))
    assert back.reused and back.manifest.revision_id == old


def test_checksum_mismatch_never_leaves_a_complete_looking_cache(hub: HubServer, tmp_path: Path) -> None:
    dest = tmp_path / "model"
    name = "model-00001-of-00002.safetensors"
    good = tiny_model_files()[name]
    hub.state.corrupt[name] = good[:-1] + bytes([good[-1] ^ 0xFF])

    with pytest.raises(ChecksumMismatch, match=name):
        fetch(SOURCE, dest, fast_options())
    assert revisions(dest) == []
    assert not (dest / "refs" / "main").exists()
    # It tried twice from byte 0 (a transfer glitch gets one more chance), then gave up.
    assert [start for path, start in hub.state.file_gets(name)] == [0, 0]
    assert not list((dest / ".partial").rglob(name + "*"))

    del hub.state.corrupt[name]
    assert fetch(SOURCE, dest, fast_options()).manifest.revision_id in revisions(dest)


@pytest.fixture
def cdn(hub: HubServer) -> Iterator[HubServer]:
    """The hub answers LFS downloads with a 302 to this server, on another host."""
    with HubServer(hub.state, host=cdn_host()) as server:
        hub.state.lfs_redirect = server.endpoint
        yield server


def _has_token(headers: dict[str, str]) -> bool:
    return any(name.lower() == "authorization" for name in headers)


def test_lfs_redirect_to_a_cdn_is_followed_without_the_token(
    hub: HubServer, cdn: HubServer, tmp_path: Path
) -> None:
    files = tiny_model_files(seed=5)
    hub.add_repo(FakeRepo("acme/private", token="s3cret")).add_commit(files)
    assert cdn.endpoint.split("://")[1] != hub.endpoint.split("://")[1]

    result = fetch("hf://acme/private", tmp_path / "model", fast_options(token="s3cret"))
    for entry in result.manifest.files:
        assert (result.revision_dir / entry.path).read_bytes() == files[entry.path]
        if entry.path.endswith(".safetensors"):
            assert entry.verified == ["size", "sha256"]

    shards = sorted(name for name in files if name.endswith(".safetensors"))
    at_cdn = cdn.state.seen_by(cdn.endpoint)
    # Each shard once from the CDN, never with the hub token (which it would refuse).
    assert sorted(path.rsplit("/", 1)[-1] for path, _ in at_cdn) == shards
    assert all(path.startswith(CDN_PREFIX) and not _has_token(headers) for path, headers in at_cdn)
    # The hub itself got the token on every call, the redirected downloads included.
    at_hub = hub.state.seen_by(hub.endpoint)
    assert {path.rsplit("/", 1)[-1] for path, _ in at_hub if "/resolve/" in path} >= set(shards)
    assert all(_has_token(headers) for _, headers in at_hub)


def test_resume_through_the_cdn_redirect_keeps_the_range(
    hub: HubServer, cdn: HubServer, tmp_path: Path
) -> None:
    big = safetensors_bytes(3 * 1024 * 1024, seed=8)
    commit = hub.add_repo(FakeRepo("acme/big")).add_commit({"config.json": b"{}", "model.safetensors": big})
    dest = tmp_path / "model"
    part = dest / ".partial" / commit / "model.safetensors.part"
    part.parent.mkdir(parents=True)
    kept = len(big) // 3
    part.write_bytes(big[:kept])

    result = fetch("hf://acme/big", dest, fast_options())
    cdn_starts = [start for path, start in hub.state.file_gets("model.safetensors") if CDN_PREFIX in path]
    assert cdn_starts == [kept]
    assert result.bytes_transferred == len(big) - kept + 2  # + config.json
    assert (result.revision_dir / "model.safetensors").read_bytes() == big
    entry = next(e for e in result.manifest.files if e.path == "model.safetensors")
    assert entry.verified == ["size", "sha256"]


def test_bad_token_and_missing_repo_are_reported_as_such(hub: HubServer, tmp_path: Path) -> None:
    hub.add_repo(FakeRepo("acme/private", token="s3cret")).add_commit(tiny_model_files())
    with pytest.raises(BadCredentials):
        fetch("hf://acme/private", tmp_path / "p", fast_options(token="wrong"))
    assert fetch("hf://acme/private", tmp_path / "p", fast_options(token="s3cret")).manifest.files
    with pytest.raises(SourceNotFound):
        fetch("hf://acme/nope", tmp_path / "n", fast_options())
    with pytest.raises(SourceNotFound, match="revision"):
        fetch(SOURCE, tmp_path / "r", fast_options(revision="no-such-branch"))


def test_unreachable_source_is_retried_then_reported_unless_a_cache_exists(
    hub: HubServer, tmp_path: Path
) -> None:
    dest = tmp_path / "model"
    hub.state.fail_status = 503
    with pytest.raises(SourceUnreachable, match="503"):
        fetch(SOURCE, dest, fast_options())
    assert len(hub.state.requests) == 3  # FAST_RETRY.attempts
    assert revisions(dest) == []

    hub.state.fail_status = None
    fetch(SOURCE, dest, fast_options())
    hub.state.fail_status = 503
    kept = fetch(SOURCE, dest, fast_options())
    assert kept.reused and kept.warning is not None and "unreachable" in kept.warning


def test_cli_writes_the_reason_to_the_termination_log(hub: HubServer, tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    done = run_cli(
        "cache", "fetch", "--source", "hf://acme/nope", "--dest", str(tmp_path / "m"), "--retries", "1",
        env={"INFERFLEET_TERMINATION_LOG": str(log)},
    )  # fmt: skip
    assert done.returncode == 1
    assert log.read_text().startswith("SourceNotFound: hf://acme/nope")


def _wait_for(predicate: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_resume_after_a_kill_mid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = safetensors_bytes(4 * 1024 * 1024, seed=7)
    with HubServer() as hub:
        hub.add_repo(FakeRepo("acme/big")).add_commit({"config.json": b"{}", "model.safetensors": big})
        hub.state.throttle_bytes_per_s = 2 * 1024 * 1024
        dest = tmp_path / "model"
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint}
        process = subprocess.Popen(
            [_cli(), "cache", "fetch", "--source", "hf://acme/big", "--dest", str(dest)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def part_has_bytes() -> bool:
            parts = list((dest / ".partial").rglob("model.safetensors.part")) if dest.exists() else []
            return bool(parts) and parts[0].stat().st_size > 256 * 1024

        try:
            _wait_for(part_has_bytes)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        part = next((dest / ".partial").rglob("model.safetensors.part"))
        kept = part.stat().st_size
        assert 0 < kept < len(big)
        assert revisions(dest) == []  # killed: nothing looks complete

        hub.state.throttle_bytes_per_s = None
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = fetch("hf://acme/big", dest, fast_options())
        starts = [start for _, start in hub.state.file_gets("model.safetensors")]
        assert starts[0] == 0 and starts[-1] >= kept  # the second run asked only for the rest
        assert result.bytes_transferred <= len(big) - kept + 2  # + config.json
        assert (result.revision_dir / "model.safetensors").read_bytes() == big
        entry = next(e for e in result.manifest.files if e.path == "model.safetensors")
        assert entry.sha256 == hashlib.sha256(big).hexdigest() and "sha256" in entry.verified


def test_concurrent_fetchers_on_one_path_download_once(tmp_path: Path) -> None:
    files = {"config.json": b"{}", "model.safetensors": safetensors_bytes(2 * 1024 * 1024, seed=3)}
    with HubServer() as hub:
        hub.add_repo(FakeRepo("acme/shared")).add_commit(files)
        hub.state.throttle_bytes_per_s = 8 * 1024 * 1024
        dest = tmp_path / "model"
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint}
        command = [
            _cli(),
            "cache",
            "fetch",
            "--source",
            "hf://acme/shared",
            "--dest",
            str(dest),
            "-o",
            "json",
        ]
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outputs = [process.communicate(timeout=60) for process in (first, second)]
        assert first.returncode == 0 and second.returncode == 0, outputs
        results = sorted(json.loads(out)["reused"] for out, _ in outputs)
        assert results == [False, True]  # one downloaded, the other waited and found it complete
        assert len(hub.state.file_gets("model.safetensors")) == 1
        assert any("waiting for another fetcher" in err for _, err in outputs)
        assert (dest / "refs" / "main" / "model.safetensors").read_bytes() == files["model.safetensors"]
