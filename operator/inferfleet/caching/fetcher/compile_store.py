"""The engine's compile caches on the node: key directories, restore, publish, scan, evict. I/O.

Layout and who does what: caching/precache/compile_cache.py. Every path below a key
directory is opened descriptor-relative without following a symlink (safefs), like the
weights: a planted symlink is refused, never read or written through. A published entry
is sealed read-only (0444 files, 0555 directories) and lists every file with its size in
its marker; a restore copies only an entry whose files are exactly those, as plain files,
and otherwise starts cold (never fails the pod: a compile cache is only ever a shortcut).

Locks (flock, dropped by the kernel when the holder dies):
- `<key>/.lock`, exclusive: one publisher (or the garbage collector) per key at a time;
- `<key>/<revision>/.inferfleet/compile.json`, shared: "in use" by a serving pod's hold
  sidecar; the garbage collector takes it exclusively, without waiting, to delete it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from inferfleet.caching.fetcher import safefs
from inferfleet.caching.precache.compile_cache import COMPILE_DIR, COMPILE_MARKER
from inferfleet.caching.precache.fetch_errors import UnsafeSource
from inferfleet.caching.precache.gc import CachedRevision
from inferfleet.caching.precache.layout import LOCK_NAME, PARTIAL_DIR, TRASH_DIR, safe_revision_id

Log = Callable[[str], None]
_NAME: Final = re.compile(r"^(?![.-])[A-Za-z0-9._-]{1,200}$")
_COPY_BYTES: Final = 8 * 1024 * 1024
MARKER_DIR, MARKER_NAME = COMPILE_MARKER.split("/")
# The model directory and config key of an entry, as the garbage collector names it.
ENTRY_PREFIX: Final = f"{COMPILE_DIR}/"
# The most one publish copies onto the node (what vLLM, Inductor and Triton write for one
# model is hundreds of MiB to a few GiB).
MAX_PUBLISH_BYTES: Final = 32 * 2**30


def split_key(key: str) -> tuple[str, str]:
    """`<model-dir>/<config-key>` as two plain directory names, or UnsafeSource."""
    parts = key.split("/")
    if len(parts) != 2 or not all(_NAME.match(part) for part in parts):
        raise UnsafeSource(f"compile-cache key {key!r} is not <model-dir>/<config-key> of plain names")
    return parts[0], parts[1]


def ensure_key_dir(node_root: Path, key: str) -> Path:
    """Create `<node-root>/compile/<model-dir>/<config-key>` (the pre-cache pod, as the
    tree's owner, before any serving pod mounts it)."""
    model, config = split_key(key)
    with (
        safefs.model_dir(node_root, create=False) as root_fd,
        safefs.subdir(root_fd, f"{COMPILE_DIR}/{model}/{config}", create=True, where=node_root),
    ):
        pass
    return node_root / COMPILE_DIR / model / config


# --- reading an entry --------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """A complete entry's files (relative path -> size) and total."""

    files: dict[str, int]

    @property
    def size_bytes(self) -> int:
        return sum(self.files.values())


def _marker(entry_fd: int, where: Path) -> dict[str, int]:
    with safefs.subdir(entry_fd, MARKER_DIR, create=False, where=where) as marker_dir:
        fd = safefs.open_file(marker_dir, MARKER_NAME, os.O_RDONLY, where=where / MARKER_DIR)
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        loaded = json.loads(handle.read(16 * 1024 * 1024))
    files = loaded.get("files") if isinstance(loaded, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in files.items()
    ):
        raise UnsafeSource(f"{where}: unreadable compile-cache marker")
    return files


def _walk(top_fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything below a directory descriptor; no symlink followed."""
    for directory, dirs, files, directory_fd in os.fwalk(".", dir_fd=top_fd, follow_symlinks=False):
        prefix = "" if directory == "." else directory.removeprefix("./") + "/"
        for name in files + dirs:
            yield prefix + name, os.stat(name, dir_fd=directory_fd, follow_symlinks=False)


def read_entry(store: Path, revision_id: str) -> Entry | None:
    """The key's complete entry for a revision, checked against its marker (exactly the
    listed files, plain, at their sizes); None when absent; UnsafeSource when it is not
    what a publisher leaves."""
    safe_revision_id(revision_id)
    try:
        with safefs.model_dir(store, create=False) as key_fd:
            entry_fd = safefs.open_subdir(key_fd, revision_id, create=False, where=store)
    except FileNotFoundError:
        return None
    try:
        files = _marker(entry_fd, store / revision_id)
        seen: dict[str, int] = {}
        for rel, info in _walk(entry_fd):
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeSource(f"{store / revision_id / rel}: not a plain file")
            if rel != COMPILE_MARKER:
                seen[rel] = info.st_size
        if seen != files:
            raise UnsafeSource(f"{store / revision_id}: files differ from its marker")
        return Entry(files)
    finally:
        os.close(entry_fd)


# --- restore (a serving pod's init container, the pod's own UID) ------------------------


def _copy_file(src_dir: int, name: str, dst_dir: int, mode: int, *, fsync: bool) -> int:
    src = safefs.open_file(src_dir, name, os.O_RDONLY)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise UnsafeSource(f"{name}: not a plain file")
        dst = safefs.open_file(dst_dir, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            copied = 0
            while chunk := os.read(src, _COPY_BYTES):
                os.write(dst, chunk)
                copied += len(chunk)
            if fsync:
                os.fsync(dst)
            return copied
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_tree(src_fd: int, dst_fd: int, *, fsync: bool, log: Log | None = None) -> tuple[int, int]:
    """Plain files and directories below `src_fd` into `dst_fd` (symlinks and devices are
    skipped, never followed); (files, bytes)."""
    files = size = 0
    for name in sorted(os.listdir(src_fd)):
        info = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            with suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=dst_fd)
            with (
                safefs.subdir(src_fd, name, create=False) as sub_src,
                safefs.subdir(dst_fd, name, create=False) as sub_dst,
            ):
                more_files, more_bytes = _copy_tree(sub_src, sub_dst, fsync=fsync, log=log)
            files, size = files + more_files, size + more_bytes
        elif stat.S_ISREG(info.st_mode):
            size += _copy_file(src_fd, name, dst_fd, 0o644, fsync=fsync)
            files += 1
        elif log is not None:
            log(f"skipped {name}: not a plain file or directory")
    return files, size


@dataclass(frozen=True)
class Restored:
    warm: bool
    files: int
    size_bytes: int
    why: str


def restore(store: Path, revision_id: str, into: Path, dirs: Sequence[str]) -> Restored:
    """Copy the key's entry for `revision_id` (its `dirs`) into `into`; cold when there is
    none or it is not intact (the engine then compiles, and the pod publishes it anew), or
    when it goes while being copied (what was copied is removed again)."""
    try:
        entry = read_entry(store, revision_id)
    except (UnsafeSource, OSError, ValueError) as error:
        return Restored(False, 0, 0, f"not used: {error}")
    if entry is None:
        return Restored(False, 0, 0, "none for this key and revision on this node")
    into.mkdir(parents=True, exist_ok=True)
    try:
        files, size = _copy_entry(store, revision_id, into, dirs)
    except (UnsafeSource, OSError) as error:
        for name in dirs:
            shutil.rmtree(into / name, ignore_errors=True)
        return Restored(False, 0, 0, f"not used: it changed while being copied ({error})")
    return Restored(True, files, size, f"{files} files, {size / 2**20:.1f} MiB")


def _copy_entry(store: Path, revision_id: str, into: Path, dirs: Sequence[str]) -> tuple[int, int]:
    files = size = 0
    with (
        safefs.model_dir(store, create=False) as key_fd,
        safefs.subdir(key_fd, revision_id, create=False, where=store) as entry_fd,
        safefs.model_dir(into, create=False) as into_fd,
    ):
        for name in dirs:
            if not safefs.is_plain_dir(entry_fd, name):
                continue
            with suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=into_fd)
            with (
                safefs.subdir(entry_fd, name, create=False) as src,
                safefs.subdir(into_fd, name, create=False) as dst,
            ):
                more_files, more_bytes = _copy_tree(src, dst, fsync=False)
            files, size = files + more_files, size + more_bytes
    return files, size


def entry_state(store: Path, revision_id: str) -> str:
    """`intact`, `absent`, or `broken` (there, but not what a publisher leaves)."""
    try:
        return "absent" if read_entry(store, revision_id) is None else "intact"
    except (UnsafeSource, OSError, ValueError):
        return "broken"


# --- publish (a serving pod's hold sidecar, the tree owner's UID) -----------------------


@contextmanager
def key_lock(store: Path, *, wait_s: float) -> Iterator[bool]:
    """The key's exclusive lock; yields False when another holder kept it past `wait_s`."""
    with safefs.model_dir(store, create=False) as key_fd:
        fd = safefs.open_file(key_fd, LOCK_NAME, os.O_RDWR | os.O_CREAT, where=store)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.2)
        yield True
    finally:
        os.close(fd)


def _seal(top_fd: int) -> None:
    """Files 0444 and directories 0555, bottom-up (descriptor-relative)."""
    for _directory, _dirs, files, directory_fd in os.fwalk(
        ".", dir_fd=top_fd, topdown=False, follow_symlinks=False
    ):
        for name in files:
            with suppress(OSError):
                os.chmod(name, 0o444, dir_fd=directory_fd, follow_symlinks=False)
        os.fchmod(directory_fd, 0o555)


@dataclass(frozen=True)
class Published:
    published: bool
    files: int
    size_bytes: int
    why: str


def _write_marker(tmp_fd: int, files: dict[str, int], revision_id: str) -> None:
    with safefs.subdir(tmp_fd, MARKER_DIR, create=True) as marker_dir:
        fd = safefs.open_file(marker_dir, MARKER_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"revisionId": revision_id, "files": files}, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())


def _source_bytes(source: Path, dirs: Sequence[str]) -> int:
    total = 0
    with safefs.model_dir(source, create=False) as source_fd:
        for name in dirs:
            if safefs.is_plain_dir(source_fd, name):
                with safefs.subdir(source_fd, name, create=False) as top:
                    total += sum(info.st_size for _rel, info in _walk(top) if stat.S_ISREG(info.st_mode))
    return total


def publish(
    store: Path,
    revision_id: str,
    source: Path,
    dirs: Sequence[str],
    log: Log,
    *,
    max_bytes: int = MAX_PUBLISH_BYTES,
) -> Published:
    """Copy what the engine wrote (`source`/`dirs`) into the key as `revision_id`'s entry:
    into `.partial/`, sealed, then renamed in; nothing when an intact entry exists already
    (one that is not intact is deleted and replaced). More than `max_bytes` is refused: a
    compile cache is hundreds of MiB, and an engine that wrote more fills no node."""
    safe_revision_id(revision_id)
    size_bytes = _source_bytes(source, dirs)
    if size_bytes > max_bytes:
        raise UnsafeSource(
            f"the engine wrote {size_bytes / 2**30:.1f} GiB, more than {max_bytes / 2**30:.0f} GiB"
        )
    with key_lock(store, wait_s=120.0) as locked:
        if not locked:
            return Published(False, 0, 0, "another publisher held the key for 120 s")
        state = entry_state(store, revision_id)
        if state == "intact":
            return Published(False, 0, 0, "already on this node")
        with safefs.model_dir(store, create=False) as key_fd:
            if state == "broken" or safefs.lstat(key_fd, revision_id) is not None:
                _set_aside(store, key_fd, revision_id)
                log(f"replaced {revision_id}: it was not what a publisher leaves")
            tmp_name = f"{revision_id}.{uuid.uuid4().hex[:8]}"
            with safefs.subdir(key_fd, f"{PARTIAL_DIR}/{tmp_name}", create=True, where=store) as tmp_fd:
                files = size = 0
                with safefs.model_dir(source, create=False) as source_fd:
                    for name in dirs:
                        if not safefs.is_plain_dir(source_fd, name):
                            continue
                        os.mkdir(name, 0o755, dir_fd=tmp_fd)
                        with (
                            safefs.subdir(source_fd, name, create=False) as src,
                            safefs.subdir(tmp_fd, name, create=False) as dst,
                        ):
                            more_files, more_bytes = _copy_tree(src, dst, fsync=True, log=log)
                        files, size = files + more_files, size + more_bytes
                listing = {rel: info.st_size for rel, info in _walk(tmp_fd) if stat.S_ISREG(info.st_mode)}
                _write_marker(tmp_fd, listing, revision_id)
                _seal(tmp_fd)
                os.fchmod(tmp_fd, 0o755)  # moving a directory needs write access to it
            with safefs.subdir(key_fd, PARTIAL_DIR, create=False, where=store) as partial_fd:
                os.rename(tmp_name, revision_id, src_dir_fd=partial_fd, dst_dir_fd=key_fd)
            with safefs.subdir(key_fd, revision_id, create=False, where=store) as entry_fd:
                os.fchmod(entry_fd, 0o555)
            os.fsync(key_fd)
    return Published(True, files, size, f"{files} files, {size / 2**20:.1f} MiB")


def _set_aside(store: Path, key_fd: int, revision_id: str) -> None:
    """Move an entry (or whatever stands at its name) to the trash and delete it."""
    with safefs.subdir(key_fd, TRASH_DIR, create=True, where=store) as trash_fd:
        gone = f"{revision_id}.{uuid.uuid4().hex[:8]}"
        info = safefs.lstat(key_fd, revision_id)
        if info is not None and stat.S_ISDIR(info.st_mode):
            with safefs.subdir(key_fd, revision_id, create=False, where=store) as entry_fd:
                os.fchmod(entry_fd, 0o755)
        os.rename(revision_id, gone, src_dir_fd=key_fd, dst_dir_fd=trash_fd)
        _delete(trash_fd, gone)


def pin(store: Path, revision_id: str) -> int | None:
    """A shared lock on the entry's marker (the garbage collector leaves it); None when absent."""
    marker = store / safe_revision_id(revision_id) / COMPILE_MARKER
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


# --- garbage collection (the pre-cache pod, the tree owner's UID) -----------------------


def _plain_dirs(parent: Path) -> list[Path]:
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return []
    return [e for e in entries if _NAME.match(e.name) and not e.is_symlink() and e.is_dir()]


def _in_use(marker: Path) -> bool:
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def scan(node_root: Path) -> list[CachedRevision]:
    """Every complete compile-cache entry under a namespace's tree, as garbage-collector
    entries: `compile/<model-dir>/<config-key>` @ revision, of that model's revision."""
    found: list[CachedRevision] = []
    for model in _plain_dirs(node_root / COMPILE_DIR):
        for key in _plain_dirs(model):
            for entry in _plain_dirs(key):
                try:
                    read = read_entry(key, entry.name)
                    last_used_s = os.stat(entry / COMPILE_MARKER, follow_symlinks=False).st_mtime
                except (OSError, ValueError, UnsafeSource):
                    continue
                if read is None:
                    continue
                found.append(
                    CachedRevision(
                        model_key=f"{ENTRY_PREFIX}{model.name}/{key.name}",
                        revision_id=entry.name,
                        size_bytes=read.size_bytes,
                        last_used_s=last_used_s,
                        in_use=_in_use(entry / COMPILE_MARKER),
                        of_revision=(model.name, entry.name),
                    )
                )
    return found


def _writable(top_fd: int) -> None:
    for _directory, _dirs, _files, directory_fd in os.fwalk(".", dir_fd=top_fd, follow_symlinks=False):
        with suppress(OSError):
            os.fchmod(directory_fd, 0o755)


def _delete(parent_fd: int, name: str) -> None:
    try:
        top = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        with suppress(OSError):
            os.unlink(name, dir_fd=parent_fd)
        return
    try:
        _writable(top)
    finally:
        os.close(top)
    shutil.rmtree(name, ignore_errors=True, dir_fd=parent_fd)


def evict(node_root: Path, victim: CachedRevision) -> bool:
    """Delete one entry unless a publisher holds its key or a pod holds the entry."""
    model, config = split_key(victim.model_key.removeprefix(ENTRY_PREFIX))
    store = node_root / COMPILE_DIR / model / config
    try:
        with key_lock(store, wait_s=0.0) as locked:
            if not locked or _in_use(store / victim.revision_id / COMPILE_MARKER):
                return False
            with safefs.model_dir(store, create=False) as key_fd:
                _set_aside(store, key_fd, victim.revision_id)
    except (OSError, UnsafeSource) as error:
        return getattr(error, "errno", None) == errno.ENOENT
    return True


def clean_partials(node_root: Path, log: Log) -> None:
    """Copies a publisher left behind (it died mid-copy): removed where nobody holds the key."""
    for model in _plain_dirs(node_root / COMPILE_DIR):
        for key in _plain_dirs(model):
            if not (key / PARTIAL_DIR).is_dir():
                continue
            with key_lock(key, wait_s=0.0) as locked:
                if not locked:
                    continue
                with (
                    safefs.model_dir(key, create=False) as key_fd,
                    safefs.subdir(key_fd, PARTIAL_DIR, create=False, where=key) as partial_fd,
                ):
                    for name in os.listdir(partial_fd):
                        _delete(partial_fd, name)
                        log(f"removed an unfinished compile-cache copy {model.name}/{key.name}/{name}")
