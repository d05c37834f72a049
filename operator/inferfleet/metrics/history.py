"""Request-rate history kept between autoscaler loops (pure: no I/O, clock passed in).

The forecaster wants days of history, but refetching a two-week range every 15 s would
cost more than everything else the loop does. The cache keeps the points it already
has on a step-aligned grid and asks only for the steps that completed since the last
fetch: one small range query per step, not one big one per loop.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.metrics.parse import TierKey
from inferfleet.metrics.queries import align_down

# Prometheus refuses range queries of more than 11,000 points per series.
MAX_POINTS_PER_QUERY = 10_000


@dataclass(frozen=True)
class FetchRange:
    """One range query to make: points at start_s, start_s + step_s, ..., end_s."""

    start_s: float
    end_s: float
    step_s: int

    @property
    def points(self) -> int:
        return int((self.end_s - self.start_s) // self.step_s) + 1


class _Series:
    """Time-ordered points in two flat arrays (16 bytes a point, not ~100 for tuples)."""

    __slots__ = ("_points", "times", "values")

    def __init__(self) -> None:
        self.times = array("d")
        self.values = array("d")
        self._points: tuple[tuple[float, float], ...] | None = None

    def points(self) -> tuple[tuple[float, float], ...]:
        # Built once per merge and shared by every loop until the next step completes.
        if self._points is None:
            self._points = tuple(zip(self.times, self.values, strict=True))
        return self._points

    def extend(self, points: Sequence[tuple[float, float]], after_s: float | None) -> None:
        for timestamp_s, value in points:
            if after_s is not None and timestamp_s <= after_s:
                continue
            if self.times and timestamp_s <= self.times[-1]:
                continue
            self.times.append(timestamp_s)
            self.values.append(value)
            self._points = None

    def trim_before(self, cutoff_s: float) -> None:
        index = 0
        while index < len(self.times) and self.times[index] < cutoff_s:
            index += 1
        if index:
            del self.times[:index]
            del self.values[:index]
            self._points = None


class RateHistoryCache:
    """Per-tier request-rate points over the last `retention_s`, fetched incrementally."""

    def __init__(self, step_s: int, retention_s: float) -> None:
        if step_s <= 0 or retention_s <= 0:
            raise ValueError("step_s and retention_s must be positive")
        self.step_s = step_s
        self.retention_s = retention_s
        self._series: dict[TierKey, _Series] = {}
        self._fetched_until_s: float | None = None

    @property
    def fetched_until_s(self) -> float | None:
        return self._fetched_until_s

    def set_retention(self, retention_s: float) -> None:
        """Widen or narrow what is kept; widening refetches from the new start next time."""
        if retention_s <= 0:
            raise ValueError("retention_s must be positive")
        if retention_s > self.retention_s:
            self._fetched_until_s = None
        self.retention_s = retention_s

    def next_fetch(self, now_s: float) -> FetchRange | None:
        """The range that would bring the cache up to the last completed step, if any."""
        end_s = align_down(now_s, self.step_s)
        if self._fetched_until_s is None:
            start_s = align_down(now_s - self.retention_s, self.step_s) + self.step_s
        else:
            start_s = self._fetched_until_s + self.step_s
        if start_s > end_s:
            return None
        # A long outage (or first start with a large window) is caught up over several
        # loops rather than in one query Prometheus would reject.
        last_allowed_s = start_s + (MAX_POINTS_PER_QUERY - 1) * self.step_s
        return FetchRange(start_s, min(end_s, last_allowed_s), self.step_s)

    def merge(
        self, fetched: FetchRange, series: Mapping[TierKey, Sequence[tuple[float, float]]], now_s: float
    ) -> None:
        """Add the answer to `fetched`; forget points and tiers older than the retention."""
        previous_s = self._fetched_until_s
        if previous_s is not None and fetched.start_s > previous_s + self.step_s:
            raise ValueError("fetched range leaves a gap; ask next_fetch() for the range")
        for key, points in series.items():
            self._series.setdefault(key, _Series()).extend(points, previous_s)
        self._fetched_until_s = fetched.end_s
        cutoff_s = now_s - self.retention_s
        for key in list(self._series):
            stored = self._series[key]
            stored.trim_before(cutoff_s)
            if not stored.times:
                del self._series[key]

    def window(self, key: TierKey, now_s: float, window_s: float) -> tuple[tuple[float, float], ...]:
        """Points of one tier newer than `now_s - window_s`, oldest first."""
        stored = self._series.get(key)
        if stored is None:
            return ()
        first = bisect.bisect_right(stored.times, now_s - window_s)
        points = stored.points()
        return points if first == 0 else points[first:]

    def tier_keys(self) -> list[TierKey]:
        return sorted(self._series)

    def points(self) -> int:
        return sum(len(stored.times) for stored in self._series.values())
