"""File operations below a model directory that never follow a symlink. I/O.

Everything the fetcher writes (and everything verify reads) lies below one model
directory (`--dest`). Paths below it are opened one component at a time, each relative
to its parent's descriptor (`openat`-style, `dir_fd=`) with `O_NOFOLLOW`, so a symlink
planted anywhere in the cache (`.partial`, `revisions`, a `.part` file, a file of a
revision) is refused with `UnsafeSource` instead of being written through, and no
rename or swap between a check and a use can redirect a write. The model directory
itself must not be a symlink either; the path above it is the operator's configuration
(`cache.nodePath`) and is taken as it is.

Files the fetcher creates are also checked to be regular files with one link: a hard
link planted at a `.part` or lock path would otherwise let a truncate or a write reach
the file it links to.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from inferfleet.caching.precache.fetch_errors import UnsafeSource

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# ELOOP: the last component is a symlink (O_NOFOLLOW). ENOTDIR: a file (or a symlink,
# with O_DIRECTORY|O_NOFOLLOW on some kernels) where a directory belongs.
_REFUSED: Final = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def _refused(where: Path | str, error: OSError) -> UnsafeSource:
    return UnsafeSource(
        f"{where}: a symlink or a non-directory where the cache expects a plain directory or file "
        f"({errno.errorcode.get(error.errno or 0, error.errno)}); nothing is read or written through it. "
        "Something other than the fetcher changed this cache: inspect and remove it"
    )


def open_model_dir(dest: Path, *, create: bool) -> int:
    """A descriptor of the model directory, created when asked; never a symlink."""
    if create:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.mkdir(dest, 0o755)
    try:
        return os.open(dest, _DIR_FLAGS)
    except OSError as error:
        if error.errno in _REFUSED:
            raise _refused(dest, error) from None
        raise


def open_subdir(dir_fd: int, rel: str, *, create: bool, where: Path | str = "") -> int:
    """A descriptor of `rel` (one or more '/'-separated segments) below `dir_fd`.

    Raises FileNotFoundError when a segment is missing and `create` is false."""
    current = os.dup(dir_fd)
    try:
        for segment in (part for part in rel.split("/") if part):
            if segment in {".", ".."}:
                raise UnsafeSource(f"{where}/{rel}: '.' or '..' in a cache path")
            if create:
                with suppress(FileExistsError):
                    os.mkdir(segment, 0o755, dir_fd=current)
            try:
                child = os.open(segment, _DIR_FLAGS, dir_fd=current)
            except OSError as error:
                if error.errno in _REFUSED:
                    raise _refused(f"{where}/{rel}" if where else rel, error) from None
                raise
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


@contextmanager
def subdir(dir_fd: int, rel: str, *, create: bool, where: Path | str = "") -> Iterator[int]:
    fd = open_subdir(dir_fd, rel, create=create, where=where)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def model_dir(dest: Path, *, create: bool) -> Iterator[int]:
    fd = open_model_dir(dest, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(dir_fd: int, name: str, flags: int, mode: int = 0o644, *, where: Path | str = "") -> int:
    """`name` (one segment) below `dir_fd`, never through a symlink.

    A file opened for writing must be a regular file with a single link."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in _REFUSED:
            raise _refused(f"{where}/{name}" if where else name, error) from None
        raise
    if flags & (os.O_WRONLY | os.O_RDWR):
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise UnsafeSource(
                f"{where}/{name}: not a plain file with one link "
                "(a hard link or a device planted in the cache?)"
            )
    return fd


def lstat(dir_fd: int, name: str) -> os.stat_result | None:
    """The entry itself (a symlink is not followed), or None when absent."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def regular_size(dir_fd: int, name: str, *, where: Path | str = "") -> int | None:
    """Size of a regular file, None when absent; UnsafeSource when it is anything else."""
    info = lstat(dir_fd, name)
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeSource(f"{where}/{name}: not a regular file (a symlink planted in the cache?)")
    return info.st_size


def is_plain_dir(dir_fd: int, name: str) -> bool:
    info = lstat(dir_fd, name)
    return info is not None and stat.S_ISDIR(info.st_mode)


def split(rel: str) -> tuple[str, str]:
    """('dir/sub', 'file') of a relative name; ('', name) for a top-level one."""
    head, _, tail = rel.rpartition("/")
    return head, tail
