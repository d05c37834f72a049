"""Incremental checksums in the forms sources publish them (hex digests)."""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from inferfleet.caching.precache.manifest import ChecksumKind


class Hasher(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...

    def hexdigest(self) -> str: ...


class _Crc32c:
    def __init__(self, impl: Any) -> None:
        self._impl = impl

    def update(self, data: bytes | memoryview, /) -> None:
        # The C extension parses its argument as "y#", which refuses any buffer that must be
        # released (memoryview, bytearray, mmap): it needs a bytes copy.
        self._impl.update(data if isinstance(data, bytes) else bytes(data))

    def hexdigest(self) -> str:
        return bytes(self._impl.digest()).hex()


def new_hasher(kind: ChecksumKind, size_bytes: int) -> Hasher | None:
    """A hasher for `kind`, or None when this image cannot compute it (then only the
    size is checked, and the marker records that)."""
    if kind == "sha256":
        return hashlib.sha256()
    if kind == "md5":
        return hashlib.md5(usedforsecurity=False)
    if kind == "git-sha1":
        # Git's object id of a blob hashes a small header before the content.
        hasher = hashlib.sha1(usedforsecurity=False)
        hasher.update(b"blob %d\0" % size_bytes)
        return hasher
    try:
        import google_crc32c
    except ImportError:
        return None
    checksum_type: Any = google_crc32c.Checksum
    return _Crc32c(checksum_type())
