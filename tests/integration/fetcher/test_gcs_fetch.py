"""The fetcher against Cloud Storage: the real google-cloud-storage client, pointed by
STORAGE_EMULATOR_HOST at a loopback fake of the JSON API (gcs_server.py)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("google.cloud.storage", reason="gs:// needs inferfleet[cache]")
google_crc32c = pytest.importorskip("google_crc32c", reason="gs:// needs inferfleet[cache]")

from inferfleet.caching.fetcher import store  # noqa: E402
from inferfleet.caching.fetcher.fetch import fetch  # noqa: E402
from inferfleet.caching.precache.fetch_errors import ChecksumMismatch, SourceNotFound, SourceUnreachable  # noqa: E402
from tests.integration.fetcher.conftest import fast_options, free_port, revisions  # noqa: E402
from tests.integration.fetcher.gcs_server import GcsServer  # noqa: E402
from tests.integration.fetcher.hub_server import safetensors_bytes, tiny_model_files  # noqa: E402

pytestmark = pytest.mark.integration

SHARD = "model-00001-of-00002.safetensors"


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[GcsServer]:
    with GcsServer() as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
        monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
        yield server


def _upload(gcs: GcsServer, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        gcs.state.put(bucket, f"{prefix}/{name}", data)


def test_fresh_download_verifies_md5_and_crc32c_and_second_run_is_a_no_op(
    gcs: GcsServer, tmp_path: Path
) -> None:
    files = tiny_model_files(seed=11)
    _upload(gcs, "weights", "llama/v1", files)
    # A composed object (parallel composite upload) publishes a CRC32C and no MD5.
    composed = safetensors_bytes(512 * 1024, seed=12)
    gcs.state.put("weights", "llama/v1/model-extra.safetensors", composed, composite=True)
    dest = tmp_path / "model"

    result = fetch("gs://weights/llama/v1", dest, fast_options())
    entries = {e.path: e for e in result.manifest.files}
    # Seven objects over three listing pages; the default patterns drop README and .bin.
    assert set(entries) == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model-extra.safetensors",
    }
    assert entries[SHARD].md5 == hashlib.md5(files[SHARD]).hexdigest()
    assert entries[SHARD].verified == ["size", "md5"]
    extra = entries["model-extra.safetensors"]
    assert extra.md5 is None and extra.verified == ["size", "crc32c"]
    assert extra.crc32c == int(google_crc32c.value(composed)).to_bytes(4, "big").hex()
    assert result.manifest.hf_config is not None and result.manifest.hf_config["seed"] == 11
    assert result.manifest.revision_id.startswith("main-")
    for name in entries:
        expected = composed if name == "model-extra.safetensors" else files[name]
        assert (result.revision_dir / name).read_bytes() == expected
    # Every download named the generation it listed (no mixing of two uploads).
    assert all(generation is not None for _, _, generation in gcs.state.downloads)
    assert store.verify_revision(dest, result.manifest.revision_id, deep=True)

    # Only listings and reads: no bucket-metadata lookup (the client's tracing cache does
    # one; it needs storage.buckets.get, which a reader of objects need not have).
    assert gcs.state.unserved == []

    downloads = len(gcs.state.downloads)
    again = fetch("gs://weights/llama/v1", dest, fast_options())
    assert again.reused and again.manifest.revision_id == result.manifest.revision_id
    assert len(gcs.state.downloads) == downloads  # a listing, no object reads


def test_resume_asks_only_for_the_rest(gcs: GcsServer, tmp_path: Path) -> None:
    data = safetensors_bytes(3 * 1024 * 1024, seed=13)
    _upload(gcs, "weights", "m", {"config.json": b"{}", "model.safetensors": data})
    probe = fetch("gs://weights/m", tmp_path / "probe", fast_options())
    dest = tmp_path / "model"
    part = dest / ".partial" / probe.manifest.revision_id / "model.safetensors.part"
    part.parent.mkdir(parents=True)
    kept = len(data) // 3
    part.write_bytes(data[:kept])

    result = fetch("gs://weights/m", dest, fast_options())
    assert ("m/model.safetensors", kept) in [(name, start) for name, start, _ in gcs.state.downloads]
    assert result.bytes_transferred == len(data) - kept + 2  # + config.json
    assert (result.revision_dir / "model.safetensors").read_bytes() == data
    entry = next(e for e in result.manifest.files if e.path == "model.safetensors")
    assert entry.verified == ["size", "md5"]  # the resumed prefix was hashed too


def test_checksum_mismatch_never_leaves_a_complete_looking_cache(gcs: GcsServer, tmp_path: Path) -> None:
    files = tiny_model_files(seed=14)
    _upload(gcs, "weights", "m", files)
    good = files[SHARD]
    gcs.state.corrupt[f"m/{SHARD}"] = good[:-1] + bytes([good[-1] ^ 0xFF])
    dest = tmp_path / "model"

    with pytest.raises(ChecksumMismatch, match=SHARD):
        fetch("gs://weights/m", dest, fast_options())
    assert revisions(dest) == []
    assert not (dest / "refs" / "main").exists()
    assert [start for name, start, _ in gcs.state.downloads if name == f"m/{SHARD}"] == [None, None]
    assert not list((dest / ".partial").rglob(SHARD + "*"))

    del gcs.state.corrupt[f"m/{SHARD}"]
    assert fetch("gs://weights/m", dest, fast_options()).manifest.revision_id in revisions(dest)


def test_missing_bucket_and_unreachable_endpoint(
    gcs: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SourceNotFound):
        fetch("gs://no-such-bucket/m", tmp_path / "a", fast_options())
    _upload(gcs, "weights", "m", {"config.json": b"{}"})
    with pytest.raises(SourceNotFound, match="no objects"):
        fetch("gs://weights/elsewhere", tmp_path / "b", fast_options())

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(SourceUnreachable):
        fetch("gs://weights/m", tmp_path / "c", fast_options())
    # One retry layer (the fetcher's), not the client's two-minute default on top.
    assert time.monotonic() - started < 10
    assert revisions(tmp_path / "c") == []
    # Nor a background bucket-metadata lookup that goes on retrying for minutes after the
    # fetch gave up (with the process's global random jitter, under whatever runs next).
    assert not _metadata_threads()


def _metadata_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "BucketMetadata" in repr(getattr(t, "_target", None))]
