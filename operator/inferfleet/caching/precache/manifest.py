"""What a source lists, what the marker records, and how the two are checked. Pure.

The marker (`.inferfleet/manifest.json`) is the cache's statement of completeness: the
revision, every file with its size and the checksum the source published (and which
check passed), the total and weight byte counts, and the model's own `config.json` so the
planner can use the real architecture and size when the spec gave none.
"""

from __future__ import annotations

import fnmatch
import json
import struct
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

ChecksumKind = Literal["sha256", "git-sha1", "md5", "crc32c"]

FORMAT_VERSION: Final = 1

# Files vLLM needs to load a model (or a LoRA adapter) from a local directory:
# safetensors shards and their index, config/generation/tokenizer JSON, sentencepiece and
# tiktoken vocabularies, BPE merges, chat templates. Pickled checkpoints and the
# `original/` consolidated copies many repos carry are deliberately left out.
DEFAULT_ALLOW_PATTERNS: Final[tuple[str, ...]] = (
    "*.safetensors",
    "*.json",
    "tokenizer.model",
    "*.tiktoken",
    "merges.txt",
    "vocab.txt",
    "*.jinja",
)
DEFAULT_IGNORE_PATTERNS: Final[tuple[str, ...]] = ("original/*", ".inferfleet/*", ".git*")

# Extensions counted as weights (what the planner sizes the `weights` line with).
WEIGHT_SUFFIXES: Final = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class RemoteFile:
    """One file as the source lists it; checksums are hex, absent when not published."""

    path: str
    size_bytes: int
    sha256: str | None = None
    git_sha1: str | None = None
    md5: str | None = None
    crc32c: str | None = None
    # Opaque version tag (S3 ETag, GCS generation, mtime) used for conditional reads.
    etag: str | None = None

    def best_checksum(self) -> tuple[ChecksumKind, str] | None:
        """The strongest checksum published: one hash per file keeps the CPU cost at one pass."""
        if self.sha256:
            return "sha256", self.sha256
        if self.git_sha1:
            return "git-sha1", self.git_sha1
        if self.md5:
            return "md5", self.md5
        if self.crc32c:
            return "crc32c", self.crc32c
        return None


@dataclass(frozen=True)
class ResolvedRevision:
    """A source resolved at one point in time: the immutable id and the files to fetch."""

    revision_id: str
    commit: str | None
    files: tuple[RemoteFile, ...]


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    size_bytes: int = Field(ge=0)
    sha256: str | None = None
    git_sha1: str | None = None
    md5: str | None = None
    crc32c: str | None = None
    # Which checks passed when the file was written: "size" always, plus a checksum kind.
    verified: list[str] = Field(default_factory=list)


class Manifest(BaseModel):
    """The marker of one complete revision."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    source: str
    ref: str
    revision_id: str
    commit: str | None = None
    files: list[FileEntry]
    total_bytes: int = Field(ge=0)
    weight_bytes: int = Field(ge=0)
    hf_config: dict[str, Any] | None = Field(
        default=None, description="The model's config.json, for the planner."
    )
    fetched_at: str = Field(description="RFC 3339 time the revision was completed.")
    fetch_seconds: float = Field(ge=0)
    bytes_transferred: int = Field(ge=0, description="Bytes actually downloaded (0 for a pure resume).")
    fetch_bytes_per_s: float | None = Field(default=None, description="Measured transfer rate.")

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls.model_validate_json(text)


def matches(path: str, allow: tuple[str, ...], ignore: tuple[str, ...]) -> bool:
    """Hub-style patterns: a pattern without '/' also matches in subfolders (`*.json`)."""

    def hit(patterns: tuple[str, ...]) -> bool:
        base = path.rsplit("/", 1)[-1]
        return any(
            fnmatch.fnmatchcase(path, p) or ("/" not in p and fnmatch.fnmatchcase(base, p)) for p in patterns
        )

    return hit(allow) and not hit(ignore)


def select_files(
    files: tuple[RemoteFile, ...],
    allow: tuple[str, ...] = DEFAULT_ALLOW_PATTERNS,
    ignore: tuple[str, ...] = DEFAULT_IGNORE_PATTERNS,
) -> tuple[RemoteFile, ...]:
    return tuple(sorted((f for f in files if matches(f.path, allow, ignore)), key=lambda f: f.path))


def is_weight_file(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES)


def weight_bytes(files: tuple[RemoteFile, ...] | list[FileEntry]) -> int:
    return sum(f.size_bytes for f in files if is_weight_file(f.path))


def total_bytes(files: tuple[RemoteFile, ...] | list[FileEntry]) -> int:
    return sum(f.size_bytes for f in files)


def resume_offset(part_size_bytes: int | None, expected_size_bytes: int) -> int:
    """Where a download restarts: after the bytes already on disk, unless they cannot be
    a prefix of the file (longer than it), in which case from zero."""
    if part_size_bytes is None or part_size_bytes > expected_size_bytes:
        return 0
    return part_size_bytes


def entry_for(remote: RemoteFile, verified: list[str]) -> FileEntry:
    return FileEntry(
        path=remote.path,
        size_bytes=remote.size_bytes,
        sha256=remote.sha256,
        git_sha1=remote.git_sha1,
        md5=remote.md5,
        crc32c=remote.crc32c,
        verified=verified,
    )


def remote_from_entry(entry: FileEntry) -> RemoteFile:
    return RemoteFile(
        path=entry.path,
        size_bytes=entry.size_bytes,
        sha256=entry.sha256,
        git_sha1=entry.git_sha1,
        md5=entry.md5,
        crc32c=entry.crc32c,
    )


def compare_sizes(manifest: Manifest, observed_sizes: dict[str, int | None]) -> list[str]:
    """Problems between the marker and what is on disk (None = file missing)."""
    problems: list[str] = []
    for entry in manifest.files:
        size = observed_sizes.get(entry.path)
        if size is None:
            problems.append(f"{entry.path}: missing")
        elif size != entry.size_bytes:
            problems.append(f"{entry.path}: {size} bytes on disk, marker says {entry.size_bytes}")
    return problems


def safetensors_problem(path: str, head: bytes, size_bytes: int) -> str | None:
    """Structural check of a safetensors file from its first bytes and its size.

    The format is an 8-byte little-endian header length, a JSON header whose tensors give
    `data_offsets` into the data that follows; a truncated or overwritten file almost
    always breaks one of those facts. This costs one small read per shard, so the init
    container can run it on every start, unlike a full re-hash.
    """
    if len(head) < 8:
        return f"{path}: too short for a safetensors file"
    (header_bytes,) = struct.unpack("<Q", head[:8])
    if header_bytes > 100 * 1024 * 1024 or 8 + header_bytes > size_bytes:
        return f"{path}: safetensors header length {header_bytes} does not fit a {size_bytes}-byte file"
    if len(head) < 8 + header_bytes:
        return None  # caller did not read the whole header; nothing more to check
    try:
        header = json.loads(head[8 : 8 + header_bytes])
    except (UnicodeDecodeError, json.JSONDecodeError):
        return f"{path}: safetensors header is not valid JSON"
    if not isinstance(header, dict):
        return f"{path}: safetensors header is not a JSON object"
    end = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2):
            return f"{path}: tensor {name!r} has no data_offsets"
        end = max(end, int(offsets[1]))
    if 8 + header_bytes + end != size_bytes:
        return (
            f"{path}: tensors end at byte {8 + header_bytes + end} but the file has {size_bytes} bytes "
            "(truncated or overwritten)"
        )
    return None


def safetensors_header_bytes(head: bytes) -> int | None:
    """How many bytes to read to check a safetensors header fully (None if unknowable)."""
    if len(head) < 8:
        return None
    (header_bytes,) = struct.unpack("<Q", head[:8])
    return 8 + int(header_bytes)
