"""The on-disk cache: locks, refs, markers, verification, pins and eviction. I/O.

Locks are `flock(2)` locks, chosen because the kernel drops them when the holder dies:
a killed fetcher or a deleted pod can never leave a stale lock or lease behind, and a
read-only hostPath mount is enough to take one (flock needs no write access), so a
serving pod can pin the revision it loads.

- `<model>/.lock`, exclusive: one fetcher or garbage collector per model directory.
- `revisions/<id>/.inferfleet/manifest.json`, shared: "in use" (serving pods through
  `inferfleet cache hold`, pre-cache pods while they keep a revision wanted); the garbage
  collector takes it exclusively, without waiting, before it deletes a revision.

Every path below the model directory is opened through `safefs` (descriptor-relative,
`O_NOFOLLOW`): a symlink planted in the cache is refused, never written or read through.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import socket
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from inferfleet.caching.fetcher import compile_store, safefs
from inferfleet.caching.precache.checksums import new_hasher
from inferfleet.caching.precache.fetch_errors import CacheCorrupt, CacheMissing, LockTimeout, UnsafeSource
from inferfleet.caching.precache.gc import CachedRevision, GcPlan, plan_gc
from inferfleet.caching.precache.layout import (
    LOCK_NAME,
    MARKER_DIR,
    MARKER_NAME,
    MARKER_RELPATH,
    REFS_DIR,
    REVISIONS_DIR,
    TRASH_DIR,
    ModelLayout,
    is_commit_hash,
    ref_name,
    safe_revision_id,
)
from inferfleet.caching.precache.manifest import (
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


# --- locks -----------------------------------------------------------------------------


@contextmanager
def model_lock(dest: Path, timeout_s: float, log: Log, poll_s: float = 0.2) -> Iterator[None]:
    """Exclusive lock of one model directory; waits (saying who holds it) up to timeout_s."""
    with safefs.model_dir(dest, create=True) as model_fd:
        fd = safefs.open_file(model_fd, LOCK_NAME, os.O_RDWR | os.O_CREAT, where=dest)
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
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None  # a symlink is no marker of ours
        raise
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
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CacheMissing(f"{dest}: revision {revision_id} is not cached") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeSource(f"{marker}: a symlink where the marker belongs") from None
        raise
    fcntl.flock(fd, fcntl.LOCK_SH if wait else fcntl.LOCK_SH | fcntl.LOCK_NB)
    try:
        current = os.stat(marker, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    locked = os.fstat(fd)
    if current is None or (current.st_ino, current.st_dev) != (locked.st_ino, locked.st_dev):
        os.close(fd)
        raise CacheMissing(f"{dest}: revision {revision_id} was evicted while it was being pinned")
    return fd


def write_pin(link: Path, dest: Path, revision_id: str) -> None:
    """Make `link` (in a pod-local directory) point at exactly one complete revision.

    A serving pod's verify container resolves the ref once and leaves this link; vLLM
    loads it and the hold sidecar pins what it names, so a ref the pre-cache moves later
    never changes what a running pod loads. Replaced atomically (symlink, then rename)."""
    target = Path(str(layout_for(dest.absolute()).revision(revision_id)))
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.{uuid.uuid4().hex[:8]}"
    os.symlink(target, tmp)
    os.replace(tmp, link)


def read_pin(link: Path) -> tuple[Path, str]:
    """(model directory, revision id) a pin link names; UnsafeSource for anything that is
    not a link to `<model>/revisions/<one safe id>`."""
    try:
        target = Path(os.readlink(link))
    except FileNotFoundError:
        raise CacheMissing(f"{link}: no pinned revision (the verify container did not run)") from None
    except OSError as error:
        raise UnsafeSource(f"{link}: not a pin link ({error.strerror})") from None
    if not target.is_absolute() or target.parent.name != REVISIONS_DIR or ".." in target.parts:
        raise UnsafeSource(f"{link}: points at {str(target)!r}, not a revision of a model directory")
    return target.parent.parent, safe_revision_id(target.name)


def touch(dest: Path, revision_id: str) -> None:
    """Record a use for LRU (ignored on a read-only mount)."""
    marker = Path(str(layout_for(dest).marker(revision_id)))
    with suppress(OSError):
        os.utime(marker, follow_symlinks=False)


# --- refs ------------------------------------------------------------------------------


def _is_revision(model_fd: int, revision_id: str) -> bool:
    """A complete revision directory (a real directory, not a symlink) exists."""
    try:
        safe_revision_id(revision_id)
    except UnsafeSource:
        return False
    try:
        with safefs.subdir(model_fd, REVISIONS_DIR, create=False) as revisions_fd:
            return safefs.is_plain_dir(revisions_fd, revision_id)
    except (FileNotFoundError, UnsafeSource):
        return False


def resolve_ref(dest: Path, ref: str) -> str | None:
    """The revision id a ref points to in this cache, if any."""
    try:
        model_fd = safefs.open_model_dir(dest, create=False)
    except (FileNotFoundError, NotADirectoryError, UnsafeSource):
        return None
    try:
        target = None
        try:
            with safefs.subdir(model_fd, REFS_DIR, create=False) as refs_fd:
                target = os.readlink(ref_name(ref), dir_fd=refs_fd)
        except (OSError, UnsafeSource):
            target = None
        if target is not None:
            revision_id = Path(target).name
            if _is_revision(model_fd, revision_id):
                return revision_id
        # A commit id or a revision id can be named directly.
        if (is_commit_hash(ref) or "/" not in ref) and _is_revision(model_fd, ref):
            return ref
        return None
    finally:
        os.close(model_fd)


def update_ref(dest: Path, ref: str, revision_id: str) -> None:
    """Point refs/<ref> at a revision atomically (symlink, then rename over the old one)."""
    layout = layout_for(dest)
    target = layout.ref_target(revision_id)
    name = ref_name(ref)
    with (
        safefs.model_dir(dest, create=True) as model_fd,
        safefs.subdir(model_fd, REFS_DIR, create=True, where=dest) as refs_fd,
    ):
        try:
            if os.readlink(name, dir_fd=refs_fd) == target:
                return
        except OSError:
            pass
        tmp = f".{name}.{uuid.uuid4().hex[:8]}"
        os.symlink(target, tmp, dir_fd=refs_fd)
        os.replace(tmp, name, src_dir_fd=refs_fd, dst_dir_fd=refs_fd)
        os.fsync(refs_fd)


# --- markers and verification ----------------------------------------------------------


def _read_marker(revision_fd: int, where: Path) -> str:
    try:
        with safefs.subdir(revision_fd, MARKER_DIR, create=False, where=where) as marker_dir_fd:
            fd = safefs.open_file(marker_dir_fd, MARKER_NAME, os.O_RDONLY, where=where / MARKER_DIR)
    except FileNotFoundError:
        raise CacheMissing(f"{where}: no marker") from None
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        return handle.read()


@contextmanager
def _revision_dir(dest: Path, revision_id: str) -> Iterator[int]:
    root = Path(str(layout_for(dest).revision(revision_id)))
    try:
        with (
            safefs.model_dir(dest, create=False) as model_fd,
            safefs.subdir(
                model_fd, f"{REVISIONS_DIR}/{revision_id}", create=False, where=dest
            ) as revision_fd,
        ):
            yield revision_fd
    except (FileNotFoundError, NotADirectoryError):
        raise CacheMissing(f"{dest}: revision {revision_id} is not cached ({root} is missing)") from None


def read_manifest(dest: Path, revision_id: str) -> Manifest:
    root = Path(str(layout_for(dest).revision(revision_id)))
    with _revision_dir(dest, revision_id) as revision_fd:
        return _manifest_of(revision_fd, root)


def _manifest_of(revision_fd: int, root: Path) -> Manifest:
    try:
        text = _read_marker(revision_fd, root)
    except CacheMissing:
        raise CacheMissing(f"{root}: revision has no marker") from None
    try:
        return Manifest.from_json(text)
    except ValueError as error:
        raise CacheCorrupt(f"{root / MARKER_RELPATH}: unreadable marker: {error}") from error


def _files_on_disk(revision_fd: int) -> tuple[set[str], list[str]]:
    """(regular files, anything else) below a revision, as relative names; no symlink followed."""
    regular: set[str] = set()
    other: list[str] = []
    for top, dirs, files, top_fd in os.fwalk(".", dir_fd=revision_fd, follow_symlinks=False):
        prefix = "" if top == "." else top.removeprefix("./") + "/"
        for name in files + dirs:  # a symlink to a directory is listed, never descended
            info = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                regular.add(prefix + name)
            elif not stat.S_ISDIR(info.st_mode):
                other.append(prefix + name)
    return regular, other


def verify_revision(dest: Path, revision_id: str, deep: bool = False) -> Manifest:
    """Check a complete revision against its marker: every file present with its size and
    nothing else beside them, no symlink anywhere, safetensors headers consistent with
    their sizes, and (deep) every checksum the marker records."""
    root = Path(str(layout_for(dest).revision(revision_id)))
    with _revision_dir(dest, revision_id) as revision_fd:
        manifest = _manifest_of(revision_fd, root)
        regular, other = _files_on_disk(revision_fd)
        listed = {entry.path for entry in manifest.files} | {MARKER_RELPATH}
        sizes: dict[str, int | None] = {}
        for entry in manifest.files:
            sizes[entry.path] = _size_in(revision_fd, entry.path) if entry.path in regular else None
        problems = compare_sizes(manifest, sizes)
        problems += [f"{name}: not a regular file (a symlink planted in the cache?)" for name in other]
        problems += [f"{name}: on disk but not in the marker" for name in sorted(regular - listed)]
        for entry in manifest.files:
            if sizes.get(entry.path) != entry.size_bytes:
                continue
            fd = _open_in(revision_fd, entry.path, root)
            with os.fdopen(fd, "rb") as handle:
                if entry.path.endswith(".safetensors"):
                    problem = _check_safetensors(handle, entry.path, entry.size_bytes)
                    if problem:
                        problems.append(problem)
                if deep:
                    handle.seek(0)
                    problem = _check_checksum(handle, entry.path, entry.size_bytes, entry)
                    if problem:
                        problems.append(problem)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; … {len(problems) - 5} more" if len(problems) > 5 else "")
        raise CacheCorrupt(f"{root}: {shown}")
    return manifest


def _open_in(revision_fd: int, rel: str, root: Path) -> int:
    head, name = safefs.split(rel)
    with safefs.subdir(revision_fd, head, create=False, where=root) as parent_fd:
        return safefs.open_file(parent_fd, name, os.O_RDONLY, where=root / head if head else root)


def _size_in(revision_fd: int, rel: str) -> int | None:
    head, name = safefs.split(rel)
    try:
        with safefs.subdir(revision_fd, head, create=False) as parent_fd:
            info = safefs.lstat(parent_fd, name)
    except (FileNotFoundError, UnsafeSource):
        return None
    return info.st_size if info is not None and stat.S_ISREG(info.st_mode) else None


def _check_safetensors(handle: BinaryIO, rel: str, size_bytes: int) -> str | None:
    head = handle.read(8)
    need = safetensors_header_bytes(head)
    if need is not None and need <= min(size_bytes, 100 * 1024 * 1024 + 8):
        head += handle.read(need - 8)
    return safetensors_problem(rel, head, size_bytes)


def _check_checksum(handle: BinaryIO, rel: str, size_bytes: int, entry: FileEntry) -> str | None:
    best = remote_from_entry(entry).best_checksum()
    if best is None:
        return None
    kind, expected = best
    hasher = new_hasher(kind, size_bytes)
    if hasher is None:
        return None
    while chunk := handle.read(_READ_BYTES):
        hasher.update(chunk)
    actual = hasher.hexdigest()
    if actual != expected:
        return f"{rel}: {kind} {actual} does not match {expected}"
    return None


# --- garbage collection ----------------------------------------------------------------


def _plain_dirs(parent: Path) -> list[Path]:
    """Directories (never symlinks) in `parent`, sorted."""
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return []
    return [entry for entry in entries if not entry.is_symlink() and entry.is_dir()]


def scan(node_root: Path) -> list[CachedRevision]:
    """Every complete revision under a node root, with its size, LRU time and in-use state.

    Symlinks and names that are no revision id are not revisions of ours: skipped."""
    found: list[CachedRevision] = []
    if not node_root.is_dir():
        return found
    for model in _plain_dirs(node_root):
        revisions = model / REVISIONS_DIR
        if revisions.is_symlink() or not revisions.is_dir():
            continue
        for revision in _plain_dirs(revisions):
            try:
                safe_revision_id(revision.name)
                manifest = read_manifest(model, revision.name)
                last_used_s = os.stat(revision / MARKER_RELPATH, follow_symlinks=False).st_mtime
            except (OSError, ValueError, UnsafeSource, CacheMissing, CacheCorrupt):
                continue
            fd = _try_flock(revision / MARKER_RELPATH, fcntl.LOCK_EX)
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
    whose lock the caller already holds (a fetcher collecting after its download).

    Compile caches (fetcher.compile_store) count in the same budget: each goes with its
    weights revision, or earlier when it is the least recently used."""
    plan = plan_gc(scan_all(node_root), budget_bytes, protect, extra_needed_bytes)
    for victim in plan.evict:
        name = f"{victim.model_key}@{victim.revision_id}"
        if victim.is_compile_cache:
            evicted = compile_store.evict(node_root, victim)
        else:
            model = node_root / victim.model_key
            evicted = _evict(model, victim.revision_id, have_lock=victim.model_key == locked_model)
        if evicted:
            why = (
                "a compile cache: least recently used, or its revision is gone"
                if victim.is_compile_cache
                else "least recently used"
            )
            log(f"evicted {name} ({victim.size_bytes / 1024**3:.2f} GiB, {why})")
        else:
            log(f"kept {name}: it became in use, or a fetcher holds the model")
    compile_store.clean_partials(node_root, log)
    log(plan.summary())
    return plan


def scan_all(node_root: Path) -> list[CachedRevision]:
    """The weights' revisions and the compile caches under a node root (one namespace's tree)."""
    return scan(node_root) + compile_store.scan(node_root)


def _to_trash(dest: Path, revision_id: str, suffix: str) -> None:
    """One rename takes a revision out of sight (descriptor-relative: the revision and the
    trash are the model's own directories, never what a planted symlink points at)."""
    safe_revision_id(revision_id)
    with (
        safefs.model_dir(dest, create=False) as model_fd,
        safefs.subdir(model_fd, REVISIONS_DIR, create=False, where=dest) as revisions_fd,
        safefs.subdir(model_fd, TRASH_DIR, create=True, where=dest) as trash_fd,
        safefs.subdir(revisions_fd, revision_id, create=False, where=dest) as revision_fd,
    ):
        # A sealed revision is 0555; moving a directory to another parent needs write
        # access to it (its '..' entry changes).
        os.fchmod(revision_fd, 0o755)
        os.rename(revision_id, f"{revision_id}.{suffix}", src_dir_fd=revisions_fd, dst_dir_fd=trash_fd)
        os.fsync(revisions_fd)


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
            _to_trash(model, revision_id, uuid.uuid4().hex[:8])
        finally:
            os.close(marker_fd)
        _drop_dangling_refs(model)
        empty_trash(model)
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
        _to_trash(dest, revision_id, f"{why}.{uuid.uuid4().hex[:8]}")
    finally:
        os.close(fd)
    empty_trash(dest)
    return True


def _drop_dangling_refs(model: Path) -> None:
    try:
        with (
            safefs.model_dir(model, create=False) as model_fd,
            safefs.subdir(model_fd, REFS_DIR, create=False) as refs_fd,
        ):
            for name in os.listdir(refs_fd):
                try:
                    target = os.readlink(name, dir_fd=refs_fd)
                except OSError:
                    continue
                if not _is_revision(model_fd, Path(target).name):
                    with suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=refs_fd)
    except (FileNotFoundError, UnsafeSource):
        return


def _writable_tree(parent_fd: int, name: str) -> None:
    """Give the owner write access back to every directory of a sealed (read-only)
    revision so it can be deleted; descriptor-relative, never following a symlink."""
    try:
        top = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return  # a file or a symlink: unlinking needs no write access to it
    try:
        for _root, _dirs, _files, directory_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            with suppress(OSError):
                os.fchmod(directory_fd, 0o755)
    finally:
        os.close(top)


def empty_trash(dest: Path) -> None:
    """Delete what the trash holds; a trash that is a symlink is refused, never emptied."""
    try:
        with (
            safefs.model_dir(dest, create=False) as model_fd,
            safefs.subdir(model_fd, TRASH_DIR, create=False, where=dest) as trash_fd,
        ):
            for name in os.listdir(trash_fd):
                _writable_tree(trash_fd, name)
                # rmtree with dir_fd walks by descriptors and never follows a symlink.
                shutil.rmtree(name, ignore_errors=True, dir_fd=trash_fd)
                with suppress(OSError):
                    os.unlink(name, dir_fd=trash_fd)  # a planted symlink: the link goes
    except FileNotFoundError:
        return


def is_disk_full(error: OSError) -> bool:
    return error.errno in (errno.ENOSPC, errno.EDQUOT)
