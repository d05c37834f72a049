"""Request-rate history kept between autoscaler loops (pure: no I/O, clock passed in).

The forecaster wants up to weeks of per-minute history, but refetching that every loop
would cost more than everything else the loop does. The cache keeps what it has on a
step-aligned grid (one flat float array per InferenceService, NaN where Prometheus had
no point) and asks only for the steps completed since the last fetch: one small range
query per step in steady state.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.autoscaling.promql.parse import ServiceKey
from inferfleet.autoscaling.promql.queries import align_down

# Prometheus refuses range queries of more than 11,000 points per series.
MAX_POINTS_PER_QUERY = 10_000
_NAN = math.nan


@dataclass(frozen=True)
class FetchRange:
    """One range query to make: points at start_s, start_s + step_s, ..., end_s."""

    start_s: float
    end_s: float
    step_s: int

    @property
    def points(self) -> int:
        return int((self.end_s - self.start_s) // self.step_s) + 1


class RateHistoryCache:
    """Per-service request rate on a shared grid over the last `retention_s`.

    The grid is `[first_s, first_s + step, ..., last_s]`; every series has one value
    per grid point, NaN for "no data", so a window is a slice and needs no searching.
    """

    def __init__(self, step_s: int, retention_s: float) -> None:
        if step_s <= 0 or retention_s <= 0:
            raise ValueError("step_s and retention_s must be positive")
        self.step_s = step_s
        self.retention_s = retention_s
        self._series: dict[ServiceKey, array[float]] = {}
        self._first_s: float | None = None
        self._last_s: float | None = None

    @property
    def fetched_until_s(self) -> float | None:
        return self._last_s

    def _length(self) -> int:
        if self._first_s is None or self._last_s is None:
            return 0
        return round((self._last_s - self._first_s) / self.step_s) + 1

    def set_retention(self, retention_s: float) -> None:
        """Widen or narrow what is kept; widening refetches everything next time."""
        if retention_s <= 0:
            raise ValueError("retention_s must be positive")
        if retention_s > self.retention_s:
            self._series.clear()
            self._first_s = self._last_s = None
        self.retention_s = retention_s

    def next_fetches(self, now_s: float) -> list[FetchRange]:
        """The ranges that bring the cache up to the last completed step (empty: up to date).

        A first start with a long retention, or a long Prometheus outage, needs more
        points than one query may return; the gap is split into several ranges.
        """
        end_s = align_down(now_s, self.step_s)
        if self._last_s is None:
            start_s = align_down(now_s - self.retention_s, self.step_s) + self.step_s
        else:
            # After an outage longer than the retention, only the retention is worth asking for.
            start_s = max(self._last_s + self.step_s, align_down(now_s - self.retention_s, self.step_s))
        ranges: list[FetchRange] = []
        while start_s <= end_s:
            chunk_end_s = min(end_s, start_s + (MAX_POINTS_PER_QUERY - 1) * self.step_s)
            ranges.append(FetchRange(start_s, chunk_end_s, self.step_s))
            start_s = chunk_end_s + self.step_s
        return ranges

    def merge(
        self,
        fetched: Sequence[FetchRange],
        series: Mapping[ServiceKey, Sequence[tuple[float, float]]],
        now_s: float,
    ) -> None:
        """Store the answers to `fetched` (as `next_fetches` gave them), then trim to the retention."""
        if not fetched:
            return
        new_last_s = max(r.end_s for r in fetched)
        if self._first_s is None:
            self._first_s = min(r.start_s for r in fetched)
        old_length = self._length()
        self._last_s = max(new_last_s, self._last_s or new_last_s)
        grow = self._length() - old_length
        first_s = self._first_s
        for stored in self._series.values():
            stored.extend([_NAN] * grow)
        length = self._length()
        for key, points in series.items():
            values = self._series.get(key)
            if values is None:
                values = self._series[key] = array("d", [_NAN] * length)
            for timestamp_s, value in points:
                index = round((timestamp_s - first_s) / self.step_s)
                if 0 <= index < length and math.isfinite(value):
                    values[index] = value
        self._trim(now_s)

    def _trim(self, now_s: float) -> None:
        if self._first_s is None:
            return
        cutoff_s = now_s - self.retention_s
        drop = max(0, math.ceil((cutoff_s - self._first_s) / self.step_s))
        drop = min(drop, self._length())
        if drop:
            self._first_s += drop * self.step_s
            for values in self._series.values():
                del values[:drop]
        # A service with nothing but gaps left (deleted long ago) is forgotten.
        for key in [key for key, values in self._series.items() if all(math.isnan(v) for v in values)]:
            del self._series[key]

    def window(self, key: ServiceKey, now_s: float, window_s: float) -> Sequence[float]:
        """The service's rate per step over the last `window_s`, oldest first.

        The last value is the last completed step before `now_s`; steps the cache has
        not fetched yet (Prometheus unreachable) are NaN, so the forecaster sees a gap
        rather than stale data passing for current.
        """
        values = self._series.get(key)
        if values is None or self._first_s is None or self._last_s is None:
            return ()
        end_s = align_down(now_s, self.step_s)
        missing_tail = max(0, round((end_s - self._last_s) / self.step_s))
        wanted = max(1, int(window_s // self.step_s))
        start_index = max(0, len(values) + missing_tail - wanted)
        if missing_tail == 0 and start_index == 0:
            return values  # the whole array: no copy (decide() never mutates its input)
        out = values[start_index:]
        out.extend([_NAN] * min(missing_tail, wanted))
        return out

    def service_keys(self) -> list[ServiceKey]:
        return sorted(self._series)

    def points(self) -> int:
        return sum(len(values) for values in self._series.values())
