"""Trace readers: published request-arrival formats into one `Trace` (numpy arrays).

Formats are read as their publishers ship them (see shared/data/traces/README.md):

- `azure`: Azure LLM inference traces 2023/2024, CSV `TIMESTAMP,ContextTokens,GeneratedTokens`
  (timestamps like `2023-11-16 18:17:03.9799600`, up to 7 fractional digits);
- `burstgpt`: BurstGPT CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
  (seconds from the start of the trace);
- `mooncake`: Mooncake / Kimi JSONL, one `{"timestamp": ms, "input_length", "output_length", ...}`
  per line;
- `rates`: a rate series, CSV with `window_start_s`, `window_s` and a rate column
  (`total_rate_rps`, `rate_rps` or `rate`), like the 14-day ServeGen aggregate. Arrivals
  are synthesized inside each window (a Poisson process, or a gamma renewal process
  with the file's coefficient of variation) and token lengths drawn from the spec's
  workload percentiles.

`--rate-scale` multiplies the load and `--time-scale` stretches time (2 = the same
requests over twice the span). Everything random is seeded, so a run is repeatable.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

import numpy as np
import numpy.typing as npt

from inferfleet.api.spec import TokenPercentiles

TraceFormat = Literal["auto", "azure", "burstgpt", "mooncake", "rates"]
FORMATS: tuple[str, ...] = ("auto", "azure", "burstgpt", "mooncake", "rates")
# When a trace carries no calendar date, time 0 is Monday 2024-01-01 00:00 UTC, so
# cron pre-warm windows and weekly seasonality line up with something plausible.
DEFAULT_EPOCH_S = 1_704_067_200.0
_Z_95 = 1.6448536269514722
_RATE_COLUMNS = ("total_rate_rps", "rate_rps", "rate", "rps")
_CV_COLUMNS = ("rate_weighted_client_cv", "cv")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class TraceError(ValueError):
    """The trace cannot be read (missing file, unknown format, bad rows)."""


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival; times in seconds from the trace start."""

    name: str
    format: str
    arrival_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    span_s: float  # the time the trace covers (>= the last arrival)
    epoch_s: float  # Unix time of arrival 0 (for cron windows and the calendar)

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    def per_minute_rps(self) -> FloatArray:
        """Request rate of each minute of the span (arrivals / 60)."""
        minutes = max(1, math.ceil(self.span_s / 60.0))
        index = np.minimum((self.arrival_s // 60.0).astype(np.int64), minutes - 1)
        return np.bincount(index, minlength=minutes).astype(np.float64) / 60.0

    def peak_minute_rps(self) -> float:
        rates = self.per_minute_rps()
        return float(rates.max()) if rates.size else 0.0


@dataclass(frozen=True)
class RateSeries:
    window_start_s: FloatArray
    window_s: FloatArray
    rate_rps: FloatArray
    cv: FloatArray | None


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


def read_mooncake(path: Path) -> tuple[FloatArray, IntArray, IntArray, float | None]:
    stamps: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                stamps.append(float(record["timestamp"]) / 1000.0)
                inputs.append(int(record["input_length"]))
                outputs.append(int(record["output_length"]))
            except (ValueError, KeyError, TypeError) as error:
                raise TraceError(f"{path}:{number}: bad Mooncake record: {error}") from None
    if not stamps:
        raise TraceError(f"{path}: no records")
    arrival = np.asarray(stamps, dtype=np.float64)
    arrival -= arrival.min()
    return arrival, np.asarray(inputs, dtype=np.int64), np.asarray(outputs, dtype=np.int64), None


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


def lognormal_tokens(
    percentiles: TokenPercentiles, count: int, rng: np.random.Generator, cap_tokens: int | None = None
) -> IntArray:
    """Token counts from a log-normal fitted to p50 and p95, clipped to [1, 4 x p99]."""
    mu = math.log(percentiles.p50)
    sigma = max(1e-6, math.log(max(percentiles.p95, percentiles.p50) / percentiles.p50) / _Z_95)
    values = rng.lognormal(mu, sigma, size=count)
    high = 4 * percentiles.p99 if cap_tokens is None else min(cap_tokens, 4 * percentiles.p99)
    return np.clip(np.rint(values), 1, max(1, high)).astype(np.int64)


def synthesize(
    series: RateSeries,
    input_tokens: TokenPercentiles,
    output_tokens: TokenPercentiles,
    *,
    rate_scale: float,
    rng: np.random.Generator,
    arrivals: Literal["poisson", "gamma"] = "poisson",
) -> tuple[FloatArray, IntArray, IntArray]:
    """Requests for a rate series: count ~ Poisson(rate x width) per window, then
    Poisson (uniform order statistics) or gamma-renewal arrival times inside it."""
    means = series.rate_rps * rate_scale * series.window_s
    counts = rng.poisson(means)
    total = int(counts.sum())
    starts = np.repeat(series.window_start_s, counts)
    widths = np.repeat(series.window_s, counts)
    if arrivals == "gamma" and series.cv is not None:
        offsets = _gamma_offsets(counts, series.cv, rng)
    else:
        offsets = rng.random(total)
    arrival = starts + offsets * widths
    arrival.sort()
    return arrival, lognormal_tokens(input_tokens, total, rng), lognormal_tokens(output_tokens, total, rng)


def _gamma_offsets(counts: IntArray, cvs: FloatArray, rng: np.random.Generator) -> FloatArray:
    """Positions in [0, 1) of each window's arrivals from a gamma renewal process whose
    gaps have the window's coefficient of variation (>= 1 means burstier than Poisson)."""
    parts: list[FloatArray] = []
    for count, cv in zip(counts.tolist(), cvs.tolist(), strict=True):
        if count == 0:
            continue
        shape = 1.0 / max(0.05, min(cv, 10.0)) ** 2
        gaps = rng.gamma(shape, 1.0, size=count + 1)
        cumulative = np.cumsum(gaps)
        parts.append(cumulative[:-1] / cumulative[-1])
    return np.concatenate(parts) if parts else np.zeros(0)


def scale_requests(
    arrival: FloatArray, inputs: IntArray, outputs: IntArray, rate_scale: float, rng: np.random.Generator
) -> tuple[FloatArray, IntArray, IntArray]:
    """Scale a per-request trace's load by `rate_scale`: below 1 keep each request with
    that probability; above 1 each request gets floor(x) copies (plus one with the
    fractional probability), each copy placed at a random point in the gap to the next
    request, so the minute-scale shape stays and no artificial simultaneous bursts appear."""
    if rate_scale == 1.0:
        return arrival, inputs, outputs
    n = arrival.shape[0]
    whole = math.floor(rate_scale)
    copies = np.full(n, whole, dtype=np.int64) + (rng.random(n) < rate_scale - whole)
    index = np.repeat(np.arange(n), copies)
    gaps = np.diff(arrival, append=arrival[-1] if n else 0.0)
    first_copy = np.zeros(index.shape[0], dtype=bool)
    if index.size:
        first_copy[0] = True
        first_copy[1:] = index[1:] != index[:-1]
    jitter = np.where(first_copy, 0.0, rng.random(index.shape[0]) * gaps[index])
    times = arrival[index] + jitter
    order = np.argsort(times, kind="stable")
    return times[order], inputs[index][order], outputs[index][order]


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
    if fmt == "rates":
        if input_tokens is None or output_tokens is None:
            raise TraceError("a rate series needs token percentiles (the spec's workload) to draw lengths")
        series = read_rate_series(path)
        arrival, inputs, outputs = synthesize(
            series, input_tokens, output_tokens, rate_scale=rate_scale, rng=rng, arrivals=arrivals
        )
        span = float((series.window_start_s + series.window_s).max() - min(0.0, series.window_start_s.min()))
    else:
        reader = {"azure": read_azure, "burstgpt": read_burstgpt, "mooncake": read_mooncake}[fmt]
        arrival, inputs, outputs, native_epoch = reader(path)
        order = np.argsort(arrival, kind="stable")
        arrival, inputs, outputs = arrival[order], inputs[order], outputs[order]
        arrival, inputs, outputs = scale_requests(arrival, inputs, outputs, rate_scale, rng)
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
    )


def epoch_of(text: str) -> float:
    """Parse an ISO 8601 time (`--start`) into Unix seconds; naive times are UTC."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TraceError(f"--start {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
