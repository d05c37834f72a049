"""Path-like fields of the spec: weight sources and revisions. Pure.

A source URI and a revision become directory names on every node (the pre-cache), a
volume's sub-path, and arguments of vLLM and of the fetcher. Each is checked here for
what its scheme allows, so that no spelling can name something outside what it claims:

- no `.` or `..` segment, no empty segment inside the path, no backslash, no control
  character (NUL included) and no percent-encoded dot, slash, backslash or NUL;
- the location is what the scheme defines: an `org/repo` hub id, an S3 or GCS bucket
  name, a PersistentVolumeClaim name (DNS-1123 subdomain); file:// is absolute;
- a revision follows git's ref-name rules (`git check-ref-format`), which every hub
  branch, tag and commit id satisfies and which keep it one safe path component family,
  and does not start with '-' (it is passed as a command-line argument);
- a model name (a catalog key or hub id, vLLM's model argument when no source is given)
  holds no whitespace, control or format (bidi, zero-width) character and does not
  start with '-'.
"""

from __future__ import annotations

import re
from typing import Final

from inferfleet.api import safe_text

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_ENCODED: Final = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)
_HUB_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_S3_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_GCS_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Characters git refuses in a ref name (besides control characters and space).
_REF_FORBIDDEN: Final = re.compile(r"[ ~^:?*\[\\]")


def _segments_problem(path: str) -> str | None:
    """`path` is the part after the location; a trailing '/' is allowed (a prefix)."""
    segments = path.split("/")
    if segments and segments[-1] == "":
        segments = segments[:-1]
    for segment in segments:
        if segment in {"", ".", ".."}:
            return f"path segment {segment!r} is not allowed (no '.', '..' or '//' in a source path)"
    return None


def source_problem(uri: str) -> str | None:
    """Why a weights URI is refused, or None when it is acceptable."""
    if _CONTROL.search(uri):
        return "control characters (NUL included) are not allowed in a source URI"
    if "\\" in uri:
        return "backslashes are not allowed in a source URI"
    if _ENCODED.search(uri):
        return "percent-encoded '.', '/', '\\' or NUL is not allowed in a source URI"
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return "expected SCHEME://..."
    if scheme == "file":
        if not rest.startswith("/"):
            return "file:// needs an absolute path (file:///data/model)"
        return _segments_problem(rest[1:]) if rest != "/" else None
    location, _, path = rest.partition("/")
    if scheme == "hf":
        repo, _, subfolder = path.partition("/")
        names = [location] + ([repo] if repo else [])
        bad = [name for name in names if not _HUB_NAME.match(name) or name in {".", ".."}]
        if bad:
            return f"{bad[0]!r} is not a hub name (letters, digits, '.', '_', '-'; at most 96)"
        return _segments_problem(subfolder) if subfolder else None
    checks = {
        "s3": (_S3_BUCKET, "an S3 bucket name (3-63 lowercase letters, digits, '.', '-')"),
        "gs": (_GCS_BUCKET, "a GCS bucket name (lowercase letters, digits, '.', '_', '-')"),
        "pvc": (_DNS_SUBDOMAIN, "a PersistentVolumeClaim name (DNS-1123 subdomain)"),
    }
    if scheme not in checks:
        return f"unknown scheme {scheme!r}"
    pattern, what = checks[scheme]
    if not pattern.match(location) or len(location) > 253:
        return f"{location!r} is not {what}"
    return _segments_problem(path) if path else None


def revision_problem(revision: str) -> str | None:
    """Why a revision is refused (git's ref-name rules), or None."""
    if _CONTROL.search(revision) or _REF_FORBIDDEN.search(revision):
        return "a revision cannot hold control characters, spaces or any of ~ ^ : ? * [ \\"
    if revision.startswith("-"):
        # It is passed as an argument (vLLM's --revision, the fetcher's): never an option.
        return "a revision cannot start with '-'"
    if revision == "@" or "@{" in revision or ".." in revision or "//" in revision:
        return "a revision cannot be '@' or hold '@{', '..' or '//'"
    if revision.startswith("/") or revision.endswith(("/", ".", ".lock")):
        return "a revision cannot start with '/' or end with '/', '.' or '.lock'"
    if any(part.startswith(".") for part in revision.split("/")):
        return "no component of a revision can start with '.'"
    return None


def model_name_problem(name: str) -> str | None:
    """Why a model name is refused: it reaches vLLM's command line as its model argument,
    and `kubectl get`'s Model column as it is."""
    if _CONTROL.search(name) or any(c.isspace() for c in name):
        return "a model name cannot hold whitespace or control characters"
    if safe_text.escape(name) != name:
        # Bidi overrides and zero-width characters reorder or hide what a reader sees.
        return f"a model name cannot hold format (bidi, zero-width) characters: {safe_text.escape(name)}"
    if name.startswith("-"):
        return "a model name cannot start with '-' (it is passed as vLLM's model argument)"
    return None


def checked_model_name(name: str | None) -> str | None:
    if name is not None and (problem := model_name_problem(name)) is not None:
        raise ValueError(problem)
    return name


def object_name_problem(name: str) -> str | None:
    """Why a Kubernetes object name (a claim, a Secret) is refused: DNS-1123 subdomain."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return "must be a Kubernetes object name (DNS-1123 subdomain: lowercase letters, digits, '-', '.')"
    return None


def checked_object_name(name: str | None) -> str | None:
    if name is not None and (problem := object_name_problem(name)) is not None:
        raise ValueError(problem)
    return name


_SECRET_KEY: Final = re.compile(r"^[-._a-zA-Z0-9]+$")


def checked_secret_key(key: str) -> str:
    """A Secret's data key (what the API server allows): never a path."""
    if not _SECRET_KEY.match(key) or key in {".", ".."}:
        raise ValueError("must be a Secret key (letters, digits, '-', '_', '.'), not a path")
    return key


def checked_source(uri: str | None) -> str | None:
    """`uri` unchanged, or ValueError with the reason (for pydantic field validators)."""
    if uri is not None and (problem := source_problem(uri)) is not None:
        raise ValueError(problem)
    return uri


def checked_revision(revision: str | None) -> str | None:
    if revision is not None and (problem := revision_problem(revision)) is not None:
        raise ValueError(problem)
    return revision
