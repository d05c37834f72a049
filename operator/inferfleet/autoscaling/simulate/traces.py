"""Traces as data (pure): one `Trace` (numpy arrays) from published request-arrival
formats, read from files by inferfleet.autoscaling.tracefiles.

Formats are read as their publishers ship them (docs/concepts/autoscaling.md lists them):

- `azure`: Azure LLM inference traces 2023/2024, CSV `TIMESTAMP,ContextTokens,GeneratedTokens`
  (timestamps like `2023-11-16 18:17:03.9799600`, up to 7 fractional digits);
- `burstgpt`: BurstGPT CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
  (seconds from the start of the trace);
- `mooncake`: Mooncake / Kimi JSONL, one `{"timestamp": ms, "input_length", "output_length", ...}`
  per line; its `hash_ids` (one id per 512-token block of the prompt, equal ids for equal
  prefixes) are kept as the requests' prefix blocks, which the prefix-cache replay reads
  (simulate.prefix_cache);
- `rates`: a rate series, CSV with `window_start_s`, `window_s` and a rate column
  (`total_rate_rps`, `rate_rps` or `rate`), like the 14-day ServeGen aggregate. Arrivals
  are synthesized inside each window (a Poisson process, or a gamma renewal process
  with the file's coefficient of variation) and token lengths drawn from the spec's
  workload percentiles.

`--rate-scale` multiplies the load and `--time-scale` stretches time (2 = the same
requests over twice the span). Everything random is seeded, so a run is repeatable.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from inferfleet.api.spec import TokenPercentiles

TraceFormat = Literal["auto", "azure", "burstgpt", "mooncake", "rates"]
FORMATS: tuple[str, ...] = ("auto", "azure", "burstgpt", "mooncake", "rates")
# When a trace carries no calendar date, time 0 is Monday 2024-01-01 00:00 UTC, so
# cron pre-warm windows and weekly seasonality line up with something plausible.
DEFAULT_EPOCH_S = 1_704_067_200.0
_Z_95 = 1.6448536269514722

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class TraceError(ValueError):
    """The trace cannot be read (missing file, unknown format, bad rows)."""


# Mooncake's published traces hash prompts in blocks of this many tokens.
MOONCAKE_BLOCK_TOKENS = 512
# The most block ids one request may carry (a 10M-token prompt at 512 per block): a
# hostile file cannot make the replay hold more than the prompts it describes.
MAX_BLOCKS_PER_REQUEST = 20_000


@dataclass(frozen=True)
class PrefixBlocks:
    """Every request's prompt as a chain of block ids (CSR layout: request i's blocks are
    `ids[starts[i]:starts[i + 1]]`); two requests share a prefix exactly as far as their
    leading ids agree. A request's last block may be partial."""

    ids: IntArray
    starts: IntArray
    block_tokens: int

    def of(self, index: IntArray) -> PrefixBlocks:
        """The blocks of requests `index` (reordered, some left out or repeated), in that
        order. A request repeated (a `--rate-scale` copy) shares what it shares with other
        requests (system prompt, document), but its own blocks are new in every copy: a
        copy is another question about the same document, not the same prompt again,
        which would be all cache hits. Ids come back renumbered (only equality counts)."""
        lengths = (self.starts[1:] - self.starts[:-1])[index]
        starts = np.zeros(index.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        if index.size == 0 or self.ids.size == 0:
            return PrefixBlocks(np.zeros(int(starts[-1]), dtype=np.int64), starts, self.block_tokens)
        offsets = np.arange(int(starts[-1]), dtype=np.int64) - np.repeat(starts[:-1], lengths)
        source = np.repeat(self.starts[:-1][index], lengths) + offsets
        _, dense, counts = np.unique(self.ids, return_inverse=True, return_counts=True)
        distinct = int(counts.shape[0])
        # Which copy of its request each row is (0: the first).
        order = np.argsort(index, kind="stable")
        ranked = index[order]
        first = np.ones(ranked.shape[0], dtype=bool)
        first[1:] = ranked[1:] != ranked[:-1]
        positions = np.arange(ranked.shape[0], dtype=np.int64)
        copy = np.empty_like(positions)
        copy[order] = positions - np.maximum.accumulate(np.where(first, positions, 0))
        ids = dense[source].astype(np.int64)
        own = counts[dense[source]] == 1  # a block no other request carries
        ids = np.where(own, ids + distinct * np.repeat(copy, lengths), ids)
        return PrefixBlocks(ids, starts, self.block_tokens)


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
    # Prompt tokens each request's engine prefills itself (None: all of them). A decode
    # pod of a prefill/decode split prefills none of a prompt another pod prefilled for it.
    prefill_tokens: IntArray | None = None
    # Each request's prompt as prefix-cache blocks (None: the trace does not say).
    prefix_blocks: PrefixBlocks | None = None

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
    """Scale a per-request trace's load by `rate_scale` (see scaled_order)."""
    if rate_scale == 1.0:
        return arrival, inputs, outputs
    times, index = scaled_order(arrival, rate_scale, rng)
    return times, inputs[index], outputs[index]


def scaled_order(
    arrival: FloatArray, rate_scale: float, rng: np.random.Generator
) -> tuple[FloatArray, IntArray]:
    """The arrivals of a trace scaled by `rate_scale`, and which request each one is a
    copy of: below 1 keep each request with that probability; above 1 each request gets
    floor(x) copies (plus one with the fractional probability), each copy placed at a
    random point in the gap to the next request, so the minute-scale shape stays and no
    artificial simultaneous bursts appear."""
    n = arrival.shape[0]
    if rate_scale == 1.0:
        return arrival, np.arange(n, dtype=np.int64)
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
    return times[order], index[order].astype(np.int64)


def epoch_of(text: str) -> float:
    """Parse an ISO 8601 time (`--start`) into Unix seconds; naive times are UTC."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TraceError(f"--start {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
