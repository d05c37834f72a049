"""Why a fetch or a verification failed, as a small closed set of reasons.

Each reason is what a pre-cache pod writes to its termination message (`Reason: detail`),
what the CacheReady condition shows, and what decides whether retrying can help: a
dropped connection heals by itself, a wrong token or a full disk does not.
"""

from __future__ import annotations

from typing import ClassVar


class CacheError(Exception):
    """Base of every fetcher/verifier failure; `reason` is a CamelCase condition reason."""

    reason: ClassVar[str] = "CacheError"
    # True when the same call may succeed later without anyone changing anything.
    retryable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def termination_message(self) -> str:
        """One line for /dev/termination-log; the operator parses the reason back out."""
        return f"{self.reason}: {self.message}"


class SourceInvalid(CacheError):
    reason = "SourceInvalid"


class SourceUnreachable(CacheError):
    reason = "SourceUnreachable"
    retryable = True


class SourceNotFound(CacheError):
    reason = "SourceNotFound"


class BadCredentials(CacheError):
    reason = "BadCredentials"


class SourceChanged(CacheError):
    """The object changed between listing and download: list again and start over."""

    reason = "SourceChanged"
    retryable = True


class ChecksumMismatch(CacheError):
    reason = "ChecksumMismatch"


class DiskFull(CacheError):
    reason = "DiskFull"


class LockTimeout(CacheError):
    reason = "LockTimeout"
    retryable = True


class CacheMissing(CacheError):
    """No complete cache for the requested revision (yet)."""

    reason = "CacheMissing"


class CacheCorrupt(CacheError):
    """A cache that claims to be complete does not match its marker."""

    reason = "CacheCorrupt"


class MissingDependency(CacheError):
    """The client library for a source scheme is not installed in this image."""

    reason = "MissingDependency"


REASONS: tuple[str, ...] = tuple(
    cls.reason
    for cls in (
        SourceInvalid,
        SourceUnreachable,
        SourceNotFound,
        BadCredentials,
        SourceChanged,
        ChecksumMismatch,
        DiskFull,
        LockTimeout,
        CacheMissing,
        CacheCorrupt,
        MissingDependency,
    )
)
