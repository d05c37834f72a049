"""Source backends: list a revision and stream byte ranges of its files. I/O.

Every backend answers two questions the same way, so resume, checksums, progress,
atomic writes and locking live once in `fetch.py`:

- `resolve(ref)`: the immutable revision id and the files with the sizes and checksums
  the source publishes (hub: LFS sha256 / git blob sha1; S3: single-part ETag md5 or a
  full-object SHA-256 checksum; GCS: md5 or crc32c; a directory: the checksums of an
  inferfleet marker it carries, otherwise sizes only);
- `read_into(file, offset, sink)`: write the file's bytes from `offset` on into `sink`.

Client errors are translated into the reasons of `errors.py` here, at the edge, so the
engine can decide what to retry without knowing any client library.

The hub backend uses huggingface_hub for everything that has hub semantics (endpoint
and HF_ENDPOINT, token resolution and headers, revision → commit, file metadata, URLs,
error classification) and streams the bytes itself, with http.client straight into the
writer's blocks (huggingface_hub's session only for errors and proxies): that keeps
resume, hashing-while-writing and one progress counter common to all sources instead of
re-reading every shard after `hf_hub_download` to check it. Redirects (the hub sends LFS
files to a CDN) keep the Range and drop the token unless the origin stays the same.

Each backend leaves retrying to the engine (one retry layer, which resumes mid-file):
boto3 and google-cloud-storage are configured not to retry on their own.
"""

from __future__ import annotations

import base64
import errno
import functools
import http.client
import json
import os
import ssl
import stat
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import urljoin, urlsplit

from inferfleet.caching.precache.fetch_errors import (
    BadCredentials,
    CacheError,
    ListingTooLong,
    MalformedListing,
    MissingDependency,
    SourceChanged,
    SourceNotFound,
    SourceUnreachable,
    UnsafeSource,
)
from inferfleet.caching.precache.layout import (
    MARKER_DIR,
    MARKER_RELPATH,
    SourceRef,
    is_commit_hash,
    listing_revision_id,
)
from inferfleet.caching.precache.manifest import Manifest, RemoteFile, ResolvedRevision

# botocore's body.read(n) blocks until n bytes arrive: smaller keeps resume and progress fine-grained.
STREAM_CHUNK_BYTES: Final = 1024 * 1024
CONNECT_TIMEOUT_S: Final = 10.0
READ_TIMEOUT_S: Final = 60.0
# Where pre-cache pods mount the claims named by pvc:// sources.
PVC_ROOT_ENV: Final = "INFERFLEET_PVC_ROOT"
DEFAULT_PVC_ROOT: Final = "/mnt/sources"


# google-cloud-storage's switch for its background bucket-metadata lookups.
GCS_BUCKET_METADATA_OFF = "DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA"
# The only access a key given for a gs:// source is used for.
GCS_READ_SCOPE: Final = "https://www.googleapis.com/auth/devstorage.read_only"


class Sink(Protocol):
    """Where a backend writes: a file positioned at the resume offset."""

    def write(self, data: bytes) -> int: ...

    def restart(self) -> None:
        """The source ignored the range request and sends the whole file: start over."""

    def copy_from(self, fd: int, offset: int, count: int) -> bool:
        """Copy `count` bytes of `fd` from `offset` without passing through Python.

        Returns False when the sink must see the bytes (it is hashing them)."""

    def receive_buffer(self, limit: int) -> memoryview:
        """Writable free space (at most `limit` bytes) to read the next bytes into."""

    def received(self, count: int) -> None:
        """`count` bytes were read into the last `receive_buffer`."""


class Source(Protocol):
    ref: SourceRef

    def resolve(self, revision: str) -> ResolvedRevision: ...

    def read_into(self, resolved: ResolvedRevision, remote: RemoteFile, offset: int, sink: Sink) -> None: ...


@dataclass(frozen=True)
class ListingLimits:
    """The most a listing may hold: pages (S3, GCS) and files. An endless listing is
    `ListingTooLong` instead of a process growing without bound."""

    max_pages: int
    max_files: int

    def check(self, what: str, pages: int, files: int) -> None:
        if pages > self.max_pages:
            raise ListingTooLong(f"{what}: the listing goes on past {self.max_pages} pages")
        if files > self.max_files:
            raise ListingTooLong(f"{what}: the listing holds more than {self.max_files} files")


def open_source(
    ref: SourceRef,
    token: str | None = None,
    credentials_dir: Path | None = None,
    *,
    key_file: Path | None = None,
    ambient: bool = True,
    limits: ListingLimits | None = None,
) -> Source:
    """The backend for `ref`. `token` (hub), `credentials_dir` (S3) and `key_file` (GCS)
    are the credentials given; `ambient=False` never falls back to the environment's
    own (the hub's stored token, the AWS and Google default chains, an instance's
    metadata server): without credentials it reads anonymously. `limits` caps listings."""
    if ref.scheme == "hf":
        return HubSource(ref, token, ambient=ambient, limits=limits)
    if ref.scheme == "s3":
        return S3Source(ref, credentials_dir, ambient=ambient, limits=limits)
    if ref.scheme == "gs":
        return GcsSource(ref, key_file=key_file, ambient=ambient, limits=limits)
    root = Path(ref.path) if ref.scheme == "file" else _pvc_path(ref)
    return LocalSource(ref, root)


def _pvc_path(ref: SourceRef) -> Path:
    base = Path(os.environ.get(PVC_ROOT_ENV, DEFAULT_PVC_ROOT))
    return base / ref.location / ref.path


# Larger than any file a model has (the biggest safetensors shards are tens of GiB).
MAX_FILE_BYTES: Final = 2**44


def _size_of(what: str, name: object, size: object) -> int:
    """A listed size as an int, or MalformedListing: it sizes downloads and disk checks."""
    if isinstance(size, bool) or not isinstance(size, int | str | float):
        raise MalformedListing(f"{what}: size of {name!r} is {size!r}, not a number")
    try:
        value = int(size)
    except (ValueError, OverflowError):
        raise MalformedListing(f"{what}: size of {name!r} is {size!r}, not a number") from None
    if not 0 <= value <= MAX_FILE_BYTES:
        raise MalformedListing(f"{what}: size of {name!r} is {value}, outside 0-{MAX_FILE_BYTES}")
    return value


@contextmanager
def _listing(what: str) -> Iterator[None]:
    """Reading a source's listing: what a client library cannot make sense of (bad JSON,
    a list where an object belongs, a missing field) is MalformedListing, not a traceback."""
    try:
        yield
    except CacheError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        raise MalformedListing(f"{what}: unreadable listing ({type(error).__name__}: {error})") from error


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _hex_or_none(value: object, length: int) -> str | None:
    """A published digest, if it is one: hex of the expected length (checked, lowercase)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != length or not _is_hex(value):
        raise MalformedListing(f"published checksum {value!r} is not {length} hex digits")
    return value.lower()


def _b64_to_hex(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return None


# --- Hugging Face hub ------------------------------------------------------------------


class HubSource:
    """hf://ORG/REPO[/SUBFOLDER] through huggingface_hub (HF_ENDPOINT honoured)."""

    def __init__(
        self,
        ref: SourceRef,
        token: str | None,
        *,
        ambient: bool = True,
        limits: ListingLimits | None = None,
    ) -> None:
        try:
            import huggingface_hub  # noqa: F401
        except ImportError as error:  # pragma: no cover - core dependency
            raise MissingDependency("hf:// sources need huggingface_hub (pip install inferfleet)") from error
        self.ref = ref
        self.token = token
        self.ambient = ambient
        self.limits = limits

    def _endpoint(self) -> str:
        from huggingface_hub import constants

        # Read at call time: huggingface_hub freezes HF_ENDPOINT when first imported.
        return os.environ.get("HF_ENDPOINT", constants.ENDPOINT).rstrip("/")

    def _token(self) -> str | bool | None:
        if self.token:
            return self.token
        # False: no token at all, not even one stored on this machine or in HF_TOKEN.
        return None if self.ambient else False

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        import httpx2
        from huggingface_hub import errors as hf_errors

        try:
            yield
        except hf_errors.GatedRepoError as error:
            raise BadCredentials(f"{what}: gated repository; the token was not granted access") from error
        except hf_errors.RepositoryNotFoundError as error:
            raise SourceNotFound(
                f"{what}: repository not found, or private and the token cannot read it"
            ) from error
        except hf_errors.RevisionNotFoundError as error:
            raise SourceNotFound(f"{what}: revision not found") from error
        except hf_errors.EntryNotFoundError as error:
            raise SourceChanged(f"{what}: file listed by the hub is gone (revision changed?)") from error
        except hf_errors.HfHubHTTPError as error:
            status = error.response.status_code if error.response is not None else None
            raise _from_status(what, status) from error
        except hf_errors.OfflineModeIsEnabled as error:
            raise SourceUnreachable(f"{what}: HF_HUB_OFFLINE is set in the fetcher's environment") from error
        except httpx2.TransportError as error:
            raise SourceUnreachable(f"{what}: {type(error).__name__}: {error}") from error

    def resolve(self, revision: str) -> ResolvedRevision:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self._endpoint(), token=self._token())
        what = f"{self.ref.uri}@{revision}"
        with _listing(what):
            with self._errors(what):
                info = api.model_info(self.ref.location, revision=revision, files_metadata=True)
            return self._resolved(info, revision, what)

    def _resolved(self, info: Any, revision: str, what: str) -> ResolvedRevision:
        commit = info.sha or (revision if is_commit_hash(revision) else None)
        if commit is None:
            raise SourceNotFound(f"{what}: the hub did not report a commit for this revision")
        if not isinstance(commit, str) or not is_commit_hash(commit):
            # The commit names the revision's directory on every node.
            raise UnsafeSource(f"{what}: the hub reported commit {commit!r}, not a 40-hex git commit id")
        prefix = f"{self.ref.path}/" if self.ref.path else ""
        files: list[RemoteFile] = []
        siblings = info.siblings or []
        if self.limits is not None:
            self.limits.check(what, 1, len(siblings))
        for sibling in siblings:
            name = sibling.rfilename
            if not isinstance(name, str):
                raise MalformedListing(f"{what}: a file name of {type(name).__name__} in the listing")
            if prefix and not name.startswith(prefix):
                continue
            lfs = sibling.lfs
            size = lfs.size if lfs is not None else sibling.size
            if size is None:
                raise SourceUnreachable(f"{what}: the hub did not report the size of {name}")
            files.append(
                RemoteFile(
                    path=name[len(prefix) :],
                    size_bytes=_size_of(what, name, size),
                    sha256=_hex_or_none(lfs.sha256, 64) if lfs is not None else None,
                    # A non-LFS file's blob id is its git object id: sha1("blob <size>\0" + bytes).
                    git_sha1=_hex_or_none(sibling.blob_id, 40) if lfs is None else None,
                    etag=sibling.blob_id if isinstance(sibling.blob_id, str) else None,
                )
            )
        return ResolvedRevision(revision_id=commit, commit=commit, files=tuple(files))

    def read_into(self, resolved: ResolvedRevision, remote: RemoteFile, offset: int, sink: Sink) -> None:
        import httpx2
        from huggingface_hub import get_session, hf_hub_url, hf_raise_for_status

        # Public helper, but the package does not list it in __all__ (mypy's re-export rule).
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

        name = f"{self.ref.path}/{remote.path}" if self.ref.path else remote.path
        url = hf_hub_url(self.ref.location, name, revision=resolved.commit, endpoint=self._endpoint())
        headers = build_hf_headers(token=self._token())
        # Identity encoding: sizes, ranges and checksums refer to the stored bytes.
        headers["Accept-Encoding"] = "identity"
        if offset:
            headers["Range"] = f"bytes={offset}-"
        if _stream_direct(url, headers, offset, sink, f"{self.ref.uri}: {remote.path}"):
            return
        # Anything the direct path does not handle (an HTTP error, a proxy) goes through
        # huggingface_hub's own session, which also classifies the hub's errors.
        timeout = httpx2.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        with (
            self._errors(f"{self.ref.uri}: {remote.path}"),
            get_session().stream("GET", url, headers=headers, timeout=timeout) as response,
        ):
            if response.status_code >= 400:
                _raise_for_error_body(response, hf_raise_for_status, f"{self.ref.uri}: {remote.path}")
            if offset and response.status_code == 200:
                sink.restart()
            # Whatever the socket delivers, written at once: a kill loses nothing already received.
            for chunk in response.iter_raw():
                sink.write(chunk)


_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
# The most of an error or redirect body read to explain it: a source may send 300 MB.
ERROR_BODY_BYTES: Final = 64 * 1024


def _raise_for_error_body(response: Any, classify: Any, what: str) -> None:
    """Raise for an HTTP error answer: a small body (declared, within ERROR_BODY_BYTES) is
    read and classified by the hub client; a large or undeclared one is never read."""
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) <= ERROR_BODY_BYTES:
        response.read()
        classify(response)
    raise _from_status(what, response.status_code)


MAX_REDIRECTS: Final = 5
# Bytes asked of the socket per read: large enough that Python's per-call cost vanishes
# next to the copy, small enough that progress and the hand-off timer stay fine-grained.
RECEIVE_BYTES: Final = 1024 * 1024


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def keeps_credentials(from_url: str, to_url: str) -> bool:
    """Whether a redirect from `from_url` to `to_url` may carry the Authorization header:
    only to the same origin (scheme, host, port), or from http to https on the same host
    and default ports, the rule requests and httpx follow. Pure."""
    old, new = urlsplit(from_url), urlsplit(to_url)
    try:
        old_port = old.port or _DEFAULT_PORTS.get(old.scheme)
        new_port = new.port or _DEFAULT_PORTS.get(new.scheme)
    except ValueError:  # a port that is not a number: not the same origin
        return False
    if (old.hostname or "").lower() != (new.hostname or "").lower():
        return False
    if old.scheme == new.scheme:
        return old_port == new_port
    return (old.scheme, old_port, new.scheme, new_port) == ("http", 80, "https", 443)


def _tls_context() -> ssl.SSLContext:
    """Verification against SSL_CERT_FILE when set, else certifi's bundle (what the hub
    client trusts), else the system store."""
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with the HTTP clients
            cafile = None
    return _tls_context_for(cafile)


@functools.cache
def _tls_context_for(cafile: str | None) -> ssl.SSLContext:
    # Loading a CA bundle takes milliseconds; one context serves every connection.
    return ssl.create_default_context(cafile=cafile)


def _stream_direct(url: str, headers: dict[str, str], offset: int, sink: Sink, what: str) -> bool:
    """GET `url` with the standard library and read the body straight into the sink's
    buffers; False (nothing written) when the answer is not a plain success.

    Why not the hub client's own session: its HTTP/1.1 stack hands the body over in
    64 KiB pieces that are copied twice inside the parser and once more into our
    buffer, which made hf:// fetches CPU-bound at a fraction of the disk's speed.
    `readinto` on http.client's response reads from the socket directly into the
    block that is then hashed and written. Everything else stays with huggingface_hub:
    the URL, the headers (token, user agent) and, when this returns False, the request
    that raises the hub's classified error. Proxies are that client's business too.
    """
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        proxies = urllib.request.getproxies()
        if parts.scheme in proxies and not urllib.request.proxy_bypass(parts.hostname):
            return False
        try:
            port = parts.port
        except ValueError:  # a malformed Location: the hub client reports it
            return False
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname, port, timeout=CONNECT_TIMEOUT_S, context=_tls_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, port, timeout=CONNECT_TIMEOUT_S)
        try:
            connection.connect()
            assert connection.sock is not None
            connection.sock.settimeout(READ_TIMEOUT_S)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request("GET", target or "/", headers=headers)
            response = connection.getresponse()
            if response.status in _REDIRECTS and response.getheader("Location"):
                response.read(ERROR_BODY_BYTES)  # a redirect's body says nothing; never all of it
                following = urljoin(url, response.getheader("Location") or "")
                if not keeps_credentials(url, following):
                    # The hub sends LFS files to a CDN's signed URL: the token is not for it.
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                url = following
                continue
            if response.status not in (200, 206):
                return False
            if response.getheader("Content-Encoding", "identity") != "identity":
                return False
            if offset and response.status == 200:
                sink.restart()
            while True:
                buffer = sink.receive_buffer(RECEIVE_BYTES)
                count = response.readinto(buffer)
                buffer.release()
                if not count:
                    break
                sink.received(count)
            return True
        except (OSError, http.client.HTTPException) as error:
            # What arrived is in the sink; the engine resumes from there.
            raise SourceUnreachable(f"{what}: {type(error).__name__}: {error}") from error
        finally:
            connection.close()
    raise SourceUnreachable(f"{what}: more than {MAX_REDIRECTS} redirects")


def _from_status(what: str, status: int | None) -> CacheError:
    if status in (401, 403):
        return BadCredentials(f"{what}: HTTP {status}: the credentials were refused")
    if status == 404:
        return SourceNotFound(f"{what}: HTTP 404")
    if status == 412:
        return SourceChanged(f"{what}: HTTP 412: the object changed while it was being fetched")
    return SourceUnreachable(f"{what}: HTTP {status}")


# --- S3 and S3-compatible stores -------------------------------------------------------

_S3_BAD_CREDENTIALS: Final = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "403",
        "401",
    }
)
_S3_NOT_FOUND: Final = frozenset({"NoSuchBucket", "NoSuchKey", "404", "NotFound"})


class S3Source:
    """s3://BUCKET/PREFIX via boto3. Credentials and endpoint come from the usual AWS chain
    (AWS_ACCESS_KEY_ID/…, IRSA, AWS_ENDPOINT_URL_S3 for S3-compatible stores)."""

    def __init__(
        self,
        ref: SourceRef,
        credentials_dir: Path | None = None,
        *,
        ambient: bool = True,
        limits: ListingLimits | None = None,
    ) -> None:
        try:
            import boto3
            from botocore import UNSIGNED
            from botocore.config import Config
        except ImportError as error:
            raise MissingDependency(
                "s3:// sources need boto3: install inferfleet[cache] (the operator image has it)"
            ) from error
        self.ref = ref
        self.limits = limits
        settings = _aws_files(credentials_dir) if credentials_dir is not None else {}
        signed = ambient or bool(settings.get("AWS_ACCESS_KEY_ID"))
        config = Config(
            # One retry layer: the fetcher's own backoff (which also resumes mid-file).
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=32,
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            # Without keys of its own and no ambient credentials: anonymous requests, never
            # the environment's chain (instance metadata, a web identity, ~/.aws).
            **({} if signed else {"signature_version": UNSIGNED}),
        )
        session = boto3.session.Session(
            aws_access_key_id=settings.get("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=settings.get("AWS_SECRET_ACCESS_KEY"),
            aws_session_token=settings.get("AWS_SESSION_TOKEN"),
            region_name=settings.get("AWS_REGION") or settings.get("AWS_DEFAULT_REGION"),
        )
        endpoint = settings.get("AWS_ENDPOINT_URL_S3") or settings.get("AWS_ENDPOINT_URL")
        self._client: Any = session.client("s3", config=config, endpoint_url=endpoint)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        from botocore import exceptions as bx

        try:
            yield
        except bx.NoCredentialsError as error:
            raise BadCredentials(f"{what}: no AWS credentials found (secret not mounted?)") from error
        except bx.PartialCredentialsError as error:
            raise BadCredentials(f"{what}: incomplete AWS credentials: {error}") from error
        except bx.ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _S3_BAD_CREDENTIALS:
                raise BadCredentials(f"{what}: {code}: the credentials were refused") from error
            if code in _S3_NOT_FOUND:
                raise SourceNotFound(f"{what}: {code}") from error
            if code in {"PreconditionFailed", "412"}:
                raise SourceChanged(f"{what}: the object changed while it was being fetched") from error
            raise _from_status(f"{what}: {code}", status) from error
        except (bx.EndpointConnectionError, bx.ConnectionError, bx.HTTPClientError) as error:
            raise SourceUnreachable(f"{what}: {error}") from error

    def resolve(self, revision: str) -> ResolvedRevision:
        prefix = f"{self.ref.path.rstrip('/')}/" if self.ref.path else ""
        what = self.ref.uri
        files: list[RemoteFile] = []
        pages = 0
        with _listing(what), self._errors(what):
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.ref.location, Prefix=prefix):
                pages += 1
                contents = page.get("Contents", [])
                if self.limits is not None:
                    self.limits.check(what, pages, len(files) + len(contents))
                for item in contents:
                    key = item["Key"]
                    if key.endswith("/"):
                        continue
                    etag = str(item.get("ETag", "")).strip('"')
                    # A single-part upload's ETag is the MD5 of the object; a multipart
                    # one ("…-N") is not, and is only used as a version tag.
                    md5 = etag.lower() if len(etag) == 32 and _is_hex(etag) else None
                    files.append(
                        RemoteFile(
                            path=key[len(prefix) :],
                            size_bytes=_size_of(what, key, item["Size"]),
                            md5=md5,
                            etag=etag,
                        )
                    )
        if not files:
            raise SourceNotFound(f"{what}: no objects under this prefix")
        return ResolvedRevision(
            revision_id=listing_revision_id(revision, [(f.path, f.size_bytes, f.etag or "") for f in files]),
            commit=None,
            files=tuple(files),
        )

    def full_object_sha256(self, remote: RemoteFile) -> str | None:
        """A SHA-256 S3 keeps for the whole object, if the uploader asked for one.

        Multipart uploads usually carry a checksum of part checksums instead, which cannot
        be checked against the bytes; only an explicit FULL_OBJECT type is trusted."""
        prefix = f"{self.ref.path.rstrip('/')}/" if self.ref.path else ""
        with self._errors(f"{self.ref.uri}: {remote.path}"):
            head = self._client.head_object(
                Bucket=self.ref.location, Key=prefix + remote.path, ChecksumMode="ENABLED"
            )
        value = head.get("ChecksumSHA256")
        if not value or "-" in str(value) or head.get("ChecksumType") != "FULL_OBJECT":
            return None
        return _b64_to_hex(str(value))

    def read_into(self, resolved: ResolvedRevision, remote: RemoteFile, offset: int, sink: Sink) -> None:
        prefix = f"{self.ref.path.rstrip('/')}/" if self.ref.path else ""
        args: dict[str, Any] = {"Bucket": self.ref.location, "Key": prefix + remote.path}
        if remote.etag:
            args["IfMatch"] = f'"{remote.etag}"'
        if offset:
            args["Range"] = f"bytes={offset}-"
        with self._errors(f"{self.ref.uri}: {remote.path}"):
            response = self._client.get_object(**args)
            body = response["Body"]
            try:
                if offset and "ContentRange" not in response:
                    sink.restart()
                for chunk in body.iter_chunks(STREAM_CHUNK_BYTES):
                    sink.write(chunk)
            finally:
                body.close()


# The keys of an S3 credentials Secret, one file each when mounted (the pre-cache pod) or
# written out (the operator reading a model config): the fetcher reads exactly these.
AWS_CREDENTIAL_KEYS: Final = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
)


def _aws_files(directory: Path) -> dict[str, str]:
    """AWS settings from a mounted Secret: one file per variable name."""
    found: dict[str, str] = {}
    for name in AWS_CREDENTIAL_KEYS:
        path = directory / name
        if path.is_file():
            found[name] = path.read_text(encoding="utf-8").strip()
    return found


# --- Google Cloud Storage --------------------------------------------------------------


class GcsSource:
    """gs://BUCKET/PREFIX via google-cloud-storage (Application Default Credentials, or
    anonymous against STORAGE_EMULATOR_HOST)."""

    def __init__(
        self,
        ref: SourceRef,
        *,
        key_file: Path | None = None,
        ambient: bool = True,
        limits: ListingLimits | None = None,
    ) -> None:
        try:
            from google.cloud import storage  # type: ignore[import-untyped]
        except ImportError as error:
            raise MissingDependency(
                "gs:// sources need google-cloud-storage: install inferfleet[cache] (in the operator image)"
            ) from error
        self.ref = ref
        self.key_file = key_file
        self.ambient = ambient
        self.limits = limits
        self._storage: Any = storage
        self._client: Any = None

    def _credentials(self) -> Any:
        """The key given (always that one, emulator or not), else None for the default
        chain (ambient), else anonymous."""
        from google.auth import credentials

        if self.key_file is not None:
            from google.auth import exceptions as auth_errors
            from google.oauth2 import service_account

            try:
                return service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                    str(self.key_file), scopes=[GCS_READ_SCOPE]
                )
            except (OSError, ValueError, KeyError, auth_errors.GoogleAuthError) as error:
                # The message may quote the key file: name the failure, never its contents.
                raise BadCredentials(
                    f"{self.ref.uri}: {self.key_file} is not a readable service-account key "
                    f"({type(error).__name__})"
                ) from None
        if self.ambient:
            return None
        anonymous: Any = credentials.AnonymousCredentials
        return anonymous()

    def _get_client(self) -> Any:
        if self._client is None:
            # Recent clients look up each bucket's metadata on a background thread, for
            # tracing attributes only: one more call that needs storage.buckets.get (a
            # reader with objects.get alone gets 403s) and a thread that retries it for
            # minutes after the fetch. The fetcher traces nothing; an explicit setting wins.
            os.environ.setdefault(GCS_BUCKET_METADATA_OFF, "true")
            given = self._credentials()
            if os.environ.get("STORAGE_EMULATOR_HOST"):
                from google.auth import credentials

                anonymous: Any = credentials.AnonymousCredentials
                self._client = self._storage.Client(project="emulator", credentials=given or anonymous())
            elif given is not None:
                # A project is needed by the constructor only; reading objects uses none.
                project = getattr(given, "project_id", None) or "anonymous"
                self._client = self._storage.Client(project=project, credentials=given)
            else:
                self._client = self._storage.Client()
        return self._client

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        import requests
        from google.api_core import exceptions as gx
        from google.auth import exceptions as auth_errors

        try:
            yield
        except auth_errors.DefaultCredentialsError as error:
            raise BadCredentials(f"{what}: no Google credentials found (secret not mounted?)") from error
        except (gx.Unauthorized, gx.Forbidden) as error:
            raise BadCredentials(f"{what}: {error.code}: the credentials were refused") from error
        except gx.NotFound as error:
            raise SourceNotFound(f"{what}: not found") from error
        except gx.PreconditionFailed as error:
            raise SourceChanged(f"{what}: the object changed while it was being fetched") from error
        except gx.GoogleAPICallError as error:
            raise _from_status(what, error.code) from error
        except (requests.ConnectionError, requests.Timeout, gx.RetryError) as error:
            raise SourceUnreachable(f"{what}: {error}") from error

    def resolve(self, revision: str) -> ResolvedRevision:
        prefix = f"{self.ref.path.rstrip('/')}/" if self.ref.path else ""
        files: list[RemoteFile] = []
        with _listing(self.ref.uri), self._errors(self.ref.uri):
            # retry=None: one retry layer, the fetcher's (the client's own default retries a
            # refused connection for two minutes before anyone hears about it).
            listing = self._get_client().list_blobs(self.ref.location, prefix=prefix, retry=None)
            for blob in self._limited(listing):
                if blob.name.endswith("/"):
                    continue
                files.append(
                    RemoteFile(
                        path=blob.name[len(prefix) :],
                        size_bytes=_size_of(self.ref.uri, blob.name, blob.size),
                        md5=_b64_to_hex(blob.md5_hash),
                        crc32c=_b64_to_hex(blob.crc32c),
                        etag=str(blob.generation),
                    )
                )
        if not files:
            raise SourceNotFound(f"{self.ref.uri}: no objects under this prefix")
        return ResolvedRevision(
            revision_id=listing_revision_id(revision, [(f.path, f.size_bytes, f.etag or "") for f in files]),
            commit=None,
            files=tuple(files),
        )

    def _limited(self, listing: Any) -> Iterator[Any]:
        """The listing's objects, page by page within `limits`."""
        if self.limits is None:
            yield from listing
            return
        files = 0
        for pages, page in enumerate(listing.pages, start=1):
            items = list(page)
            files += len(items)
            self.limits.check(self.ref.uri, pages, files)
            yield from items

    def read_into(self, resolved: ResolvedRevision, remote: RemoteFile, offset: int, sink: Sink) -> None:
        from google.api_core import exceptions as gx

        prefix = f"{self.ref.path.rstrip('/')}/" if self.ref.path else ""
        what = f"{self.ref.uri}: {remote.path}"
        with self._errors(what):
            bucket = self._get_client().bucket(self.ref.location)
            generation = int(remote.etag) if remote.etag and remote.etag.isdigit() else None
            blob = bucket.blob(prefix + remote.path, generation=generation)
            try:
                # raw_download: no decompressive transcoding (sizes and hashes refer to stored
                # bytes); checksum=None: the engine verifies the whole file, resumed prefixes
                # included; retry=None: the engine retries, resuming where the bytes stopped.
                blob.download_to_file(
                    sink, start=offset or None, raw_download=True, checksum=None, retry=None
                )
            except gx.NotFound as error:
                # Listed a moment ago: the generation we listed was replaced or deleted.
                raise SourceChanged(f"{what}: the listed generation {generation} is gone") from error


# --- a mounted directory (file://, pvc://) ---------------------------------------------


class LocalSource:
    """A directory: a mounted claim or any path. Copies use copy_file_range when no
    checksum has to be computed, so a volume-to-NVMe copy runs at `cp` speed.

    The tree is walked without leaving it: a symlink is followed only when its target is
    a regular file inside the tree (a symlinked directory inside it is listed where it
    really is); one pointing outside is refused (`UnsafeSource`), so a claim cannot hand
    the node's own files to a pod. Each listed file's identity (device, inode) is kept,
    and a read that opens a different file is SourceChanged."""

    # The marker of a copied cache, and anything of size beyond reason, is not copied.
    _MARKER_MAX_BYTES = 64 * 1024 * 1024

    def __init__(self, ref: SourceRef, root: Path) -> None:
        self.ref = ref
        self.root = root
        # listed name → (path to open, st_dev, st_ino)
        self._files: dict[str, tuple[str, int, int]] = {}

    def _walk(self) -> Iterator[tuple[str, str, os.stat_result]]:
        """(listed name, real path, stat) of every regular file in the tree."""
        real_root = os.path.realpath(self.root)
        for top, dirs, names, _top_fd in os.fwalk(real_root, follow_symlinks=False):
            for entry in sorted(names) + sorted(dirs):
                path = os.path.join(top, entry)
                info = os.stat(path, follow_symlinks=False)
                rel = os.path.relpath(path, real_root)
                if stat.S_ISDIR(info.st_mode):
                    continue  # walked by fwalk itself
                if stat.S_ISLNK(info.st_mode):
                    target = os.path.realpath(path)
                    if os.path.commonpath([real_root, target]) != real_root:
                        raise UnsafeSource(
                            f"{self.ref.uri}: {rel} is a symlink to {os.readlink(path)!r}, outside the "
                            "source tree; copy the files into the tree instead of linking to them"
                        )
                    try:
                        info = os.stat(target, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # dangling: nothing to copy
                    if not stat.S_ISREG(info.st_mode):
                        continue  # a directory inside the tree is listed where it really is
                    yield rel, target, info
                elif stat.S_ISREG(info.st_mode):
                    yield rel, path, info

    def resolve(self, revision: str) -> ResolvedRevision:
        if not self.root.is_dir():
            hint = f" (is the claim mounted under ${PVC_ROOT_ENV}?)" if self.ref.scheme == "pvc" else ""
            raise SourceNotFound(f"{self.ref.uri}: {self.root} is not a directory{hint}")
        published = self._published_manifest()
        files: list[RemoteFile] = []
        self._files = {}
        try:
            for rel, real, info in sorted(self._walk()):
                if rel == MARKER_DIR or rel.startswith(MARKER_DIR + "/"):
                    continue  # a copied cache's own marker: metadata, not a model file
                known = published.get(rel)
                same = known is not None and known.size_bytes == info.st_size
                files.append(
                    RemoteFile(
                        path=rel,
                        size_bytes=info.st_size,
                        sha256=known.sha256 if same and known else None,
                        git_sha1=known.git_sha1 if same and known else None,
                        md5=known.md5 if same and known else None,
                        etag=str(info.st_mtime_ns),
                    )
                )
                self._files[rel] = (real, info.st_dev, info.st_ino)
        except PermissionError as error:
            raise BadCredentials(f"{self.ref.uri}: {error}") from error
        if not files:
            raise SourceNotFound(f"{self.ref.uri}: {self.root} holds no files")
        return ResolvedRevision(
            revision_id=listing_revision_id(revision, [(f.path, f.size_bytes, f.etag or "") for f in files]),
            commit=None,
            files=tuple(files),
        )

    def _published_manifest(self) -> dict[str, RemoteFile]:
        """Checksums of an inferfleet marker in the source (a copied cache) — the only
        checksums a plain directory can publish. Read without following a symlink."""
        marker = self.root / MARKER_RELPATH
        try:
            fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(self._MARKER_MAX_BYTES + 1)
            if len(data) > self._MARKER_MAX_BYTES:
                return {}
            manifest = Manifest.from_json(data.decode("utf-8"))
        except (OSError, ValueError, json.JSONDecodeError):
            return {}
        return {
            entry.path: RemoteFile(
                path=entry.path,
                size_bytes=entry.size_bytes,
                sha256=entry.sha256,
                git_sha1=entry.git_sha1,
                md5=entry.md5,
            )
            for entry in manifest.files
        }

    def read_into(self, resolved: ResolvedRevision, remote: RemoteFile, offset: int, sink: Sink) -> None:
        real, device, inode = self._files.get(remote.path, (str(self.root / remote.path), -1, -1))
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError as error:
            raise SourceChanged(f"{self.ref.uri}: {remote.path} disappeared") from error
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise SourceChanged(f"{self.ref.uri}: {remote.path} became a symlink") from error
            raise
        try:
            info = os.fstat(fd)
            if device >= 0 and (info.st_dev, info.st_ino) != (device, inode):
                raise SourceChanged(f"{self.ref.uri}: {remote.path} was replaced since it was listed")
            remaining = remote.size_bytes - offset
            if sink.copy_from(fd, offset, remaining):
                return
            # The bytes must be seen (hashed): read straight into the writer's block, one
            # copy from the page cache and none in Python, as the hub's stream does.
            position = offset
            while True:
                buffer = sink.receive_buffer(RECEIVE_BYTES)
                count = os.preadv(fd, [buffer], position)
                buffer.release()
                if not count:
                    break
                sink.received(count)
                position += count
        finally:
            os.close(fd)
