"""The fetcher: make one model revision complete and verified in a local directory. I/O.

`fetch(source, dest, options)` is what `inferfleet cache fetch` and the pre-cache pods
run. In order:

1. an immutable revision (a commit id) already complete on disk returns at once, with no
   lock and no network: restarting a pre-cache pod costs nothing;
2. take the model directory's lock (a second fetcher waits, then finds the work done);
3. resolve the revision at the source (retried with backoff); if the source cannot be
   reached but the ref already points to a complete revision, keep it and warn;
4. download the missing files into `.partial/<revision>/` in parallel, each resumed from
   the bytes a killed run left (`*.part`), hashed while written, checked against the
   size and checksum the source published, fsynced, then renamed to its final name;
5. write the marker, fsync, rename the whole directory to `revisions/<revision>` (the
   only way a revision becomes visible), point `refs/<ref>` at it;
6. optionally garbage-collect the node under its budget, never touching what is in use.

Errors come out as `CacheError` subclasses with a reason; transient ones are retried
here first (exponential backoff with jitter), and the pod's restart backoff retries the
rest. Nothing partial is ever under `revisions/`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import random
import shutil
import stat
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from inferfleet.api.source_paths import revision_problem
from inferfleet.caching.fetcher import safefs, store
from inferfleet.caching.fetcher.partfile import PartWriter
from inferfleet.caching.fetcher.progress import GIB, Progress
from inferfleet.caching.fetcher.remote import S3Source, Source, open_source
from inferfleet.caching.precache.checksums import Hasher, new_hasher
from inferfleet.caching.precache.fetch_errors import (
    CacheCorrupt,
    CacheError,
    CacheMissing,
    ChecksumMismatch,
    DiskFull,
    SourceInvalid,
    SourceNotFound,
    SourceUnreachable,
    UnsafeSource,
    WriteFailed,
)
from inferfleet.caching.precache.gc import GcPlan
from inferfleet.caching.precache.layout import (
    DEFAULT_REF,
    MARKER_DIR,
    MARKER_NAME,
    PART_SUFFIX,
    PARTIAL_DIR,
    REVISIONS_DIR,
    SourceRef,
    is_commit_hash,
    model_key,
    parse_source,
    safe_revision_id,
)
from inferfleet.caching.precache.manifest import (
    DEFAULT_ALLOW_PATTERNS,
    DEFAULT_IGNORE_PATTERNS,
    Manifest,
    RemoteFile,
    ResolvedRevision,
    entry_for,
    is_weight_file,
    resume_offset,
    select_files,
    total_bytes,
    weight_bytes,
)
from inferfleet.caching.precache.names import check_listing

Log = Callable[[str], None]
T = TypeVar("T")

# Free space kept aside beyond the download itself (the marker, filesystem slack).
DISK_RESERVE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter for transient source errors."""

    attempts: int = 6
    base_s: float = 1.0
    max_s: float = 60.0

    def delay_s(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_s, self.base_s * 2**attempt))


@dataclass(frozen=True)
class FetchOptions:
    revision: str = DEFAULT_REF
    token: str | None = None
    # A mounted Secret with one file per AWS_* variable (s3:// sources).
    credentials_dir: Path | None = None
    allow_patterns: tuple[str, ...] = DEFAULT_ALLOW_PATTERNS
    ignore_patterns: tuple[str, ...] = DEFAULT_IGNORE_PATTERNS
    parallel: int = 4
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    lock_timeout_s: float = 6 * 3600.0
    # Per-node budget for garbage collection of old revisions; None disables it.
    budget_bytes: int | None = None
    # The node's cache root (all models); defaults to dest's parent.
    node_root: Path | None = None
    progress_interval_s: float = 5.0
    # Injected in tests to simulate a small disk.
    free_bytes: Callable[[Path], int] | None = None
    # Large files around the page cache (O_DIRECT) where the filesystem allows it.
    direct_io: bool = True


@dataclass(frozen=True)
class FetchResult:
    manifest: Manifest
    revision_dir: Path
    reused: bool
    bytes_transferred: int
    seconds: float
    warning: str | None = None
    gc: GcPlan | None = None


def _noop(_: str) -> None:
    return None


def fetch(source_uri: str, dest: Path, options: FetchOptions | None = None, log: Log = _noop) -> FetchResult:
    """Make one revision complete in `dest`; every failure is a CacheError with its reason."""
    try:
        return _fetch(source_uri, dest, options or FetchOptions(), log)
    except OSError as error:
        # The node's filesystem, not the source: a reason instead of a traceback.
        raise _os_error(error, Path(error.filename) if error.filename else dest) from error


def _fetch(source_uri: str, dest: Path, options: FetchOptions, log: Log) -> FetchResult:
    started = time.monotonic()
    ref = parse_source(source_uri)
    dest = dest.absolute()
    revision = options.revision or DEFAULT_REF
    problem = revision_problem(revision)
    if problem is not None:
        raise SourceInvalid(f"revision {revision!r}: {problem}")

    # 1. An immutable revision that is already complete: nothing to ask anyone.
    if is_commit_hash(revision):
        reused = _reuse(dest, revision, revision, log)
        if reused is not None:
            return _finish_reuse(
                dest,
                manifest=reused,
                started=started,
                options=options,
                ref=ref,
                warning=None,
                log=log,
                locked=False,
            )

    # 2. One fetcher per model directory.
    with store.model_lock(dest, options.lock_timeout_s, log):
        store.empty_trash(dest)
        source = open_source(ref, options.token, options.credentials_dir)
        try:
            resolved = _with_retries(lambda: source.resolve(revision), options.retry, log)
        except SourceUnreachable as error:
            current = store.resolve_ref(dest, revision)
            if current is None or _reuse(dest, revision, current, log) is None:
                raise
            warning = f"source unreachable, keeping the cached revision {current}: {error.message}"
            log(f"warning: {warning}")
            return _finish_reuse(
                dest,
                manifest=read_ok(dest, current),
                started=started,
                options=options,
                ref=ref,
                warning=warning,
                log=log,
            )

        # The source's word is as untrusted as its files: its revision id becomes a
        # directory name, and every name it lists a path below it.
        safe_revision_id(resolved.revision_id)
        reused = _reuse(dest, revision, resolved.revision_id, log)
        if reused is not None:
            return _finish_reuse(
                dest, manifest=reused, started=started, options=options, ref=ref, warning=None, log=log
            )

        where = f"{source_uri}@{revision}"
        files = _wanted_files(source, resolved, where=where, options=options, log=log)
        manifest, transferred = _download(
            source,
            ref=ref,
            resolved=resolved,
            files=files,
            dest=dest,
            options=options,
            log=log,
            started=started,
        )
        store.update_ref(dest, revision, resolved.revision_id)
        seconds = time.monotonic() - started
        log(
            f"fetched {source_uri}@{revision} → {resolved.revision_id}: {manifest.total_bytes / GIB:.2f} GiB "
            f"in {seconds:.1f}s ({transferred / GIB:.2f} GiB transferred)"
        )
        gc = _gc(dest, resolved.revision_id, options, log, locked=True)
        return FetchResult(
            manifest=manifest,
            revision_dir=Path(str(store.layout_for(dest).revision(resolved.revision_id))),
            reused=False,
            bytes_transferred=transferred,
            seconds=seconds,
            gc=gc,
        )


def _wanted_files(
    source: Source,
    resolved: ResolvedRevision,
    *,
    where: str,
    options: FetchOptions,
    log: Log,
) -> tuple[RemoteFile, ...]:
    """The listed files the patterns select, every name checked; at least one weight file;
    an S3 object's sha256 where its listing lacks one."""
    files = select_files(resolved.files, options.allow_patterns, options.ignore_patterns)
    check_listing(where, [f.path for f in files])
    if not any(is_weight_file(f.path) for f in files):
        raise SourceNotFound(
            f"{where}: no weight files match {', '.join(options.allow_patterns)} "
            f"among {len(resolved.files)} file(s) (pass --allow-pattern for other formats)"
        )
    if isinstance(source, S3Source):
        files = tuple(_with_s3_sha256(source, f, options, log) for f in files)
    return tuple(files)


def read_ok(dest: Path, revision_id: str) -> Manifest:
    return store.verify_revision(dest, revision_id)


def _reuse(dest: Path, revision: str, revision_id: str, log: Log) -> Manifest | None:
    """The marker-checked manifest of a complete revision, or None when it must be fetched."""
    try:
        return store.verify_revision(dest, revision_id)
    except CacheMissing:
        return None
    except CacheCorrupt as error:
        # Someone damaged a complete revision (manual edit, disk error): set it aside unless
        # a pod holds it, in which case the operator must hear about it rather than us
        # deleting files under a running server.
        log(f"cached revision {revision_id} failed verification, refetching: {error.message}")
        if not store.set_aside(dest, revision_id, "corrupt"):
            raise
        return None


def _finish_reuse(
    dest: Path,
    *,
    manifest: Manifest,
    started: float,
    options: FetchOptions,
    ref: SourceRef,
    warning: str | None,
    log: Log,
    locked: bool = True,
) -> FetchResult:
    revision = options.revision or DEFAULT_REF
    if store.resolve_ref(dest, revision) != manifest.revision_id:
        if locked:
            store.update_ref(dest, revision, manifest.revision_id)
        else:
            with store.model_lock(dest, options.lock_timeout_s, log):
                store.update_ref(dest, revision, manifest.revision_id)
    store.touch(dest, manifest.revision_id)
    log(f"{ref.uri}@{revision} is already complete in {dest} (revision {manifest.revision_id})")
    return FetchResult(
        manifest=manifest,
        revision_dir=Path(str(store.layout_for(dest).revision(manifest.revision_id))),
        reused=True,
        bytes_transferred=0,
        seconds=time.monotonic() - started,
        warning=warning,
        gc=_gc(dest, manifest.revision_id, options, log, locked),
    )


def _gc(dest: Path, revision_id: str, options: FetchOptions, log: Log, locked: bool) -> GcPlan | None:
    if options.budget_bytes is None:
        return None
    node_root = options.node_root or dest.parent
    protect = frozenset({(dest.name, revision_id)})
    return store.collect_garbage(
        node_root, options.budget_bytes, log, protect=protect, locked_model=dest.name if locked else None
    )


def _with_retries(call: Callable[[], T], retry: RetryPolicy, log: Log) -> T:
    attempt = 0
    while True:
        try:
            return call()
        except CacheError as error:
            if not error.retryable or attempt + 1 >= retry.attempts:
                raise
            delay = retry.delay_s(attempt)
            log(f"{error.reason}: {error.message}; retrying in {delay:.1f}s")
            time.sleep(delay)
            attempt += 1


def _with_s3_sha256(source: S3Source, remote: RemoteFile, options: FetchOptions, log: Log) -> RemoteFile:
    """Multipart uploads have no MD5 ETag; use a full-object SHA-256 when S3 keeps one."""
    if remote.md5:
        return remote
    sha = _with_retries(lambda: source.full_object_sha256(remote), options.retry, log)
    if sha is None:
        return remote
    return RemoteFile(path=remote.path, size_bytes=remote.size_bytes, sha256=sha, md5=None, etag=remote.etag)


# --- downloading -------------------------------------------------------------------------


def _download(
    source: Source,
    *,
    ref: SourceRef,
    resolved: ResolvedRevision,
    files: tuple[RemoteFile, ...],
    dest: Path,
    options: FetchOptions,
    log: Log,
    started: float,
) -> tuple[Manifest, int]:
    layout = store.layout_for(dest)
    partial = Path(str(layout.partial(resolved.revision_id)))
    with (
        safefs.model_dir(dest, create=True) as model_fd,
        safefs.subdir(model_fd, PARTIAL_DIR, create=True, where=dest) as partials_fd,
    ):
        # Downloads of other revisions were abandoned (we hold the lock): free their space.
        for other in os.listdir(partials_fd):
            if other != resolved.revision_id:
                shutil.rmtree(other, ignore_errors=True, dir_fd=partials_fd)
                with contextlib.suppress(OSError):
                    os.unlink(other, dir_fd=partials_fd)  # a planted symlink: only the link goes
        with safefs.subdir(
            partials_fd, resolved.revision_id, create=True, where=partial.parent
        ) as partial_fd:
            manifest, transferred = _download_into(
                source,
                partial_fd,
                partial,
                ref=ref,
                resolved=resolved,
                files=files,
                dest=dest,
                options=options,
                log=log,
                started=started,
            )
            _seal(model_fd, partials_fd, partial_fd, resolved.revision_id, manifest=manifest, dest=dest)
    return manifest, transferred


def _download_into(
    source: Source,
    partial_fd: int,
    partial: Path,
    *,
    ref: SourceRef,
    resolved: ResolvedRevision,
    files: tuple[RemoteFile, ...],
    dest: Path,
    options: FetchOptions,
    log: Log,
    started: float,
) -> tuple[Manifest, int]:
    present = {f.path: _present_bytes(partial_fd, partial, f) for f in files}
    needed = sum(f.size_bytes - present[f.path] for f in files)
    _ensure_space(dest, needed, options, log)

    total = total_bytes(files)
    progress = Progress(f"fetch {ref.uri}@{options.revision}", total, log, options.progress_interval_s)
    progress.already_present(sum(present.values()))
    log(
        f"fetching {ref.uri}@{options.revision} (revision {resolved.revision_id}): {len(files)} files, "
        f"{total / GIB:.2f} GiB, {needed / GIB:.2f} GiB to transfer"
    )
    done_files: dict[str, tuple[list[str], str | None]] = {}
    # Largest first: the long transfers start early and the small ones fill the gaps.
    # Parallel across files, not across ranges of one file: models come in several shards
    # (the cores are busy with `parallel` streams already), and one sequential stream per
    # file keeps resume a matter of the .part file's size, with its prefix re-hashed.
    ordered = sorted(files, key=lambda f: -f.size_bytes)
    with ThreadPoolExecutor(max_workers=max(1, options.parallel), thread_name_prefix="fetch") as pool:
        futures: dict[Future[tuple[list[str], str | None]], RemoteFile] = {
            pool.submit(
                _transfer,
                source,
                resolved,
                remote=remote,
                partial_fd=partial_fd,
                partial=partial,
                progress=progress,
                options=options,
                log=log,
            ): remote
            for remote in ordered
        }
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        for future in done:
            error = future.exception()
            if error is not None:
                raise error
            done_files[futures[future].path] = future.result()

    entries = []
    for remote in files:
        checks, computed_sha256 = done_files[remote.path]
        # A source without a checksum this image can compute: the bytes' own SHA-256 goes
        # in the marker, so verify --deep has something to check.
        recorded = remote if computed_sha256 is None else dataclasses.replace(remote, sha256=computed_sha256)
        entries.append(entry_for(recorded, checks))
    config = _read_config(partial_fd)
    elapsed = time.monotonic() - started
    manifest = Manifest(
        source=ref.uri,
        ref=options.revision,
        revision_id=resolved.revision_id,
        commit=resolved.commit,
        files=entries,
        total_bytes=total,
        weight_bytes=weight_bytes(files),
        hf_config=config,
        fetched_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        fetch_seconds=round(elapsed, 3),
        bytes_transferred=progress.transferred_bytes,
        fetch_bytes_per_s=round(progress.rate_bytes_per_s(), 1) if progress.transferred_bytes else None,
    )
    return manifest, progress.transferred_bytes


def _present_bytes(partial_fd: int, partial: Path, remote: RemoteFile) -> int:
    head, name = safefs.split(remote.path)
    try:
        with safefs.subdir(partial_fd, head, create=False, where=partial) as parent_fd:
            where = partial / head if head else partial
            if safefs.regular_size(parent_fd, name, where=where) == remote.size_bytes:
                return remote.size_bytes
            size = safefs.regular_size(parent_fd, name + PART_SUFFIX, where=where)
    except FileNotFoundError:
        return 0
    return resume_offset(size, remote.size_bytes)


def _ensure_space(dest: Path, needed: int, options: FetchOptions, log: Log) -> None:
    free = options.free_bytes(dest) if options.free_bytes else shutil.disk_usage(dest).free
    if needed + DISK_RESERVE_BYTES <= free:
        return
    node_root = options.node_root or dest.parent
    if options.budget_bytes is not None:
        # Make room: evict LRU revisions nobody uses until the download fits.
        used = sum(r.size_bytes for r in store.scan(node_root))
        target = used - (needed + DISK_RESERVE_BYTES - free)
        store.collect_garbage(
            node_root, min(options.budget_bytes, max(target, 0)), log, locked_model=dest.name
        )
        free = options.free_bytes(dest) if options.free_bytes else shutil.disk_usage(dest).free
        if needed + DISK_RESERVE_BYTES <= free:
            return
    raise DiskFull(
        f"{dest}: {needed / GIB:.2f} GiB still to download but only {free / GIB:.2f} GiB free; "
        "the remaining revisions are in use or garbage collection is off (--budget-gib)"
    )


def _hasher_for(remote: RemoteFile) -> tuple[Callable[[], Hasher | None], bool]:
    """(a new hasher for the file's bytes, whether its digest is ours to record).

    The source's strongest checksum when this image can compute it; otherwise SHA-256,
    recorded in the marker (a directory, a multipart S3 object, CRC32C without its C
    library): every sealed file then has a checksum that verify --deep re-checks."""
    best = remote.best_checksum()
    if best is not None and new_hasher(best[0], remote.size_bytes) is not None:
        kind = best[0]
        return (lambda: new_hasher(kind, remote.size_bytes)), False
    return hashlib.sha256, True


def _sha256_of(dir_fd: int, name: str, where: Path) -> str:
    hasher = hashlib.sha256()
    fd = safefs.open_file(dir_fd, name, os.O_RDONLY, where=where)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            hasher.update(chunk)
    return hasher.hexdigest()


def _transfer(
    source: Source,
    resolved: ResolvedRevision,
    *,
    remote: RemoteFile,
    partial_fd: int,
    partial: Path,
    progress: Progress,
    options: FetchOptions,
    log: Log,
) -> tuple[list[str], str | None]:
    """Make `partial/<path>` complete and checked; returns the checks that passed and,
    for a file without a usable published checksum, the SHA-256 of its bytes."""
    head, name = safefs.split(remote.path)
    where = partial / head if head else partial
    with safefs.subdir(partial_fd, head, create=True, where=partial) as dir_fd:
        return _transfer_in(
            source, resolved, remote, dir_fd, name, where=where, progress=progress, options=options, log=log
        )


def _transfer_in(
    source: Source,
    resolved: ResolvedRevision,
    remote: RemoteFile,
    dir_fd: int,
    name: str,
    *,
    where: Path,
    progress: Progress,
    options: FetchOptions,
    log: Log,
) -> tuple[list[str], str | None]:
    best = remote.best_checksum()
    make_hasher, ours = _hasher_for(remote)
    checks = ["size"]
    if safefs.regular_size(dir_fd, name, where=where) == remote.size_bytes:
        # Finished by an earlier run: it was checked before it got its final name.
        if ours:
            return checks, _sha256_of(dir_fd, name, where)
        return checks + ([best[0]] if best else []), None
    part = name + PART_SUFFIX
    attempt = 0
    mismatches = 0
    while True:
        existing = safefs.regular_size(dir_fd, part, where=where)
        offset = resume_offset(existing, remote.size_bytes)
        try:
            writer = PartWriter(
                Path(part),
                offset,
                remote,
                progress,
                make_hasher(),
                direct_io=options.direct_io,
                dir_fd=dir_fd,
                new_hasher_for_restart=make_hasher,
            )
        except OSError as error:
            raise _os_error(error, where / part) from error
        before = writer.position
        try:
            if writer.position < remote.size_bytes:
                source.read_into(resolved, remote, writer.position, writer)
            writer.finish()
        except CacheError as error:
            writer.close()
            made_progress = writer.position > before
            attempt = 0 if made_progress else attempt + 1
            if not error.retryable or attempt >= options.retry.attempts:
                raise
            delay = options.retry.delay_s(attempt)
            log(
                f"{remote.path}: {error.reason}: {error.message}; "
                f"resuming at byte {writer.position} in {delay:.1f}s"
            )
            time.sleep(delay)
            continue
        except OSError as error:
            writer.close()
            raise _os_error(error, where / part) from error
        if writer.position != remote.size_bytes:
            attempt += 1
            if attempt >= options.retry.attempts:
                raise SourceUnreachable(
                    f"{remote.path}: transfer stopped at byte {writer.position} of {remote.size_bytes}"
                )
            time.sleep(options.retry.delay_s(attempt))
            continue
        digest = writer.digest()
        if ours:
            os.replace(part, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return checks, digest
        if best is not None and digest is not None:
            if digest != best[1]:
                os.unlink(part, dir_fd=dir_fd)
                progress.discard(remote.size_bytes)
                mismatches += 1
                if mismatches >= 2:
                    raise ChecksumMismatch(
                        f"{remote.path}: {best[0]} of the downloaded bytes is {digest}, the source "
                        f"publishes {best[1]} (twice in a row; the source copy may be corrupt)"
                    )
                log(f"{remote.path}: {best[0]} mismatch, downloading it again from the start")
                continue
            checks.append(best[0])
        os.replace(part, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return checks, None


def _os_error(error: OSError, path: Path) -> CacheError:
    if store.is_disk_full(error):
        return DiskFull(f"{path}: no space left on the device ({error.strerror})")
    if error.errno == errno.EFBIG:
        return WriteFailed(
            f"{path}: file too large for this filesystem or the process's file size limit (EFBIG)"
        )
    code = errno.errorcode.get(error.errno or 0, str(error.errno))
    return WriteFailed(f"{path}: {error.strerror or error} ({code})")


# A config.json is a few KiB; one far larger is no config the planner should parse.
_CONFIG_MAX_BYTES = 16 * 1024 * 1024


def _read_config(partial_fd: int) -> dict[str, Any] | None:
    try:
        fd = safefs.open_file(partial_fd, "config.json", os.O_RDONLY)
    except (OSError, CacheError):
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(_CONFIG_MAX_BYTES + 1)
        if len(data) > _CONFIG_MAX_BYTES:
            return None
        value = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


SEALED_FILE_MODE = 0o444
SEALED_DIR_MODE = 0o555


def _seal(
    model_fd: int, partials_fd: int, partial_fd: int, revision_id: str, *, manifest: Manifest, dest: Path
) -> None:
    """Marker in, everything fsynced, one rename: the revision appears complete or not at all.

    All descriptor-relative: the marker, the fsyncs and the rename act on the directories
    this fetch created, whatever symlink someone planted since."""
    with safefs.subdir(partial_fd, MARKER_DIR, create=True) as marker_dir_fd:
        tmp = f".{MARKER_NAME}.tmp"
        fd = safefs.open_file(marker_dir_fd, tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(manifest.to_json())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, MARKER_NAME, src_dir_fd=marker_dir_fd, dst_dir_fd=marker_dir_fd)
    # Sealed means read-only: files 0444, directories 0555, so nothing that writes the
    # cache (this fetcher, a later one, a garbage collector's mistake) adds or changes a
    # file inside a complete revision without first undoing this on purpose. Directory
    # entries (the files' final names) must be durable before the rename.
    for top, _dirs, files, directory_fd in os.fwalk(".", dir_fd=partial_fd, follow_symlinks=False):
        for name in files:
            _seal_file(directory_fd, name, dest)
        os.fsync(directory_fd)
        if top != ".":
            os.fchmod(directory_fd, SEALED_DIR_MODE)
    with safefs.subdir(model_fd, REVISIONS_DIR, create=True, where=dest) as revisions_fd:
        # The revision's own directory stays writable until it has moved: renaming a
        # directory to another parent rewrites its '..' entry.
        os.rename(revision_id, revision_id, src_dir_fd=partials_fd, dst_dir_fd=revisions_fd)
        os.fchmod(partial_fd, SEALED_DIR_MODE)
        os.fsync(revisions_fd)
    os.fsync(partials_fd)


def _seal_file(directory_fd: int, name: str, dest: Path) -> None:
    """chmod 0444 through a descriptor: Linux has no lchmod, and the name must not be a
    symlink someone planted (O_NOFOLLOW refuses it)."""
    # O_NONBLOCK: a FIFO planted in place of a file must not hang the seal.
    fd = safefs.open_file(directory_fd, name, os.O_RDONLY | os.O_NONBLOCK, where=dest)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeSource(f"{dest}/{name}: not a regular file in a revision being sealed")
        os.fchmod(fd, SEALED_FILE_MODE)
    finally:
        os.close(fd)


def cache_key(source_uri: str) -> str:
    return model_key(parse_source(source_uri))
