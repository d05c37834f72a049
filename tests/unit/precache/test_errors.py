"""The reasons users and the operator see stay exactly these."""

from __future__ import annotations

from inferfleet.caching.precache import fetch_errors as errors


def test_reasons_retryability_and_termination_lines() -> None:
    assert errors.REASONS == (
        "SourceInvalid",
        "SourceUnreachable",
        "SourceNotFound",
        "BadCredentials",
        "SourceChanged",
        "ChecksumMismatch",
        "DiskFull",
        "LockTimeout",
        "CacheMissing",
        "CacheCorrupt",
        "MissingDependency",
        # Issue 14: a source or a cache that would make the fetcher leave the revision.
        "UnsafeSource",
        "MalformedListing",
        "WriteFailed",
        # Issue 27: the config.json probe's bounds and verdicts.
        "DeadlineExceeded",
        "ResponseTooLarge",
        "ListingTooLong",
        "ConfigUnavailable",
        "ConfigTooLarge",
    )
    retryable = {name for name in errors.REASONS if getattr(errors, name).retryable}
    assert retryable == {"SourceUnreachable", "SourceChanged", "LockTimeout", "DeadlineExceeded"}
    error = errors.DiskFull("/cache/m: 3.00 GiB still to download")
    assert isinstance(error, errors.CacheError) and error.message == "/cache/m: 3.00 GiB still to download"
    assert error.termination_message() == "DiskFull: /cache/m: 3.00 GiB still to download"
    assert errors.CacheError("x").termination_message() == "CacheError: x"
