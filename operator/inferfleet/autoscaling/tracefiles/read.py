"""Trace files into one `Trace` (I/O: reads files): the published formats below, parsed
here, then scaled and synthesized by the pure steps of inferfleet.autoscaling.simulate.traces.

Formats (see simulate/traces.py's docstring and docs/concepts/autoscaling.md): `azure`
CSV, `burstgpt` CSV, `mooncake` JSONL and `rates` series CSV.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Literal, TextIO

import numpy as np

from inferfleet.api.spec import TokenPercentiles
from inferfleet.autoscaling.simulate.traces import (
    DEFAULT_EPOCH_S,
    FORMATS,
    MAX_BLOCKS_PER_REQUEST,
    MOONCAKE_BLOCK_TOKENS,
    FloatArray,
    IntArray,
    PrefixBlocks,
    RateSeries,
    Trace,
    TraceError,
    scaled_order,
    synthesize,
)

_RATE_COLUMNS = ("total_rate_rps", "rate_rps", "rate", "rps")
_CV_COLUMNS = ("rate_weighted_client_cv", "cv")


def detect_format(path: Path) -> str:
    """Guess the format from the first line."""
    with _open(path) as handle:
        first = handle.readline().strip()
    if first.startswith("{"):
        return "mooncake"
    header = [cell.strip().lower() for cell in first.split(",")]
    if "timestamp" in header and "contexttokens" in header:
        return "azure"
    if "timestamp" in header and "request tokens" in header:
        return "burstgpt"
    if "window_start_s" in header:
        return "rates"
    raise TraceError(f"{path}: cannot tell the trace format from its header {first[:80]!r}")


def _open(path: Path) -> TextIO:
    try:
        return path.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, expected a trace file") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error}") from None


def _column(header: list[str], names: tuple[str, ...], path: Path) -> int:
    lowered = [cell.strip().lower() for cell in header]
    for name in names:
        if name.lower() in lowered:
            return lowered.index(name.lower())
    raise TraceError(f"{path}: missing column {names[0]!r} (header: {', '.join(header)})")


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with _open(path) as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceError(f"{path}: empty file") from None
        rows = [row for row in reader if row]
    if not rows:
        raise TraceError(f"{path}: no rows after the header")
    return header, rows


def _ints(values: list[str], path: Path, what: str) -> IntArray:
    try:
        return np.asarray([int(float(v)) for v in values], dtype=np.int64)
    except ValueError as error:
        raise TraceError(f"{path}: bad {what}: {error}") from None


def read_azure(path: Path) -> tuple[FloatArray, IntArray, IntArray, float | None]:
    header, rows = _rows(path)
    ts, ctx, gen = (
        _column(header, (name,), path) for name in ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    )
    try:
        # numpy parses ISO timestamps; trim the 7th fractional digit it does not take.
        stamps = np.asarray([row[ts].strip().replace(" ", "T")[:26] for row in rows], dtype="datetime64[us]")
    except ValueError as error:
        raise TraceError(f"{path}: bad TIMESTAMP: {error}") from None
    micros = stamps.astype(np.int64)
    start = int(micros.min())
    arrival = (micros - start).astype(np.float64) / 1e6
    epoch = start / 1e6  # numpy datetime64 without a zone: read as UTC
    return (
        arrival,
        _ints([r[ctx] for r in rows], path, "ContextTokens"),
        _ints([r[gen] for r in rows], path, "GeneratedTokens"),
        epoch,
    )


def read_burstgpt(path: Path) -> tuple[FloatArray, IntArray, IntArray, float | None]:
    header, rows = _rows(path)
    ts = _column(header, ("Timestamp",), path)
    req = _column(header, ("Request tokens",), path)
    resp = _column(header, ("Response tokens",), path)
    try:
        arrival = np.asarray([float(r[ts]) for r in rows], dtype=np.float64)
    except ValueError as error:
        raise TraceError(f"{path}: bad Timestamp: {error}") from None
    arrival -= arrival.min()
    return (
        arrival,
        _ints([r[req] for r in rows], path, "Request tokens"),
        _ints([r[resp] for r in rows], path, "Response tokens"),
        None,
    )


def read_mooncake(path: Path) -> tuple[FloatArray, IntArray, IntArray, PrefixBlocks | None]:
    """A Mooncake JSONL trace, with its `hash_ids` as prefix blocks when every record has
    them (a record without them leaves the whole trace without blocks: a partial prefix
    record would make the cache replay count misses that are only missing data)."""
    stamps: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    ids: list[int] = []
    starts: list[int] = [0]
    with_blocks = True
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                stamps.append(float(record["timestamp"]) / 1000.0)
                prompt = int(record["input_length"])
                inputs.append(prompt)
                outputs.append(int(record["output_length"]))
            except (ValueError, KeyError, TypeError) as error:
                raise TraceError(f"{path}:{number}: bad Mooncake record: {error}") from None
            hashes = record.get("hash_ids")
            if hashes is None or not with_blocks:
                with_blocks = False
                continue
            ids.extend(_block_ids(hashes, prompt, path, number))
            starts.append(len(ids))
    if not stamps:
        raise TraceError(f"{path}: no records")
    arrival = np.asarray(stamps, dtype=np.float64)
    arrival -= arrival.min()
    blocks = (
        PrefixBlocks(
            np.asarray(ids, dtype=np.int64), np.asarray(starts, dtype=np.int64), MOONCAKE_BLOCK_TOKENS
        )
        if with_blocks
        else None
    )
    return arrival, np.asarray(inputs, dtype=np.int64), np.asarray(outputs, dtype=np.int64), blocks


def _block_ids(hashes: object, prompt_tokens: int, path: Path, number: int) -> list[int]:
    """A record's `hash_ids`: integers, no more than its prompt has blocks."""
    if not isinstance(hashes, list) or not all(
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 for value in hashes
    ):
        raise TraceError(f"{path}:{number}: hash_ids must be a list of non-negative integers")
    most = min(MAX_BLOCKS_PER_REQUEST, -(-max(prompt_tokens, 1) // MOONCAKE_BLOCK_TOKENS))
    if len(hashes) > most:
        raise TraceError(
            f"{path}:{number}: {len(hashes)} hash_ids for a {prompt_tokens}-token prompt "
            f"(at most {most} blocks of {MOONCAKE_BLOCK_TOKENS} tokens)"
        )
    return hashes


def read_rate_series(path: Path) -> RateSeries:
    header, rows = _rows(path)
    start = _column(header, ("window_start_s",), path)
    width = _column(header, ("window_s",), path)
    rate = _column(header, _RATE_COLUMNS, path)
    try:
        cv_index: int | None = _column(header, _CV_COLUMNS, path)
    except TraceError:
        cv_index = None
    try:
        starts = np.asarray([float(r[start]) for r in rows])
        widths = np.asarray([float(r[width]) for r in rows])
        rates = np.asarray([float(r[rate]) for r in rows])
        cvs = None if cv_index is None else np.asarray([float(r[cv_index] or 1.0) for r in rows])
    except (ValueError, IndexError) as error:
        raise TraceError(f"{path}: bad rate row: {error}") from None
    if (widths <= 0).any() or (rates < 0).any():
        raise TraceError(f"{path}: window_s must be > 0 and rates >= 0")
    order = np.argsort(starts, kind="stable")
    return RateSeries(starts[order], widths[order], rates[order], None if cvs is None else cvs[order])


def load_trace(
    path: Path,
    *,
    trace_format: str = "auto",
    input_tokens: TokenPercentiles | None = None,
    output_tokens: TokenPercentiles | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    seed: int = 0,
    arrivals: Literal["poisson", "gamma"] = "poisson",
    epoch_s: float | None = None,
) -> Trace:
    """Read a trace file in any supported format and apply the load and time scales."""
    if trace_format not in FORMATS:
        raise TraceError(f"unknown trace format {trace_format!r}; known: {', '.join(FORMATS)}")
    if rate_scale <= 0 or time_scale <= 0:
        raise TraceError("--rate-scale and --time-scale must be > 0")
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    fmt = detect_format(path) if trace_format == "auto" else trace_format
    rng = np.random.default_rng(seed)
    native_epoch: float | None = None
    blocks: PrefixBlocks | None = None
    if fmt == "rates":
        if input_tokens is None or output_tokens is None:
            raise TraceError("a rate series needs token percentiles (the spec's workload) to draw lengths")
        series = read_rate_series(path)
        arrival, inputs, outputs = synthesize(
            series, input_tokens, output_tokens, rate_scale=rate_scale, rng=rng, arrivals=arrivals
        )
        span = float((series.window_start_s + series.window_s).max() - min(0.0, series.window_start_s.min()))
    else:
        if fmt == "mooncake":
            arrival, inputs, outputs, blocks = read_mooncake(path)
        else:
            reader = {"azure": read_azure, "burstgpt": read_burstgpt}[fmt]
            arrival, inputs, outputs, native_epoch = reader(path)
        order = np.argsort(arrival, kind="stable")
        arrival, index = scaled_order(arrival[order], rate_scale, rng)
        inputs, outputs = inputs[order][index], outputs[order][index]
        blocks = None if blocks is None else blocks.of(order[index])
        span = float(arrival[-1]) + 1.0 if arrival.size else 0.0
    arrival = arrival * time_scale
    inputs = np.maximum(inputs, 1)
    outputs = np.maximum(outputs, 1)
    if epoch_s is None:
        epoch_s = native_epoch if native_epoch is not None else DEFAULT_EPOCH_S
    return Trace(
        name=path.stem,
        format=fmt,
        arrival_s=np.ascontiguousarray(arrival, dtype=np.float64),
        input_tokens=np.ascontiguousarray(inputs, dtype=np.int64),
        output_tokens=np.ascontiguousarray(outputs, dtype=np.int64),
        span_s=span * time_scale,
        epoch_s=float(epoch_s),
        prefix_blocks=blocks,
    )
