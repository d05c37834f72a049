"""Why a fetch or a verification failed, as a small closed set of reasons.

Each reason is what a pre-cache pod writes to its termination message (`Reason: detail`),
what the CacheReady condition shows, and what decides whether retrying can help: a
dropped connection heals by itself, a wrong token or a full disk does not.

A reason is a subclass named after it (the engine catches by type); the class statement
is all there is to one: `class Name(CacheError, retryable=...)`.
"""

from __future__ import annotations

from typing import Any, ClassVar

_REASONS: list[str] = []


class CacheError(Exception):
    """Base of every fetcher/verifier failure; `reason` is a CamelCase condition reason."""

    reason: ClassVar[str] = "CacheError"
    # True when the same call may succeed later without anyone changing anything.
    retryable: ClassVar[bool] = False

    def __init_subclass__(cls, *, retryable: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reason = cls.__name__
        cls.retryable = retryable
        _REASONS.append(cls.reason)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def termination_message(self) -> str:
        """One line for /dev/termination-log; the operator parses the reason back out."""
        return f"{self.reason}: {self.message}"


class SourceInvalid(CacheError):
    """The source URI cannot be parsed or names an unknown scheme."""


class SourceUnreachable(CacheError, retryable=True):
    """Connection refused or dropped, timeouts, HTTP 5xx/429: retried with backoff."""


class SourceNotFound(CacheError):
    """No such repository, bucket, prefix, revision, or no weight files in it."""


class BadCredentials(CacheError):
    """The token or keys are missing or refused (HTTP 401/403, gated repository)."""


class SourceChanged(CacheError, retryable=True):
    """The object changed between listing and download: list again and start over."""


class ChecksumMismatch(CacheError):
    """The bytes do not match the checksum the source publishes, twice in a row."""


class DiskFull(CacheError):
    """Not enough space for the download, even after garbage collection."""


class LockTimeout(CacheError, retryable=True):
    """Another fetcher held the model directory's lock for too long."""


class CacheMissing(CacheError):
    """No complete cache for the requested revision (yet)."""


class CacheCorrupt(CacheError):
    """A cache that claims to be complete does not match its marker."""


class MissingDependency(CacheError):
    """The client library for a source scheme is not installed in this image."""


class UnsafeSource(CacheError):
    """A name, revision id or symlink from the source (or planted in the cache) would make
    the fetcher write or read outside the revision directory: refused, nothing written."""


class MalformedListing(CacheError):
    """The source answered, but not with a listing the fetcher can read (bad JSON, wrong types)."""


class WriteFailed(CacheError):
    """The node's filesystem refused a write for a reason other than space (EFBIG, EROFS, EACCES...)."""


# --- reading a model's config.json in a probe (bounded: precache.probe, fetcher.netbudget) ---


class DeadlineExceeded(CacheError, retryable=True):
    """The read did not finish within its total deadline (a slow or stalled source)."""


class ResponseTooLarge(CacheError):
    """The source sent more bytes than the reader takes (an oversized body, error or not)."""


class ListingTooLong(CacheError):
    """The source's listing has more pages or files than the reader takes (an endless listing)."""


class ConfigUnavailable(CacheError):
    """The source holds no config.json or parameter count the planner can use."""


class ConfigTooLarge(CacheError):
    """The planner's keys of config.json do not fit the probe's 4 KiB termination message."""


REASONS: tuple[str, ...] = tuple(_REASONS)
