"""Synthetic traces for the simulator: arrivals and token lengths given outright.

a_trace([0.0, 1.0, 1.5], output_tokens=11, span_s=60.0)
a_trace(arrivals, input_tokens=[800, 3000, 800], output_tokens=100, span_s=3600.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from inferfleet.autoscaling.simulate.traces import Trace

# A Monday, 00:00 UTC: cron windows and the calendar read the trace from there.
EPOCH_S = 1_704_067_200.0


def _lengths(tokens: int | Sequence[int], count: int) -> np.ndarray:
    if isinstance(tokens, int):
        return np.full(count, tokens, dtype=np.int64)
    assert len(tokens) == count, "one length per arrival"
    return np.asarray(tokens, dtype=np.int64)


def a_trace(
    arrivals_s: Sequence[float],
    *,
    output_tokens: int | Sequence[int],
    span_s: float,
    input_tokens: int | Sequence[int] = 1,
    name: str = "synthetic",
) -> Trace:
    """Requests arriving at `arrivals_s` (sorted), with one length or one per request."""
    count = len(arrivals_s)
    return Trace(
        name=name,
        format="test",
        arrival_s=np.asarray(arrivals_s, dtype=np.float64),
        input_tokens=_lengths(input_tokens, count),
        output_tokens=_lengths(output_tokens, count),
        span_s=span_s,
        epoch_s=EPOCH_S,
    )


def bursts(
    starts_s: Sequence[float],
    *,
    per_burst: int = 12,
    gap_s: float = 0.5,
    prompt_tokens: int | Sequence[int] = 800,
    output_tokens: int = 100,
    span_s: float | None = None,
) -> Trace:
    """Bursts of `per_burst` requests `gap_s` apart, separated by long silences (the
    fleet scales to zero between); the trace lasts an hour past the last burst."""
    arrivals = [start + j * gap_s for start in starts_s for j in range(per_burst)]
    return a_trace(
        arrivals,
        input_tokens=prompt_tokens,
        output_tokens=output_tokens,
        span_s=span_s or starts_s[-1] + 3600.0,
        name="bursty",
    )
