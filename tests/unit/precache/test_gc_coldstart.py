"""LRU garbage-collection plans and cold-start estimates (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet.api import load_all
from inferfleet.caching.precache import coldstart
from inferfleet.caching.precache.coldstart import cold_start
from inferfleet.caching.precache.gc import CachedRevision, plan_gc
from inferfleet.planner import MeasuredColdStart, plan_service
from tests.conftest import EXAMPLES_DIR

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
    assert local.seconds == pytest.approx(5.6)  # ~6 s at 12.5 GB/s (local NVMe)
    remote = cold_start(weights, cached=False, container_start_s=0, engine_init_s=0)
    assert 60 < remote.fetch_s < 300 and remote.seconds > 10 * local.seconds
    measured = cold_start(weights, cached=True, read_bytes_per_s=2e9, container_start_s=0, engine_init_s=0)
    assert measured.seconds == pytest.approx(35.0)
    assert "node cache" in local.reason and "pulled" in remote.reason
    with pytest.raises(ValueError):
        cold_start(-1, cached=True)


def _serving_pod(tier: str, started: str, ready: str | None, restarts: int = 0) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready}] if ready else []
    return {
        "metadata": {"labels": {"inferfleet.dev/tier": tier}},
        "status": {
            "conditions": conditions,
            "containerStatuses": [
                {"name": "cache-hold", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "vllm", "restartCount": restarts, "state": {"running": {"startedAt": started}}},
            ],
        },
    }


def test_measured_cold_start_is_the_median_start_to_ready_of_clean_starts() -> None:
    pods = [
        _serving_pod("l4", "2026-01-01T00:00:00Z", "2026-01-01T00:00:40Z"),
        _serving_pod("l4", "2026-01-01T00:10:00Z", "2026-01-01T00:10:50Z"),
        _serving_pod("l4", "2026-01-01T00:20:00Z", "2026-01-01T00:21:30Z"),
        _serving_pod("l4", "2026-01-01T00:30:00Z", None),  # still starting: no figure yet
        _serving_pod("l4", "2026-01-01T00:40:00Z", "2026-01-01T00:49:00Z", restarts=1),  # Ready ≠ this start
        _serving_pod("h100", "2026-01-01T00:00:00Z", "2026-01-01T00:00:20Z"),
    ]
    measured = coldstart.measured_cold_starts(pods, container="vllm", tier_label="inferfleet.dev/tier")
    assert measured == {"h100": MeasuredColdStart(20.0, 1), "l4": MeasuredColdStart(50.0, 3)}


def test_the_plan_takes_the_measured_cold_start_and_says_so() -> None:
    svc = load_all((EXAMPLES_DIR / "llama-8b-chat.yaml").read_text(), source="example")[0]
    estimated = plan_service(svc)
    measured = plan_service(svc, observed={"l4": MeasuredColdStart(seconds=42.4, samples=3)})
    l4, burst = measured.tiers
    assert l4.cold_start_seconds == l4.first_start_seconds == 42.4
    assert not l4.compile_cache_warm  # no node has shown a warm compile cache: the first start
    reason = next(r for r in l4.reasons if r.startswith("cold start"))
    assert "measured" in reason and "3 serving pod(s)" in reason
    assert f"estimate was ~{estimated.tiers[0].cold_start_seconds:.0f} s" in reason
    assert sum(r.startswith("cold start") for r in l4.reasons) == 1
    # A tier nobody has measured keeps the estimate; nothing else in the plan moves.
    assert burst == estimated.tiers[1]
    unmeasured = {"cold_start_seconds": 0, "first_start_seconds": 0, "reasons": []}
    assert l4.model_copy(update=unmeasured) == estimated.tiers[0].model_copy(update=unmeasured)
