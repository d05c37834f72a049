"""Source URIs, cache paths, file selection, markers and safetensors checks (pure)."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet.caching.precache.fetch_errors import SourceInvalid
from inferfleet.caching.precache.layout import (
    ModelLayout,
    is_commit_hash,
    listing_revision_id,
    model_key,
    parse_source,
    ref_name,
    serving_path,
)
from inferfleet.caching.precache.manifest import (
    FileEntry,
    Manifest,
    RemoteFile,
    compare_sizes,
    resume_offset,
    safetensors_problem,
    select_files,
    weight_bytes,
)


@pytest.mark.parametrize(
    ("uri", "scheme", "location", "path"),
    [
        ("hf://meta-llama/Llama-3.1-8B", "hf", "meta-llama/Llama-3.1-8B", ""),
        ("hf://gpt2", "hf", "gpt2", ""),
        ("hf://org/repo/sub/folder", "hf", "org/repo", "sub/folder"),
        ("s3://bucket/models/llama/", "s3", "bucket", "models/llama"),
        ("gs://bucket/x", "gs", "bucket", "x"),
        ("pvc://weights/llama-8b", "pvc", "weights", "llama-8b"),
        ("file:///data/models/llama", "file", "", "/data/models/llama"),
    ],
)
def test_parse_source(uri: str, scheme: str, location: str, path: str) -> None:
    ref = parse_source(uri)
    assert (ref.scheme, ref.location, ref.path) == (scheme, location, path)


@pytest.mark.parametrize(
    "uri", ["http://x/y", "hf://", "s3://", "file://relative/path", "hf://a/../b", "ftp://x"]
)
def test_parse_source_rejects(uri: str) -> None:
    with pytest.raises(SourceInvalid):
        parse_source(uri)


def test_model_key_is_readable_and_distinct() -> None:
    assert model_key(parse_source("hf://meta-llama/Llama-3.1-8B")) == "hf--meta-llama--Llama-3.1-8B"
    assert model_key(parse_source("s3://b/a_b")) != model_key(parse_source("s3://b/a/b"))
    long_key = model_key(parse_source("s3://bucket/" + "x" * 300))
    assert len(long_key) <= 120


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=80))
def test_ref_names_are_safe_file_names(ref: str) -> None:
    if ref in {".", ".."}:
        return
    name = ref_name(ref)
    assert "/" not in name and name not in {".", ".."} and len(name) < 200


def test_layout_paths_and_serving_path() -> None:
    layout = ModelLayout(__import__("pathlib").PurePosixPath("/c/hf--a--b"))
    assert str(layout.revision("abc")) == "/c/hf--a--b/revisions/abc"
    assert str(layout.marker("abc")) == "/c/hf--a--b/revisions/abc/.inferfleet/manifest.json"
    assert layout.ref_target("abc") == "../revisions/abc"
    assert serving_path("/m", parse_source("hf://a/b"), "main") == "/m/hf--a--b/refs/main"


def test_commit_hash_and_listing_ids() -> None:
    assert is_commit_hash("0123456789abcdef0123456789abcdef01234567")
    assert not is_commit_hash("main")
    one = listing_revision_id("main", [("a", 1, "x"), ("b", 2, "y")])
    assert one == listing_revision_id("main", [("b", 2, "y"), ("a", 1, "x")])  # order-free
    assert one != listing_revision_id("main", [("a", 1, "x"), ("b", 2, "z")])  # content-bound
    assert one.startswith("main-")


def test_select_files_keeps_what_vllm_loads() -> None:
    names = [
        "config.json", "generation_config.json", "model-00001-of-00002.safetensors",
        "model.safetensors.index.json", "tokenizer.json", "tokenizer.model", "README.md",
        "pytorch_model.bin", "original/consolidated.00.pth", "original/params.json", ".gitattributes",
        "sub/adapter_config.json",
    ]  # fmt: skip
    chosen = {f.path for f in select_files(tuple(RemoteFile(n, 1) for n in names))}
    assert chosen == {
        "config.json", "generation_config.json", "model-00001-of-00002.safetensors",
        "model.safetensors.index.json", "tokenizer.json", "tokenizer.model", "sub/adapter_config.json",
    }  # fmt: skip


def test_weight_bytes_and_best_checksum() -> None:
    files = (RemoteFile("a.safetensors", 10, sha256="s", md5="m"), RemoteFile("config.json", 3, git_sha1="g"))
    assert weight_bytes(files) == 10
    assert files[0].best_checksum() == ("sha256", "s")
    assert files[1].best_checksum() == ("git-sha1", "g")
    assert RemoteFile("x", 1).best_checksum() is None


@given(st.one_of(st.none(), st.integers(0, 10_000)), st.integers(0, 10_000))
def test_resume_offset_is_a_valid_prefix(part: int | None, expected: int) -> None:
    offset = resume_offset(part, expected)
    assert 0 <= offset <= expected
    if part is not None and part <= expected:
        assert offset == part


def _safetensors(data_bytes: int, extra: int = 0) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [data_bytes // 4], "data_offsets": [0, data_bytes]}})
    return struct.pack("<Q", len(header)) + header.encode() + b"\0" * (data_bytes + extra)


def test_safetensors_structure() -> None:
    good = _safetensors(64)
    assert safetensors_problem("a", good, len(good)) is None
    assert "truncated" in (safetensors_problem("a", good, len(good) - 1) or "")
    assert "does not fit" in (safetensors_problem("a", good[:8], 20) or "")
    assert "too short" in (safetensors_problem("a", b"\1", 1) or "")
    garbage = struct.pack("<Q", 4) + b"nope"
    assert "not valid JSON" in (safetensors_problem("a", garbage, len(garbage)) or "")


def test_marker_roundtrip_and_size_comparison() -> None:
    manifest = Manifest(
        source="hf://a/b", ref="main", revision_id="c" * 40, commit="c" * 40,
        files=[FileEntry(path="config.json", size_bytes=3, verified=["size"]),
               FileEntry(path="m.safetensors", size_bytes=10)],
        total_bytes=13, weight_bytes=10, hf_config={"model_type": "llama"},
        fetched_at="2026-01-01T00:00:00Z", fetch_seconds=1.0, bytes_transferred=13,
    )  # fmt: skip
    assert Manifest.from_json(manifest.to_json()) == manifest
    assert compare_sizes(manifest, {"config.json": 3, "m.safetensors": 10}) == []
    problems = compare_sizes(manifest, {"config.json": 4, "m.safetensors": None})
    assert problems == ["config.json: 4 bytes on disk, marker says 3", "m.safetensors: missing"]
