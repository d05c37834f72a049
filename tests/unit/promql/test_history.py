"""The request-rate history cache: a per-service minute grid fetched incrementally."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from inferfleet.autoscaling.promql.history import MAX_POINTS_PER_QUERY, FetchRange, RateHistoryCache
from inferfleet.autoscaling.promql.parse import ServiceKey

KEY = ServiceKey("ns", "svc")


def points(fetch: FetchRange, value: float = 1.0) -> list[tuple[float, float]]:
    return [(fetch.start_s + i * fetch.step_s, value) for i in range(fetch.points)]


def nan_positions(values: Sequence[float]) -> list[int]:
    return [i for i, v in enumerate(values) if math.isnan(v)]


def test_first_fetch_covers_the_retention_then_only_new_steps() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    first = cache.next_fetches(now_s=1030.0)
    assert first == [FetchRange(start_s=480.0, end_s=1020.0, step_s=60)]
    cache.merge(first, {KEY: points(first[0])}, now_s=1030.0)
    assert cache.next_fetches(now_s=1075.0) == []  # same step: nothing new
    second = cache.next_fetches(now_s=1085.0)
    assert second == [FetchRange(1080.0, 1080.0, 60)]
    cache.merge(second, {KEY: [(1080.0, 2.0)]}, now_s=1085.0)
    window = cache.window(KEY, now_s=1085.0, window_s=180)
    assert list(window) == [1.0, 1.0, 2.0]


def test_gaps_are_nan_and_the_tail_is_padded_while_prometheus_is_away() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    fetches = cache.next_fetches(1030.0)
    cache.merge(fetches, {KEY: [(480.0, 1.0), (600.0, 3.0)]}, 1030.0)
    window = cache.window(KEY, 1030.0, 600)
    assert len(window) == 10
    assert window[0] == 1.0 and window[2] == 3.0
    assert nan_positions(window) == [1, *range(3, 10)]
    # Three steps later with no fetch: the last three entries are gaps, length unchanged.
    later = cache.window(KEY, 1030.0 + 180, 600)
    assert len(later) == 10 and nan_positions(later)[-3:] == [7, 8, 9]


def test_new_service_joins_the_grid_and_old_ones_are_forgotten() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=300)
    gone = ServiceKey("ns", "gone")
    first = cache.next_fetches(600.0)
    cache.merge(first, {KEY: points(first[0]), gone: [(first[0].start_s, 1.0)]}, 600.0)
    later = cache.next_fetches(1000.0)
    new = ServiceKey("ns", "new")
    cache.merge(later, {KEY: points(later[0]), new: [(later[0].end_s, 5.0)]}, 1000.0)
    assert cache.service_keys() == sorted([KEY, new])
    assert len(cache.window(KEY, 1000.0, 10_000)) == 5
    assert cache.window(new, 1000.0, 120)[-1] == 5.0


def test_long_gaps_are_split_under_the_prometheus_point_limit() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=14 * 86_400)
    fetches = cache.next_fetches(now_s=2_000_000_000.0)
    assert len(fetches) == 3
    assert [f.points for f in fetches][:2] == [MAX_POINTS_PER_QUERY, MAX_POINTS_PER_QUERY]
    assert sum(f.points for f in fetches) == 14 * 1440
    for before, after in itertools.pairwise(fetches):
        assert after.start_s == before.end_s + 60


def test_outage_longer_than_retention_asks_only_for_the_retention() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    cache.merge(cache.next_fetches(1000.0), {KEY: [(960.0, 1.0)]}, 1000.0)
    fetches = cache.next_fetches(100_000.0)
    assert sum(f.points for f in fetches) <= 11


def test_widening_retention_refetches() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    cache.merge(cache.next_fetches(1000.0), {KEY: [(960.0, 1.0)]}, 1000.0)
    cache.set_retention(1200)
    assert cache.next_fetches(1000.0)[0].start_s == -180.0
    assert cache.service_keys() == []


def test_window_of_unknown_service_is_empty() -> None:
    assert RateHistoryCache(60, 600).window(KEY, 0.0, 60) == ()
