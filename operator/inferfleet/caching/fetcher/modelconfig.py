"""Read a model's architecture from where its weights live, for the planner. I/O.

A model the catalog does not know is planned from its own `config.json` and its
parameter count, read from the source the spec names (the hub, S3, GCS or a directory)
through the same backends and credentials as the weight pre-cache (`caching.fetcher.remote`).
The operator never runs this: a probe pod in the tenant's namespace does (`inferfleet
cache probe`, caching.precache.probe), and so does `inferfleet plan` on the user's machine,
both through `bounded_read`: a total deadline, and caps on the bytes of each response
and in all (caching.fetcher.netbudget, counted at the socket under every client library), on
listing pages and files, and on shards.

- `config.json` as it is (at most 4 MiB; hostile sources exist);
- the parameter count from the safetensors headers: `model.safetensors.index.json`
  lists the shards, and each shard's first bytes hold a JSON header with every
  tensor's dtype and shape; only those headers are read (range reads), never the
  weights. Packed quantized tensors (4-bit in int32/uint8) count their unpacked
  elements; scales, zero points and group indices are metadata, not parameters.

`ModelConfigCache` keeps answers per (source, revision, credentials) so a file with
several services of one model reads it once (the CLI). The planner itself stays pure: it
receives the result as a `planner.FetchedModel`.
"""

from __future__ import annotations

import contextlib
import json
import math
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from inferfleet.caching.fetcher import netbudget
from inferfleet.caching.fetcher.remote import ListingLimits, Source, open_source
from inferfleet.caching.precache import probe
from inferfleet.caching.precache.fetch_errors import (
    CacheError,
    ConfigUnavailable,
    DeadlineExceeded,
    ResponseTooLarge,
    SourceInvalid,
)
from inferfleet.caching.precache.layout import parse_source
from inferfleet.caching.precache.manifest import RemoteFile, ResolvedRevision
from inferfleet.planner import FetchedModel

CONFIG_FILE: Final = "config.json"
INDEX_FILE: Final = "model.safetensors.index.json"
SINGLE_FILE: Final = "model.safetensors"
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
MAX_INDEX_BYTES: Final = 64 * 1024 * 1024
# A safetensors header is 8 bytes of length, then that much JSON; most fit the probe.
HEADER_PROBE_BYTES: Final = 256 * 1024
MAX_HEADER_BYTES: Final = 100 * 1024 * 1024
# The largest published checkpoints have fewer than 200 shards (Llama-3.1-405B: 191).
MAX_SHARDS: Final = 1024
# Unpacked elements per stored element of packed quantized tensors.
PACKED_ELEMENTS: Final = {"I32": 8, "U32": 8, "U8": 2, "I8": 2}
METADATA_SUFFIXES: Final = (
    "scales",
    "scale",
    "scale_inv",
    "qzeros",
    "zeros",
    "g_idx",
    "zero_point",
    "global_scale",
    "input_scale",
    "weight_shape",
)
PACKED_SUFFIXES: Final = ("qweight", "_blocks", "weight_packed")


# The source holds no usable config or parameter count; the message says why.
ModelConfigUnavailable = ConfigUnavailable


class _Enough(Exception):
    """Raised by the sink once it holds the bytes asked for (ends the stream early)."""


class _HeadSink:
    """A `cache.remote.Sink` that keeps the first `limit` bytes of a file."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self._pending = bytearray()

    def write(self, data: bytes) -> int:
        self.data += data[: self.limit - len(self.data)]
        if len(self.data) >= self.limit:
            raise _Enough
        return len(data)

    def restart(self) -> None:
        self.data.clear()

    def copy_from(self, fd: int, offset: int, count: int) -> bool:
        del fd, offset, count
        return False  # the bytes are wanted here

    def receive_buffer(self, limit: int) -> memoryview:
        self._pending = bytearray(max(1, min(limit, self.limit - len(self.data))))
        return memoryview(self._pending)

    def received(self, count: int) -> None:
        self.write(bytes(self._pending[:count]))


def read_head(source: Source, resolved: ResolvedRevision, remote: RemoteFile, limit: int) -> bytes:
    """The first `limit` bytes of a file (all of it when smaller)."""
    sink = _HeadSink(min(limit, remote.size_bytes))
    if sink.limit == 0:
        return b""
    with contextlib.suppress(_Enough):
        source.read_into(resolved, remote, 0, sink)
    return bytes(sink.data)


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelConfigUnavailable(f"{what} is not valid JSON: {error}") from None


def tensor_parameters(header: Mapping[str, Any]) -> int:
    """Parameters a safetensors header describes (see the module docstring)."""
    total = 0
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, Mapping):
            continue
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ModelConfigUnavailable(f"tensor {name!r} has no valid shape")
        lowered = name.lower()
        if lowered.endswith(METADATA_SUFFIXES):
            continue
        elements = math.prod(shape)
        if lowered.endswith(PACKED_SUFFIXES):
            elements *= PACKED_ELEMENTS.get(str(entry.get("dtype")), 1)
        total += elements
    return total


def _header(source: Source, resolved: ResolvedRevision, remote: RemoteFile) -> Mapping[str, Any]:
    head = read_head(source, resolved, remote, HEADER_PROBE_BYTES)
    if len(head) < 8:
        raise ModelConfigUnavailable(f"{remote.path}: too short for a safetensors file")
    (length,) = struct.unpack("<Q", head[:8])
    if length > MAX_HEADER_BYTES or 8 + length > remote.size_bytes:
        raise ModelConfigUnavailable(f"{remote.path}: safetensors header of {length} bytes is not plausible")
    if 8 + length > len(head):
        head = read_head(source, resolved, remote, 8 + length)
    header = _json(head[8 : 8 + length], f"{remote.path}'s safetensors header")
    if not isinstance(header, Mapping):
        raise ModelConfigUnavailable(f"{remote.path}: the safetensors header is not a JSON object")
    return header


def _shards(
    source: Source, resolved: ResolvedRevision, files: Mapping[str, RemoteFile], max_shards: int = MAX_SHARDS
) -> list[RemoteFile]:
    index = files.get(INDEX_FILE)
    if index is None:
        single = files.get(SINGLE_FILE)
        if single is None:
            raise ModelConfigUnavailable(
                "no model.safetensors or model.safetensors.index.json to count parameters from; "
                "set spec.model.parametersBillion"
            )
        return [single]
    if index.size_bytes > MAX_INDEX_BYTES:
        raise ModelConfigUnavailable(f"{INDEX_FILE} is {index.size_bytes} bytes, more than this reader takes")
    document = _json(read_head(source, resolved, index, MAX_INDEX_BYTES), INDEX_FILE)
    weight_map = document.get("weight_map") if isinstance(document, Mapping) else None
    if not isinstance(weight_map, Mapping) or not weight_map:
        raise ModelConfigUnavailable(f"{INDEX_FILE} has no weight_map")
    names = sorted({str(name) for name in weight_map.values()})
    if len(names) > max_shards:
        raise ModelConfigUnavailable(f"{INDEX_FILE} names {len(names)} shards, more than {max_shards}")
    missing = [name for name in names if name not in files]
    if missing:
        raise ModelConfigUnavailable(f"{INDEX_FILE} names shards the source does not hold: {missing[:3]}")
    return [files[name] for name in names]


@dataclass(frozen=True)
class Access:
    """How to reach a source: the hub token, a directory of object-store credentials, a
    GCS service-account key; `ambient=False` never uses this environment's own
    credentials (a probe pod reads with the tenant's Secret or anonymously)."""

    token: str | None = None
    credentials_dir: Path | None = None
    key_file: Path | None = None
    ambient: bool = True


@dataclass(frozen=True)
class ReadLimits:
    """What one read of a model's config may take (caching.precache.probe has the reasons)."""

    deadline_s: float = 60.0
    max_response_bytes: int = probe.MAX_RESPONSE_BYTES
    max_total_bytes: int = probe.MAX_TOTAL_BYTES
    max_pages: int = probe.MAX_LISTING_PAGES
    max_files: int = probe.MAX_LISTING_FILES
    max_shards: int = MAX_SHARDS


def read_model(
    uri: str,
    revision: str,
    access: Access,
    *,
    need_parameters: bool = True,
    limits: ReadLimits | None = None,
) -> FetchedModel:
    """config.json and (when asked) the parameter count of the model at `uri`@`revision`.

    No deadline of its own (`bounded_read` adds it). Raises ConfigUnavailable, or a
    `caching.precache.fetch_errors` error for the source's own faults."""
    limits = limits or ReadLimits()
    try:
        ref = parse_source(uri)
    except SourceInvalid as error:
        raise ModelConfigUnavailable(str(error)) from None
    if ref.scheme == "pvc":
        raise ModelConfigUnavailable(
            "pvc:// sources are mounted only in the pods that use them, so config.json cannot be read "
            "here; give the architecture inline as spec.model.config"
        )
    source = open_source(
        ref,
        access.token,
        access.credentials_dir,
        key_file=access.key_file,
        ambient=access.ambient,
        limits=ListingLimits(limits.max_pages, limits.max_files),
    )
    resolved = source.resolve(revision)
    files = {remote.path: remote for remote in resolved.files}
    config_file = files.get(CONFIG_FILE)
    if config_file is None:
        raise ModelConfigUnavailable(f"{uri}@{revision} holds no {CONFIG_FILE}")
    if config_file.size_bytes > MAX_CONFIG_BYTES:
        raise ModelConfigUnavailable(f"{CONFIG_FILE} is {config_file.size_bytes} bytes: not a model config")
    config = _json(read_head(source, resolved, config_file, MAX_CONFIG_BYTES), CONFIG_FILE)
    if not isinstance(config, Mapping):
        raise ModelConfigUnavailable(f"{CONFIG_FILE} is not a JSON object")
    parameters = 0
    if need_parameters:
        shards = _shards(source, resolved, files, limits.max_shards)
        parameters = sum(tensor_parameters(_header(source, resolved, shard)) for shard in shards)
        if parameters <= 0:
            raise ModelConfigUnavailable("the safetensors headers hold no parameters")
    revision_id = resolved.commit or resolved.revision_id
    return FetchedModel(
        config=dict(config),
        parameters_billion=parameters / 1e9,
        source=f"{uri}@{revision_id[:12]}",
        revision=revision_id,
    )


def bounded_read(
    uri: str, revision: str, access: Access, *, need_parameters: bool, limits: ReadLimits
) -> FetchedModel:
    """`read_model` within `limits`: a total deadline, bytes per response and in all.

    Raises a `caching.precache.fetch_errors` error: DeadlineExceeded, ResponseTooLarge, ListingTooLong,
    ConfigUnavailable, or the source's own (BadCredentials, SourceNotFound, ...)."""
    outcome = netbudget.run_bounded(
        lambda: read_model(uri, revision, access, need_parameters=need_parameters, limits=limits),
        netbudget.Limits(limits.deadline_s, limits.max_response_bytes, limits.max_total_bytes),
    )
    if outcome.finished and outcome.error is None:
        model: FetchedModel = outcome.value
        return model
    where = f"{uri}@{revision}"
    budget = outcome.budget
    if budget.spent in ("response", "total"):
        raise ResponseTooLarge(f"{where}: the source sent {budget.describe()}")
    if budget.spent == "deadline" or not outcome.finished:
        raise DeadlineExceeded(
            f"{where}: not read within the deadline of {limits.deadline_s:g} s "
            f"({budget.received_bytes} bytes received)"
        )
    error = outcome.error
    if isinstance(error, CacheError):
        raise error
    # A client library's own exception that no backend translated: still one reason.
    raise CacheError(f"{where}: unexpected {type(error).__name__}: {error}")


# --- the cache the operator and the CLI share ------------------------------------------

Reader = Callable[[str, str, Access, bool], FetchedModel]
SUCCESS_TTL_S: Final = 3600.0
FAILURE_TTL_S: Final = 300.0


def _default_reader(uri: str, revision: str, access: Access, need_parameters: bool) -> FetchedModel:
    return bounded_read(uri, revision, access, need_parameters=need_parameters, limits=ReadLimits())


@dataclass(frozen=True)
class _Answer:
    model: FetchedModel | None
    problem: str | None
    at_s: float


class ModelConfigCache:
    """Fetched configs per (source, revision, credentials); failures are remembered too.
    For one process that plans several services (the CLI): the operator reads nothing."""

    def __init__(
        self,
        reader: Reader = _default_reader,
        *,
        clock: Callable[[], float] = time.monotonic,
        success_ttl_s: float = SUCCESS_TTL_S,
        failure_ttl_s: float = FAILURE_TTL_S,
    ) -> None:
        self.reader = reader
        self.clock = clock
        self.success_ttl_s = success_ttl_s
        self.failure_ttl_s = failure_ttl_s
        self._answers: dict[tuple[Any, ...], _Answer] = {}
        self._lock = threading.Lock()
        self.reads = 0

    def get(
        self,
        uri: str,
        revision: str,
        access: Access,
        *,
        need_parameters: bool,
        identity: Iterable[str] = (),
    ) -> tuple[FetchedModel | None, str | None]:
        """(model, None) or (None, why not). `identity` names the credentials (secret and
        its version) so a rotated token is tried again."""
        key = (uri, revision, need_parameters, *identity)
        now = self.clock()
        with self._lock:
            found = self._answers.get(key)
            ttl = self.success_ttl_s if found is not None and found.model is not None else self.failure_ttl_s
            if found is not None and now - found.at_s < ttl:
                return (found.model, found.problem)
            self.reads += 1
            try:
                answer = _Answer(self.reader(uri, revision, access, need_parameters), None, now)
            except CacheError as error:
                # Source errors already name the source; ours do not.
                text = str(error)
                answer = _Answer(None, text if uri in text else f"{uri}@{revision}: {text}", now)
            self._answers[key] = answer
            return (answer.model, answer.problem)
