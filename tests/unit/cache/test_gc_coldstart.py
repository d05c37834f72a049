"""LRU garbage-collection plans and cold-start estimates (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet.cache.coldstart import cold_start
from inferfleet.cache.gc import CachedRevision, plan_gc

GIB = 1024**3

revisions = st.lists(
    st.builds(
        CachedRevision,
        model_key=st.sampled_from(["a", "b", "c"]),
        revision_id=st.text(alphabet="0123456789abcdef", min_size=4, max_size=8),
        size_bytes=st.integers(0, 100 * GIB),
        last_used_s=st.floats(0, 1e6),
        in_use=st.booleans(),
    ),
    max_size=12,
    unique_by=lambda r: r.key,
)


@given(revisions, st.integers(0, 300 * GIB), st.integers(0, 50 * GIB))
def test_gc_never_evicts_in_use_or_protected_and_stops_at_budget(
    found: list[CachedRevision], budget: int, needed: int
) -> None:
    protect = frozenset(r.key for r in found[:1])
    plan = plan_gc(found, budget, protect, needed)
    for victim in plan.evict:
        assert not victim.in_use and victim.key not in protect
    assert plan.used_bytes_after == plan.used_bytes_before - sum(v.size_bytes for v in plan.evict)
    evictable = [r for r in found if not r.in_use and r.key not in protect]
    if plan.used_bytes_after > budget - needed:
        assert len(plan.evict) == len(evictable)  # it only stops short when nothing is left
    elif plan.evict:
        # Minimal: without the last victim the target was not yet met.
        assert plan.used_bytes_after + plan.evict[-1].size_bytes > budget - needed


def test_gc_is_lru() -> None:
    found = [
        CachedRevision("m", "new", 10, last_used_s=300),
        CachedRevision("m", "old", 10, last_used_s=100),
        CachedRevision("m", "oldest-but-serving", 10, last_used_s=1, in_use=True),
        CachedRevision("m", "mid", 10, last_used_s=200),
    ]
    plan = plan_gc(found, budget_bytes=25)
    assert [v.revision_id for v in plan.evict] == ["old", "mid"]
    assert plan.over_budget_bytes == 0
    tight = plan_gc(found, budget_bytes=5)
    assert [v.revision_id for v in tight.evict] == ["old", "mid", "new"]
    assert tight.over_budget_bytes == 5 and "over budget" in tight.summary()


def test_cold_start_from_nvme_is_seconds_and_from_object_store_minutes() -> None:
    weights = 70 * 10**9  # a 70B model in FP8
    local = cold_start(weights, cached=True, container_start_s=0, engine_init_s=0)
    assert local.seconds == pytest.approx(5.6)  # field guide 2.1: ~6 s at 12.5 GB/s
    remote = cold_start(weights, cached=False, container_start_s=0, engine_init_s=0)
    assert 60 < remote.fetch_s < 300 and remote.seconds > 10 * local.seconds
    measured = cold_start(weights, cached=True, read_bytes_per_s=2e9, container_start_s=0, engine_init_s=0)
    assert measured.seconds == pytest.approx(35.0)
    assert "node cache" in local.reason and "pulled" in remote.reason
    with pytest.raises(ValueError):
        cold_start(-1, cached=True)
