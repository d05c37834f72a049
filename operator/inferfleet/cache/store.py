"""The on-disk cache: locks, refs, markers, verification, pins and eviction. I/O.

Locks are `flock(2)` locks, chosen because the kernel drops them when the holder dies:
a killed fetcher or a deleted pod can never leave a stale lock or lease behind, and a
read-only hostPath mount is enough to take one (flock needs no write access), so a
serving pod can pin the revision it loads.

- `<model>/.lock`, exclusive: one fetcher or garbage collector per model directory.
- `revisions/<id>/.inferfleet/manifest.json`, shared: "in use" (serving pods through
  `inferfleet cache hold`, pre-cache pods while they keep a revision wanted); the garbage
  collector takes it exclusively, without waiting, before it deletes a revision.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from inferfleet.cache.checksums import new_hasher
from inferfleet.cache.errors import CacheCorrupt, CacheMissing, LockTimeout
from inferfleet.cache.gc import CachedRevision, GcPlan, plan_gc
from inferfleet.cache.layout import (
    MARKER_RELPATH,
    REVISIONS_DIR,
    ModelLayout,
    is_commit_hash,
)
from inferfleet.cache.manifest import (
    FileEntry,
    Manifest,
    compare_sizes,
    remote_from_entry,
    safetensors_header_bytes,
    safetensors_problem,
)

Log = Callable[[str], None]
_READ_BYTES = 8 * 1024 * 1024


def layout_for(dest: Path) -> ModelLayout:
    from pathlib import PurePosixPath

    return ModelLayout(PurePosixPath(str(dest)))


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable (the file's own fsync is not enough)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- locks -----------------------------------------------------------------------------


@contextmanager
def model_lock(dest: Path, timeout_s: float, log: Log, poll_s: float = 0.2) -> Iterator[None]:
    """Exclusive lock of one model directory; waits (saying who holds it) up to timeout_s."""
    dest.mkdir(parents=True, exist_ok=True)
    path = Path(str(layout_for(dest).lock))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
                    log(f"waiting for another fetcher on {dest} ({holder}) to finish")
                    told = True
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"{dest}: another fetcher held the lock for more than {timeout_s:.0f}s"
                    ) from None
                time.sleep(poll_s)
        # Who holds it, for the next waiter's message; the content is informational only.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _try_flock(path: Path, mode: int) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def pin_revision(dest: Path, revision_id: str, wait: bool = True) -> int:
    """Take the shared "in use" lock of a complete revision; returns the fd to keep open.

    After the lock is granted, check that the marker we locked is still the one at the
    revision's path: the garbage collector may have moved the revision to the trash
    between our open() and our flock()."""
    marker = Path(str(layout_for(dest).marker(revision_id)))
    try:
        fd = os.open(marker, os.O_RDONLY)
    except FileNotFoundError:
        raise CacheMissing(f"{dest}: revision {revision_id} is not cached") from None
    fcntl.flock(fd, fcntl.LOCK_SH if wait else fcntl.LOCK_SH | fcntl.LOCK_NB)
    try:
        current = os.stat(marker)
    except FileNotFoundError:
        current = None
    locked = os.fstat(fd)
    if current is None or (current.st_ino, current.st_dev) != (locked.st_ino, locked.st_dev):
        os.close(fd)
        raise CacheMissing(f"{dest}: revision {revision_id} was evicted while it was being pinned")
    return fd


def touch(dest: Path, revision_id: str) -> None:
    """Record a use for LRU (ignored on a read-only mount)."""
    marker = Path(str(layout_for(dest).marker(revision_id)))
    with suppress(OSError):
        os.utime(marker)


# --- refs ------------------------------------------------------------------------------


def resolve_ref(dest: Path, ref: str) -> str | None:
    """The revision id a ref points to in this cache, if any."""
    layout = layout_for(dest)
    link = Path(str(layout.ref(ref)))
    try:
        target = os.readlink(link)
    except (FileNotFoundError, OSError):
        target = None
    if target is not None:
        revision_id = Path(target).name
        if Path(str(layout.revision(revision_id))).is_dir():
            return revision_id
    # A commit id or a revision id can be named directly.
    if (is_commit_hash(ref) or "/" not in ref) and Path(str(layout.revision(ref))).is_dir():
        return ref
    return None


def update_ref(dest: Path, ref: str, revision_id: str) -> None:
    """Point refs/<ref> at a revision atomically (symlink, then rename over the old one)."""
    layout = layout_for(dest)
    refs = Path(str(layout.refs))
    refs.mkdir(parents=True, exist_ok=True)
    link = Path(str(layout.ref(ref)))
    target = layout.ref_target(revision_id)
    try:
        if os.readlink(link) == target:
            return
    except OSError:
        pass
    tmp = refs / f".{link.name}.{uuid.uuid4().hex[:8]}"
    os.symlink(target, tmp)
    os.replace(tmp, link)
    fsync_dir(refs)


# --- markers and verification ----------------------------------------------------------


def read_manifest(dest: Path, revision_id: str) -> Manifest:
    marker = Path(str(layout_for(dest).marker(revision_id)))
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CacheMissing(f"{dest}: revision {revision_id} has no marker") from None
    try:
        return Manifest.from_json(text)
    except ValueError as error:
        raise CacheCorrupt(f"{marker}: unreadable marker: {error}") from error


def verify_revision(dest: Path, revision_id: str, deep: bool = False) -> Manifest:
    """Check a complete revision against its marker: every file present with its size,
    safetensors headers consistent with their sizes, and (deep) every checksum."""
    root = Path(str(layout_for(dest).revision(revision_id)))
    manifest = read_manifest(dest, revision_id)
    sizes: dict[str, int | None] = {}
    for entry in manifest.files:
        try:
            sizes[entry.path] = (root / entry.path).stat().st_size
        except FileNotFoundError:
            sizes[entry.path] = None
    problems = compare_sizes(manifest, sizes)
    for entry in manifest.files:
        if sizes.get(entry.path) != entry.size_bytes:
            continue
        path = root / entry.path
        if entry.path.endswith(".safetensors"):
            problem = _check_safetensors(path, entry.path, entry.size_bytes)
            if problem:
                problems.append(problem)
        if deep:
            problem = _check_checksum(path, entry.path, entry.size_bytes, entry)
            if problem:
                problems.append(problem)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; … {len(problems) - 5} more" if len(problems) > 5 else "")
        raise CacheCorrupt(f"{root}: {shown}")
    return manifest


def _check_safetensors(path: Path, rel: str, size_bytes: int) -> str | None:
    with path.open("rb") as handle:
        head = handle.read(8)
        need = safetensors_header_bytes(head)
        if need is not None and need <= min(size_bytes, 100 * 1024 * 1024 + 8):
            head += handle.read(need - 8)
    return safetensors_problem(rel, head, size_bytes)


def _check_checksum(path: Path, rel: str, size_bytes: int, entry: FileEntry) -> str | None:
    best = remote_from_entry(entry).best_checksum()
    if best is None:
        return None
    kind, expected = best
    hasher = new_hasher(kind, size_bytes)
    if hasher is None:
        return None
    with path.open("rb") as handle:
        while chunk := handle.read(_READ_BYTES):
            hasher.update(chunk)
    actual = hasher.hexdigest()
    if actual != expected:
        return f"{rel}: {kind} {actual} does not match {expected}"
    return None


# --- garbage collection ----------------------------------------------------------------


def scan(node_root: Path) -> list[CachedRevision]:
    """Every complete revision under a node root, with its size, LRU time and in-use state."""
    found: list[CachedRevision] = []
    if not node_root.is_dir():
        return found
    for model in sorted(p for p in node_root.iterdir() if p.is_dir()):
        revisions = model / REVISIONS_DIR
        if not revisions.is_dir():
            continue
        for revision in sorted(p for p in revisions.iterdir() if p.is_dir()):
            marker = revision / MARKER_RELPATH
            try:
                manifest = Manifest.from_json(marker.read_text(encoding="utf-8"))
                last_used_s = marker.stat().st_mtime
            except (OSError, ValueError):
                continue
            fd = _try_flock(marker, fcntl.LOCK_EX)
            in_use = fd is None
            if fd is not None:
                os.close(fd)
            found.append(
                CachedRevision(
                    model_key=model.name,
                    revision_id=revision.name,
                    size_bytes=manifest.total_bytes,
                    last_used_s=last_used_s,
                    in_use=in_use,
                )
            )
    return found


def collect_garbage(
    node_root: Path,
    budget_bytes: int,
    log: Log,
    *,
    protect: frozenset[tuple[str, str]] = frozenset(),
    extra_needed_bytes: int = 0,
    locked_model: str | None = None,
) -> GcPlan:
    """Evict least-recently-used revisions that nobody holds until the node is under budget.

    Each eviction takes the model lock (skipping a model a fetcher is working on) and the
    revision's marker lock exclusively, without waiting: a revision that became in use
    since the scan is skipped, never deleted under a pod. `locked_model` names the model
    whose lock the caller already holds (a fetcher collecting after its download)."""
    plan = plan_gc(scan(node_root), budget_bytes, protect, extra_needed_bytes)
    for victim in plan.evict:
        model = node_root / victim.model_key
        name = f"{victim.model_key}@{victim.revision_id}"
        if _evict(model, victim.revision_id, have_lock=victim.model_key == locked_model):
            log(f"evicted {name} ({victim.size_bytes / 1024**3:.2f} GiB, least recently used)")
        else:
            log(f"kept {name}: it became in use, or a fetcher holds the model")
    log(plan.summary())
    return plan


def _evict(model: Path, revision_id: str, have_lock: bool) -> bool:
    layout = layout_for(model)
    lock_path = Path(str(layout.lock))
    lock_fd = None
    if not have_lock and lock_path.exists():
        lock_fd = _try_flock(lock_path, fcntl.LOCK_EX)
        if lock_fd is None:
            return False
    try:
        marker_fd = _try_flock(Path(str(layout.marker(revision_id))), fcntl.LOCK_EX)
        if marker_fd is None:
            return False
        try:
            trash = Path(str(layout.trash))
            trash.mkdir(exist_ok=True)
            doomed = trash / f"{revision_id}.{uuid.uuid4().hex[:8]}"
            # One rename takes the revision out of sight; deleting the bytes can then be slow.
            os.rename(Path(str(layout.revision(revision_id))), doomed)
            fsync_dir(Path(str(layout.revisions)))
        finally:
            os.close(marker_fd)
        _drop_dangling_refs(model)
        shutil.rmtree(doomed, ignore_errors=True)
        return True
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def set_aside(dest: Path, revision_id: str, why: str) -> bool:
    """Move a revision to the trash and delete it, unless someone holds it (then False)."""
    layout = layout_for(dest)
    fd = _try_flock(Path(str(layout.marker(revision_id))), fcntl.LOCK_EX)
    if fd is None:
        return False
    try:
        trash = Path(str(layout.trash))
        trash.mkdir(exist_ok=True)
        doomed = trash / f"{revision_id}.{why}.{uuid.uuid4().hex[:8]}"
        os.rename(Path(str(layout.revision(revision_id))), doomed)
    finally:
        os.close(fd)
    empty_trash(dest)
    return True


def _drop_dangling_refs(model: Path) -> None:
    refs = Path(str(layout_for(model).refs))
    if not refs.is_dir():
        return
    for link in refs.iterdir():
        if link.is_symlink() and not link.exists():
            link.unlink(missing_ok=True)


def empty_trash(dest: Path) -> None:
    trash = Path(str(layout_for(dest).trash))
    if trash.is_dir():
        shutil.rmtree(trash, ignore_errors=True)


def is_disk_full(error: OSError) -> bool:
    return error.errno in (errno.ENOSPC, errno.EDQUOT)
