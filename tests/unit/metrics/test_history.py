"""The request-rate history cache: incremental fetches on a step grid."""

from __future__ import annotations

import pytest

from inferfleet.metrics.history import MAX_POINTS_PER_QUERY, FetchRange, RateHistoryCache
from inferfleet.metrics.parse import TierKey

KEY = TierKey("ns", "svc", "h100")


def points(start: float, end: float, step: int, value: float = 1.0) -> list[tuple[float, float]]:
    return [(float(t), value) for t in range(int(start), int(end) + 1, step)]


def test_first_fetch_covers_the_retention_then_only_new_steps() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    first = cache.next_fetch(now_s=1030.0)
    assert first == FetchRange(start_s=480.0, end_s=1020.0, step_s=60)
    cache.merge(first, {KEY: points(480, 1020, 60)}, now_s=1030.0)
    # Same step: nothing new to ask for.
    assert cache.next_fetch(now_s=1075.0) is None
    second = cache.next_fetch(now_s=1085.0)
    assert second == FetchRange(1080.0, 1080.0, 60)
    cache.merge(second, {KEY: [(1020.0, 9.0), (1080.0, 2.0)]}, now_s=1085.0)
    window = cache.window(KEY, now_s=1085.0, window_s=120)
    # The overlap point at 1020 is not duplicated or overwritten.
    assert window == ((1020.0, 1.0), (1080.0, 2.0))


def test_old_points_and_vanished_tiers_are_forgotten() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=300)
    gone = TierKey("ns", "gone", "l4")
    fetch = cache.next_fetch(now_s=600.0)
    assert fetch is not None
    cache.merge(fetch, {KEY: points(fetch.start_s, fetch.end_s, 60), gone: [(fetch.start_s, 1.0)]}, 600.0)
    later = cache.next_fetch(now_s=1000.0)
    assert later is not None
    cache.merge(later, {KEY: points(later.start_s, later.end_s, 60)}, now_s=1000.0)
    assert cache.tier_keys() == [KEY]
    assert all(t >= 700.0 for t, _ in cache.window(KEY, 1000.0, 10_000))


def test_long_gaps_are_split_under_the_prometheus_point_limit() -> None:
    cache = RateHistoryCache(step_s=1, retention_s=50_000)
    fetch = cache.next_fetch(now_s=100_000.0)
    assert fetch is not None
    assert fetch.points == MAX_POINTS_PER_QUERY


def test_merge_refuses_a_gap() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    fetch = cache.next_fetch(1000.0)
    assert fetch is not None
    cache.merge(fetch, {}, 1000.0)
    with pytest.raises(ValueError):
        cache.merge(FetchRange(fetch.end_s + 600, fetch.end_s + 600, 60), {}, 2000.0)


def test_widening_retention_refetches() -> None:
    cache = RateHistoryCache(step_s=60, retention_s=600)
    fetch = cache.next_fetch(1000.0)
    assert fetch is not None
    cache.merge(fetch, {}, 1000.0)
    cache.set_retention(1200)
    again = cache.next_fetch(1000.0)
    assert again is not None and again.start_s < fetch.start_s


def test_window_of_unknown_tier_is_empty() -> None:
    assert RateHistoryCache(60, 600).window(KEY, 0.0, 60) == ()
