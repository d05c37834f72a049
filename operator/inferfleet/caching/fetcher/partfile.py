"""A `.part` file being received: bytes in, hashed and written in order behind the caller. I/O.

The size of a `.part` file is what a later run trusts as the valid prefix to resume from,
so bytes reach it strictly in order and never beyond what was received.

Received bytes land in one of a few page-aligned blocks: a backend either copies its
chunks in (`write`) or, cheaper, reads straight from its socket into the free part of the
current block (`receive_buffer` + `received`: one copy from the kernel, none in Python).
A full block goes to two helper threads, one hashing it and one writing it (in order),
while the caller fills the next; hashlib and pwrite release the GIL, so receiving,
hashing and the disk write run on different cores instead of one after the other.

Large files are written with O_DIRECT where the filesystem takes it. Measured on the
benchmark machine (2 cores, ext4 on virtio), 2 GiB of buffered pwrite cost 2.6-5 s of
kernel CPU (page-cache allocation and copy) plus ~0.7 s of writeback at fsync, O_DIRECT
0.1 s of CPU and nothing left at fsync: on a CPU-bound fetcher that is the difference
between competing with SHA-256 for the cores and not. It also keeps a 100 GiB model
from flushing the node's page cache. Direct I/O needs the memory address, the file
offset and the length aligned to ALIGN_BYTES; the unaligned head after a resume and the
file's tail go through an ordinary descriptor of the same file (the kernel keeps the two
coherent), and a filesystem that refuses O_DIRECT (tmpfs, some network filesystems)
gets buffered writes throughout.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from inferfleet.caching.fetcher import safefs
from inferfleet.caching.fetcher.progress import Progress
from inferfleet.caching.precache.checksums import Hasher, new_hasher
from inferfleet.caching.precache.fetch_errors import SourceChanged
from inferfleet.caching.precache.manifest import RemoteFile

# The logical block size O_DIRECT wants; 4 KiB covers 512e and 4Kn disks alike.
ALIGN_BYTES: Final = 4096
# Below this a file goes through the page cache: a config.json is read right away
# and a second descriptor would cost more than it saves.
DIRECT_MIN_BYTES: Final = 1024 * 1024
_O_DIRECT: Final = getattr(os, "O_DIRECT", 0)


# --- pure block arithmetic ---------------------------------------------------------------


def split_aligned(offset_bytes: int, length_bytes: int, align_bytes: int = ALIGN_BYTES) -> tuple[int, int]:
    """(head, body) of a write of `length_bytes` at `offset_bytes`: `head` bytes up to the
    first aligned offset, then `body` bytes that start there and end on a boundary; the
    rest (length - head - body) is the unaligned tail."""
    head = min(-offset_bytes % align_bytes, length_bytes)
    body = (length_bytes - head) // align_bytes * align_bytes
    return head, body


def aligned_hand_off_bytes(offset_bytes: int, pending_bytes: int, align_bytes: int = ALIGN_BYTES) -> int:
    """How much of `pending_bytes` received at `offset_bytes` to hand off early (slow link,
    timer): up to the last aligned offset, so the block after it starts aligned."""
    end = (offset_bytes + pending_bytes) // align_bytes * align_bytes
    return max(0, end - offset_bytes)


def block_bytes_for(remaining_bytes: int, block_bytes: int, align_bytes: int = ALIGN_BYTES) -> int:
    """Block size for a file with `remaining_bytes` left: no bigger than needed (a
    config.json needs no 8 MiB), a whole number of aligned units, at least one."""
    wanted = min(block_bytes, remaining_bytes + align_bytes)
    return max(align_bytes, -(-wanted // align_bytes) * align_bytes)


# --- the writer --------------------------------------------------------------------------


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    while view:
        written = os.pwrite(fd, view, offset)
        offset += written
        view = view[written:]


class PartWriter:
    """A `.part` file opened at the resume offset; hashes what it writes.

    Each block keeps its data at the same position modulo ALIGN_BYTES as the file offset
    it goes to (`_start`), so the aligned middle of every write is also aligned in memory.
    A block is handed off early after HAND_OFF_S on a slow link (up to its last aligned
    byte), so a killed fetcher loses at most about that much transfer on resume.

    No preallocation (posix_fallocate): it sets the file's size, and the size of a
    `.part` file is what resume trusts as the valid prefix."""

    BLOCK_BYTES = 8 * 1024 * 1024
    BLOCKS = 4
    HAND_OFF_S = 1.0

    def __init__(
        self,
        path: Path,
        offset: int,
        remote: RemoteFile,
        progress: Progress,
        hasher: Hasher | None,
        *,
        direct_io: bool = True,
        dir_fd: int | None = None,
        new_hasher_for_restart: Callable[[], Hasher | None] | None = None,
    ) -> None:
        """With `dir_fd`, `path` is a name in that directory, opened without following a
        symlink (and refused unless it is a plain file with one link: `safefs`)."""
        self.path = path
        self.remote = remote
        self.progress = progress
        self._hasher = hasher
        self._dir_fd = dir_fd
        self._new_hasher_for_restart = new_hasher_for_restart
        if dir_fd is None:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        else:
            self._fd = safefs.open_file(dir_fd, str(path), os.O_RDWR | os.O_CREAT)
        self._direct_fd = -1
        try:
            os.ftruncate(self._fd, offset)
            if direct_io and _O_DIRECT and remote.size_bytes >= DIRECT_MIN_BYTES:
                self._direct_fd = self._open_direct(path)
            if hasher is not None and offset:
                self._rehash_prefix(offset)
        except BaseException:
            self._close_fds()
            raise
        self._block_bytes = block_bytes_for(remote.size_bytes - offset, self.BLOCK_BYTES)
        self._blocks = self._new_blocks()
        self._current = 0
        self._start = offset % ALIGN_BYTES  # where the current block's data begins
        self._fill = self._start  # where it ends
        self._on_disk = offset  # file offset of the current block's first byte
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hash")
        self._writing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="write")
        # Per block index: its hash and its write; a block is reused once both are done.
        self._in_flight: dict[int, tuple[Future[None], Future[None]]] = {}
        self._handed_at = time.monotonic()
        self._write_failed = False
        self.position = offset

    def _open_direct(self, path: Path) -> int:
        try:
            fd = os.open(path, os.O_WRONLY | _O_DIRECT | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        except OSError as error:
            if error.errno == errno.EINVAL:  # the filesystem does not do direct I/O
                return -1
            raise
        # The same file as the first descriptor, or nothing: a swap in between must not
        # send the aligned writes somewhere else.
        first, second = os.fstat(self._fd), os.fstat(fd)
        if (first.st_dev, first.st_ino) != (second.st_dev, second.st_ino):
            os.close(fd)
            raise SourceChanged(f"{path}: the file changed under the fetcher while it was opened")
        return fd

    def _new_blocks(self) -> list[mmap.mmap]:
        # Anonymous mappings are page-aligned, which direct I/O requires of the memory.
        return [mmap.mmap(-1, self._block_bytes) for _ in range(self.BLOCKS)]

    @property
    def direct(self) -> bool:
        """Whether large writes still go around the page cache (tests, logs)."""
        return self._direct_fd >= 0

    def _rehash_prefix(self, offset: int) -> None:
        """Hash the bytes a killed run left, read through the descriptor already open (the
        name is not looked up again)."""
        assert self._hasher is not None
        position = 0
        while position < offset:
            chunk = os.pread(self._fd, min(offset - position, self.BLOCK_BYTES), position)
            if not chunk:
                break
            self._hasher.update(chunk)
            position += len(chunk)

    def _check_size(self, count: int) -> None:
        if self.position + count > self.remote.size_bytes:
            raise SourceChanged(
                f"{self.remote.path}: the source sent more than the {self.remote.size_bytes} bytes it listed"
            )

    # --- receiving -------------------------------------------------------------------

    def write(self, data: Any) -> int:
        count = len(data)
        self._check_size(count)
        view = memoryview(data).cast("B")
        while view:
            self._wait_block(self._current)
            take = min(len(view), self._block_bytes - self._fill)
            self._blocks[self._current][self._fill : self._fill + take] = view[:take]
            self._fill += take
            view = view[take:]
            if self._fill == self._block_bytes:
                self._hand_off(self._fill)
        self._account(count)
        return count

    def receive_buffer(self, limit: int) -> memoryview:
        """Free space of the current block (at most `limit` bytes) to read into directly;
        report what arrived with `received`."""
        self._wait_block(self._current)
        end = min(self._block_bytes, self._fill + limit)
        return memoryview(self._blocks[self._current])[self._fill : end]

    def received(self, count: int) -> None:
        self._check_size(count)
        self._fill += count
        if self._fill == self._block_bytes:
            self._hand_off(self._fill)
        self._account(count)

    def _account(self, count: int) -> None:
        self.position += count
        self.progress.add(count)
        if self._fill > self._start and time.monotonic() - self._handed_at >= self.HAND_OFF_S:
            take = aligned_hand_off_bytes(self._on_disk, self._fill - self._start)
            if take:
                self._hand_off(self._start + take)

    # --- the helper threads ----------------------------------------------------------

    def _hash(self, block: mmap.mmap, start: int, end: int) -> None:
        assert self._hasher is not None
        with memoryview(block) as whole, whole[start:end] as view:
            self._hasher.update(view)

    def _write(self, block: mmap.mmap, start: int, end: int, offset: int) -> None:
        if self._write_failed:
            # Never write past a failed write (ENOSPC): the file's size must stay a valid prefix.
            return
        try:
            self._write_block(block, start, end, offset)
        except BaseException:
            self._write_failed = True
            raise

    def _write_block(self, block: mmap.mmap, start: int, end: int, offset: int) -> None:
        with memoryview(block) as whole, whole[start:end] as view:
            head, body = split_aligned(offset, len(view)) if self._direct_fd >= 0 else (len(view), 0)
            _pwrite_all(self._fd, view[:head], offset)
            if body:
                try:
                    _pwrite_all(self._direct_fd, view[head : head + body], offset + head)
                except OSError as error:
                    if error.errno != errno.EINVAL:
                        raise
                    # Alignment this filesystem does not accept: page cache from here on.
                    os.close(self._direct_fd)
                    self._direct_fd = -1
                    _pwrite_all(self._fd, view[head : head + body], offset + head)
            _pwrite_all(self._fd, view[head + body :], offset + head + body)

    def _wait_block(self, index: int) -> None:
        in_flight = self._in_flight.pop(index, None)
        if in_flight is not None:
            for future in in_flight:
                future.result()  # re-raises the write's OSError (ENOSPC) here

    def _wait(self) -> None:
        for index in list(self._in_flight):
            self._wait_block(index)

    def _hand_off(self, end: int) -> None:
        """Hash and write block[_start:end] in the background; carry any rest (an early
        hand-off's unaligned end) into the next block, which then starts aligned."""
        index, start, fill, offset = self._current, self._start, self._fill, self._on_disk
        block = self._blocks[index]
        hashed: Future[None] = (
            self._hashing.submit(self._hash, block, start, end) if self._hasher is not None else _done()
        )
        written = self._writing.submit(self._write, block, start, end, offset)
        self._in_flight[index] = (hashed, written)
        self._on_disk += end - start
        self._current = (index + 1) % self.BLOCKS
        self._wait_block(self._current)
        self._start = self._on_disk % ALIGN_BYTES
        rest = fill - end
        following = self._blocks[self._current]
        following[self._start : self._start + rest] = block[end:fill]  # read-only for the helpers
        self._fill = self._start + rest
        self._handed_at = time.monotonic()

    # --- the engine's calls ----------------------------------------------------------

    def flush(self) -> None:
        if self._fill > self._start:
            self._hand_off(self._fill)
        self._wait()

    def restart(self) -> None:
        """The source sends the whole file although a range was asked: start over."""
        self._wait()
        self.progress.discard(self.position)
        os.ftruncate(self._fd, 0)
        self._on_disk = 0
        self.position = 0
        self._start = self._fill = 0
        wanted = block_bytes_for(self.remote.size_bytes, self.BLOCK_BYTES)
        if wanted > self._block_bytes:  # sized for a short rest; the whole file comes now
            self._block_bytes = wanted
            self._blocks = self._new_blocks()
            self._current = 0
        if self._new_hasher_for_restart is not None:
            self._hasher = self._new_hasher_for_restart()
        else:
            best = self.remote.best_checksum()
            self._hasher = new_hasher(best[0], self.remote.size_bytes) if best else None

    def copy_from(self, fd: int, offset: int, count: int) -> bool:
        """Copy inside the kernel when nothing has to see the bytes (no checksum)."""
        if self._hasher is not None:
            return False
        self.flush()
        left = count
        src_offset = offset
        while left > 0:
            try:
                copied = os.copy_file_range(fd, self._fd, min(left, 1 << 30), src_offset, self._on_disk)
            except OSError:
                os.lseek(self._fd, self._on_disk, os.SEEK_SET)
                copied = os.sendfile(self._fd, fd, src_offset, min(left, 1 << 30))
            if copied == 0:
                break
            src_offset += copied
            left -= copied
            self._on_disk += copied
            self.position += copied
            self.progress.add(copied)
        self._start = self._fill = self._on_disk % ALIGN_BYTES
        return True

    def digest(self) -> str | None:
        return self._hasher.hexdigest() if self._hasher is not None else None

    def finish(self) -> None:
        self.flush()
        # Direct writes bypass the page cache, not the disk's volatile cache: fsync still.
        os.fsync(self._fd)
        self.close()

    def close(self) -> None:
        """Keep what was received (a valid prefix for the next resume), then close."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            self._hashing.shutdown(wait=True)
            self._writing.shutdown(wait=True)
            self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self._direct_fd, self._fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._direct_fd = -1


def _done() -> Future[None]:
    future: Future[None] = Future()
    future.set_result(None)
    return future
