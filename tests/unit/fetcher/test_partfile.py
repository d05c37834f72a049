"""The `.part` writer: the block arithmetic (pure) and what reaches the file (tmp_path)."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet.caching.fetcher import partfile
from inferfleet.caching.fetcher.partfile import (
    ALIGN_BYTES,
    PartWriter,
    aligned_hand_off_bytes,
    block_bytes_for,
    split_aligned,
)
from inferfleet.caching.fetcher.progress import Progress
from inferfleet.caching.precache.checksums import new_hasher
from inferfleet.caching.precache.manifest import RemoteFile

offsets = st.integers(min_value=0, max_value=1 << 40)
lengths = st.integers(min_value=0, max_value=1 << 26)


@given(offsets, lengths)
def test_split_aligned_puts_the_body_on_boundaries(offset: int, length: int) -> None:
    head, body = split_aligned(offset, length)
    tail = length - head - body
    assert 0 <= head < ALIGN_BYTES and body % ALIGN_BYTES == 0 and tail >= 0
    if body:
        assert (offset + head) % ALIGN_BYTES == 0
    # Nothing aligned is left out of the body: the tail is shorter than one unit.
    assert tail < ALIGN_BYTES
    assert head == length or (offset + head) % ALIGN_BYTES == 0


@given(offsets, lengths)
def test_early_hand_off_ends_on_the_last_boundary(offset: int, pending: int) -> None:
    take = aligned_hand_off_bytes(offset, pending)
    assert 0 <= take <= pending
    if take:
        assert (offset + take) % ALIGN_BYTES == 0
    assert pending - take < ALIGN_BYTES + (-offset % ALIGN_BYTES)


@given(st.integers(min_value=0, max_value=1 << 36))
def test_blocks_are_whole_units_and_never_larger_than_needed(remaining: int) -> None:
    size = block_bytes_for(remaining, 8 << 20)
    assert size % ALIGN_BYTES == 0 and ALIGN_BYTES <= size <= 8 << 20
    # Room for the rest plus a resume offset's misalignment, when that is below the cap.
    assert size >= min(remaining + ALIGN_BYTES - 1, 8 << 20)


def _direct_io_works(directory: Path) -> bool:
    probe = directory / "probe"
    probe.write_bytes(b"")
    try:
        os.close(os.open(probe, os.O_WRONLY | getattr(os, "O_DIRECT", 0)))
    except OSError as error:
        assert error.errno == errno.EINVAL
        return False
    finally:
        probe.unlink()
    return bool(getattr(os, "O_DIRECT", 0))


def _remote(data: bytes) -> RemoteFile:
    return RemoteFile(path="w.safetensors", size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("direct_io", [True, False])
@pytest.mark.parametrize("received_chunk", [1000, 65536, 1 << 20])
def test_resumed_unaligned_write_lands_whole_and_hashed(
    tmp_path: Path, direct_io: bool, received_chunk: int
) -> None:
    data = hashlib.shake_256(b"weights").digest(3 * (1 << 20) + 12345)
    remote = _remote(data)
    part = tmp_path / "w.safetensors.part"
    resume_at = 1_000_003  # not a multiple of ALIGN_BYTES
    part.write_bytes(data[:resume_at])
    progress = Progress("t", len(data), lambda _: None, interval_s=3600)
    hasher = new_hasher("sha256", len(data))
    writer = PartWriter(part, resume_at, remote, progress, hasher, direct_io=direct_io)
    assert writer.direct == (direct_io and _direct_io_works(tmp_path))
    position = resume_at
    while position < len(data):
        # The socket path and the copy path, alternating.
        if (position // received_chunk) % 2:
            buffer = writer.receive_buffer(received_chunk)
            count = min(len(buffer), len(data) - position)
            buffer[:count] = data[position : position + count]
            buffer.release()
            writer.received(count)
        else:
            count = writer.write(data[position : position + received_chunk])
        position += count
    writer.finish()
    assert part.read_bytes() == data
    assert writer.digest() == remote.sha256
    assert progress.transferred_bytes == len(data) - resume_at


def test_early_hand_offs_keep_the_file_a_valid_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a slow link blocks go out before they are full; what is on disk at any moment
    is a prefix of the file (what a resume after a kill trusts)."""
    monkeypatch.setattr(PartWriter, "HAND_OFF_S", 0.0)
    data = hashlib.shake_256(b"slow").digest(2 * (1 << 20) + 777)
    part = tmp_path / "w.safetensors.part"
    writer = PartWriter(part, 0, _remote(data), Progress("t", len(data), lambda _: None), None)
    for start in range(0, len(data), 50_000):
        writer.write(data[start : start + 50_000])
        writer._wait()  # let the helper threads catch up, then look at the file
        on_disk = part.read_bytes()
        assert data.startswith(on_disk)
        assert len(on_disk) % ALIGN_BYTES == 0 or len(on_disk) == len(data)
        assert len(on_disk) > start + 50_000 - 2 * ALIGN_BYTES or start + 50_000 > len(data)
    writer.finish()
    assert part.read_bytes() == data


def test_a_failed_write_stops_all_later_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ENOSPC nothing is written beyond the hole: the size stays a valid prefix."""
    data = hashlib.shake_256(b"full").digest(4 * PartWriter.BLOCK_BYTES)
    part = tmp_path / "w.safetensors.part"
    writer = PartWriter(part, 0, _remote(data), Progress("t", len(data), lambda _: None), None)
    real = partfile._pwrite_all
    calls = {"n": 0}

    def flaky(fd: int, view: memoryview, offset: int) -> None:
        if view and offset >= PartWriter.BLOCK_BYTES and calls["n"] == 0:
            calls["n"] += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, view, offset)

    monkeypatch.setattr(partfile, "_pwrite_all", flaky)
    with pytest.raises(OSError, match="No space"):
        for start in range(0, len(data), 1 << 20):
            writer.write(data[start : start + (1 << 20)])
        writer.finish()
    writer.close()  # what the engine does next: keeps the prefix, raises nothing new
    assert part.stat().st_size == PartWriter.BLOCK_BYTES
    assert part.read_bytes() == data[: PartWriter.BLOCK_BYTES]


def test_crc32c_accepts_the_writers_memoryviews() -> None:
    hasher = new_hasher("crc32c", 0)
    if hasher is None:
        pytest.skip("google-crc32c is not installed")
    block = bytearray(b"123456789")
    with memoryview(block) as view:
        hasher.update(view)
    assert hasher.hexdigest() == "e3069283"  # CRC-32C check value of "123456789"


def test_a_refused_direct_write_falls_back_to_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _direct_io_works(tmp_path):
        pytest.skip("this filesystem does not do O_DIRECT")
    data = hashlib.shake_256(b"einval").digest(3 * PartWriter.BLOCK_BYTES + 5)
    part = tmp_path / "w.safetensors.part"
    writer = PartWriter(part, 0, _remote(data), Progress("t", len(data), lambda _: None), None)
    assert writer.direct
    real = partfile._pwrite_all

    def picky(fd: int, view: memoryview, offset: int) -> None:
        if fd == writer._direct_fd and offset >= PartWriter.BLOCK_BYTES:
            raise OSError(errno.EINVAL, "Invalid argument")  # stricter alignment than ours
        real(fd, view, offset)

    monkeypatch.setattr(partfile, "_pwrite_all", picky)
    writer.write(data)
    writer.flush()
    assert not writer.direct  # given up for the rest of this file
    writer.finish()
    assert part.read_bytes() == data
