"""Where things live in a node's cache, and what a source URI means. Pure: no file access.

One node-local root (`cache.nodePath`, e.g. `/mnt/nvme/inferfleet`) holds one directory
per model source; inside it every revision has its own directory so an old revision can
keep serving (and be garbage-collected later) while a new one is fetched beside it:

    <root>/<model-key>/
        .lock                      flock: one fetcher (or garbage collector) at a time
        revisions/<revision-id>/   complete, verified, read-only from here on
            .inferfleet/manifest.json   the marker: written last, renamed in with the files
            config.json, model-00001-of-00004.safetensors, ...
        refs/<ref>  -> ../revisions/<revision-id>   symlink: what "main" (or a tag) means here
        .partial/<revision-id>/    a download in progress (resumable; never looks complete)
        .trash/                    revisions being deleted by the garbage collector

A revision directory only ever appears through one rename of a fully written, fsynced
`.partial/<id>` that already contains its marker, so "the directory exists" and "the
cache is complete" are the same fact; a killed fetcher leaves only `.partial/` behind.

`revision-id` is the hub's commit hash for hf:// sources (a branch that moves gets a new
directory) and `<ref>-<digest of the object listing>` for object stores and volumes, so
new content under the same label never overwrites what a running pod has mapped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final, Literal

from inferfleet.caching.precache.fetch_errors import SourceInvalid, UnsafeSource

Scheme = Literal["hf", "s3", "gs", "pvc", "file"]
SCHEMES: Final[tuple[Scheme, ...]] = ("hf", "s3", "gs", "pvc", "file")

DEFAULT_REF: Final = "main"
MARKER_DIR: Final = ".inferfleet"
MARKER_NAME: Final = "manifest.json"
MARKER_RELPATH: Final = f"{MARKER_DIR}/{MARKER_NAME}"
LOCK_NAME: Final = ".lock"
REVISIONS_DIR: Final = "revisions"
REFS_DIR: Final = "refs"
PARTIAL_DIR: Final = ".partial"
TRASH_DIR: Final = ".trash"
PART_SUFFIX: Final = ".part"

# Directory names must stay well under NAME_MAX (255) and readable in `ls`.
_MAX_KEY_CHARS: Final = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
# A revision id is one directory name: a hub commit, or `<label>-<digest>` (ref_name-safe).
_REVISION_ID = re.compile(r"^(?![.-])[A-Za-z0-9._-]{1,200}$")


@dataclass(frozen=True)
class SourceRef:
    """A parsed weights URI.

    `location` is the repo id (hf), bucket (s3, gs), claim name (pvc) or empty (file);
    `path` is the prefix/subfolder inside it (absolute path for file://).
    """

    uri: str
    scheme: Scheme
    location: str
    path: str

    @property
    def display(self) -> str:
        return self.uri


def parse_source(uri: str) -> SourceRef:
    """Parse `hf://org/repo`, `s3://bucket/prefix`, `gs://bucket/prefix`, `pvc://claim/path`,
    `file:///abs/path`; raise SourceInvalid with the accepted forms otherwise."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in SCHEMES:
        raise SourceInvalid(
            f"{uri!r}: expected hf://ORG/REPO, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, "
            "pvc://CLAIM/PATH or file:///ABSOLUTE/PATH"
        )
    if scheme == "file":
        if not rest.startswith("/"):
            raise SourceInvalid(f"{uri!r}: file:// needs an absolute path (file:///data/model)")
        path = str(PurePosixPath(rest))
        if ".." in PurePosixPath(rest).parts:
            raise SourceInvalid(f"{uri!r}: '..' is not allowed in a source path")
        return SourceRef(uri=uri, scheme="file", location="", path=path)
    parts = [part for part in rest.split("/") if part]
    if not parts or any(part in {".", ".."} for part in parts):
        raise SourceInvalid(f"{uri!r}: missing or invalid {scheme} location")
    if scheme == "hf":
        # Repo ids are `name` or `org/name`; anything after is a subfolder of the repo.
        repo_parts = parts[:2]
        return SourceRef(uri=uri, scheme="hf", location="/".join(repo_parts), path="/".join(parts[2:]))
    typed: Scheme = scheme
    return SourceRef(uri=uri, scheme=typed, location=parts[0], path="/".join(parts[1:]))


def _safe_component(text: str) -> str:
    safe = _UNSAFE.sub("_", text)
    if safe != text:
        # Keep distinct inputs distinct after the substitution ("a/b" vs "a_b").
        safe = f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return safe


def model_key(source: SourceRef) -> str:
    """Directory name for a source: readable (`hf--meta-llama--Llama-3.1-8B`) and unique."""
    pieces = [source.scheme, *[p for p in f"{source.location}/{source.path}".split("/") if p]]
    key = "--".join(_UNSAFE.sub("_", piece) for piece in pieces)
    exact = "--".join(pieces)
    if key != exact or len(key) > _MAX_KEY_CHARS:
        digest = hashlib.sha256(source.uri.encode()).hexdigest()[:12]
        key = f"{key[: _MAX_KEY_CHARS - 13]}-{digest}"
    return key


def credentials_key(source: SourceRef, secret: tuple[str, str] | None) -> str:
    """The model directory of a source *as read with one credential*: `model_key`, plus the
    Secret's name (and key, when not the default `token`) when the spec names one.

    Within one owner's tree, two services that read the same URI with different Secrets
    (another hub token, another S3 endpoint under the same bucket name) never share a
    directory, so a service only ever loads what was fetched with its own credential."""
    key = model_key(source)
    if secret is None:
        return key
    name, secret_key = secret
    label = name if secret_key == "token" else f"{name}.{secret_key}"
    suffix = _safe_component(label)
    if len(key) + len(suffix) + 7 > _MAX_KEY_CHARS + 40:
        suffix = hashlib.sha256(label.encode()).hexdigest()[:12]
    return f"{key}--cred-{suffix}"


def ref_name(ref: str) -> str:
    """File name of a ref symlink (branches may contain '/')."""
    if not ref or ref in {".", ".."}:
        raise SourceInvalid(f"invalid revision {ref!r}")
    return _safe_component(ref)


def is_commit_hash(ref: str) -> bool:
    """A full git commit id: immutable, so a complete cache for it needs no network check."""
    return bool(_HEX40.match(ref))


def listing_revision_id(ref: str, entries: list[tuple[str, int, str]]) -> str:
    """Revision id for sources without commits: the label plus a digest of (path, size, etag)."""
    digest = hashlib.sha256()
    for path, size_bytes, tag in sorted(entries):
        digest.update(f"{path}\0{size_bytes}\0{tag}\n".encode())
    return f"{ref_name(ref)}-{digest.hexdigest()[:12]}"


def safe_revision_id(revision_id: str) -> str:
    """`revision_id` unchanged, or UnsafeSource: it becomes a directory name on the node,
    so `../../outside/EVILREV` (from a hostile hub, say) must never reach a path."""
    if not _REVISION_ID.match(revision_id) or revision_id.endswith(PART_SUFFIX):
        raise UnsafeSource(
            f"revision id {revision_id!r} is not one plain directory name "
            "(letters, digits, '.', '_', '-'; at most 200 characters)"
        )
    return revision_id


@dataclass(frozen=True)
class ModelLayout:
    """Paths of one model's cache directory (`dest` of `inferfleet cache fetch`)."""

    root: PurePosixPath

    @property
    def lock(self) -> PurePosixPath:
        return self.root / LOCK_NAME

    @property
    def revisions(self) -> PurePosixPath:
        return self.root / REVISIONS_DIR

    @property
    def refs(self) -> PurePosixPath:
        return self.root / REFS_DIR

    @property
    def partials(self) -> PurePosixPath:
        return self.root / PARTIAL_DIR

    @property
    def trash(self) -> PurePosixPath:
        return self.root / TRASH_DIR

    def revision(self, revision_id: str) -> PurePosixPath:
        return self.revisions / safe_revision_id(revision_id)

    def marker(self, revision_id: str) -> PurePosixPath:
        return self.revision(revision_id) / MARKER_RELPATH

    def partial(self, revision_id: str) -> PurePosixPath:
        return self.partials / safe_revision_id(revision_id)

    def ref(self, ref: str) -> PurePosixPath:
        return self.refs / ref_name(ref)

    def ref_target(self, revision_id: str) -> str:
        """Relative symlink target, so the link also resolves inside a pod's mount."""
        return f"../{REVISIONS_DIR}/{safe_revision_id(revision_id)}"


def model_dir(node_root: str, source: SourceRef) -> PurePosixPath:
    return PurePosixPath(node_root) / model_key(source)


def serving_path(mount_root: str, source: SourceRef, ref: str) -> str:
    """Path vLLM loads from inside a serving pod: the ref symlink of the mounted cache."""
    return str(ModelLayout(model_dir(mount_root, source)).ref(ref))
