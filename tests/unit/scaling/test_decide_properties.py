"""Properties of decide() over arbitrary contexts: bounds, the warm minimum, and no
scale-down under a sustained breach, whatever the metrics say (missing, NaN, inf)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from inferfleet.autoscaling.policy import (
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierSignals,
    decide,
)
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy
from tests.toolkit.step import tier_signals

T0 = 1_704_283_200.0  # 2024-01-03 12:00 UTC
PERIOD_S = 15.0

# A metric as the edge may hand it over: unread, a plausible reading, or garbage.
_READING = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
_METRIC = st.one_of(st.none(), _READING, st.just(math.nan), st.just(math.inf))
_HISTORY_POINT = st.one_of(_READING, st.just(math.nan), st.just(math.inf))


@st.composite
def _tier(draw: st.DrawFn, name: str) -> tuple[TierPolicy, TierFigures]:
    min_replicas = draw(st.integers(0, 5))
    max_replicas = draw(st.integers(max(1, min_replicas), 40))
    figures = TierFigures(
        name=name,
        usable_rps=draw(st.floats(0.0, 50.0)),
        cold_start_s=draw(st.floats(0.0, 900.0)),
        max_concurrency=draw(st.sampled_from([1.0, 8.0, 32.0, 256.0])),
        replicas_for_peak=draw(st.one_of(st.none(), st.integers(1, 60))),
        cost_per_million_tokens_usd=draw(st.one_of(st.none(), st.floats(0.01, 10.0))),
        feasible=draw(st.booleans()),
    )
    return TierPolicy(name=name, min_replicas=min_replicas, max_replicas=max_replicas), figures


@st.composite
def _signals(draw: st.DrawFn, policy: TierPolicy) -> TierSignals:
    assert policy.max_replicas is not None
    # The workload may run outside the spec's bounds (they were just changed).
    replicas = st.integers(0, policy.max_replicas + 5)
    return tier_signals(
        ready_replicas=draw(st.one_of(st.none(), replicas)),
        desired_replicas=draw(st.one_of(st.none(), replicas)),
        waiting=draw(_METRIC),
        running=draw(_METRIC),
        ttft_p99_ms=draw(_METRIC),
        request_rate_rps=draw(_METRIC),
    )


@st.composite
def _service(draw: st.DrawFn) -> tuple[PolicyConfig, tuple[TierFigures, ...]]:
    tiers = [draw(_tier(name)) for name in draw(st.sampled_from([("h100",), ("h100", "l40s")]))]
    config = PolicyConfig(
        tiers=tuple(policy for policy, _ in tiers),
        ttft_target_ms=draw(st.floats(100.0, 10_000.0)),
        sync_period_s=PERIOD_S,
        headroom=draw(st.floats(0.0, 1.0)),
        headroom_mode=draw(st.sampled_from(["fixed", "measured"])),
        queue_depth_per_replica=draw(st.floats(1.0, 32.0)),
        predictive_enabled=draw(st.booleans()),
        scale_down=ScalePacing(draw(st.sampled_from([0.0, 60.0, 300.0])), 0.0, None),
    )
    return config, tuple(figures for _, figures in tiers)


def _context(
    data: st.DataObject, config: PolicyConfig, figures: tuple[TierFigures, ...], now_s: float
) -> ScalingContext:
    history = data.draw(st.one_of(st.none(), st.lists(_HISTORY_POINT, max_size=120)))
    return ScalingContext(
        now_s=now_s,
        policy=config,
        tiers=tuple(TierContext(f, data.draw(_signals(config.tiers[i]))) for i, f in enumerate(figures)),
        rate_history_rps=history,
    )


@given(st.data())
def test_replicas_stay_within_the_spec_bounds_and_the_warm_minimum(data: st.DataObject) -> None:
    config, figures = data.draw(_service())
    state: ScalingState | None = None
    for tick in range(data.draw(st.integers(1, 6))):
        ctx = _context(data, config, figures, T0 + tick * PERIOD_S)
        recommendation, state = decide(ctx, state)
        for policy, tier in zip(config.tiers, recommendation.tiers, strict=True):
            assert policy.max_replicas is not None
            assert policy.min_replicas <= tier.replicas <= policy.max_replicas, tier


@st.composite
def _breach(draw: st.DrawFn, policy: TierPolicy, config: PolicyConfig) -> TierSignals:
    """A queue past its allowance, or a TTFT p99 above the SLO with requests waiting."""
    assert policy.max_replicas is not None
    ready = draw(st.integers(max(1, policy.min_replicas), policy.max_replicas))
    queue_breach = draw(st.booleans())
    waiting = config.queue_depth_per_replica * ready + draw(st.floats(1.0, 1e4))
    return tier_signals(
        ready_replicas=ready,
        desired_replicas=draw(st.integers(ready, policy.max_replicas)),
        waiting=waiting if queue_breach else draw(st.floats(1.0, 1e4)),
        running=draw(_METRIC),
        ttft_p99_ms=draw(_METRIC) if queue_breach else config.ttft_target_ms * draw(st.floats(1.01, 10.0)),
        request_rate_rps=draw(_METRIC),
    )


@given(st.data())
def test_a_sustained_breach_never_scales_down(data: st.DataObject) -> None:
    config, figures = data.draw(_service())
    state: ScalingState | None = None
    for tick in range(data.draw(st.integers(2, 8))):
        signals = tuple(data.draw(_breach(policy, config)) for policy in config.tiers)
        ctx = ScalingContext(
            now_s=T0 + tick * PERIOD_S,
            policy=config,
            tiers=tuple(TierContext(f, s) for f, s in zip(figures, signals, strict=True)),
            rate_history_rps=data.draw(st.one_of(st.none(), st.lists(_HISTORY_POINT, max_size=120))),
        )
        recommendation, state = decide(ctx, state)
        for tier, seen in zip(recommendation.tiers, signals, strict=True):
            assert seen.desired_replicas is not None
            assert tier.replicas >= seen.desired_replicas, (tier, seen)


def test_a_garbage_reading_is_read_as_missing_and_the_others_are_kept() -> None:
    config = PolicyConfig(tiers=(TierPolicy("h100", min_replicas=2, max_replicas=8),), ttft_target_ms=2000.0)
    figures = TierFigures(name="h100", usable_rps=2.0, cold_start_s=120.0, max_concurrency=32.0)
    signals = tier_signals(
        ready_replicas=3, desired_replicas=3, waiting=math.inf, running=-1.0, ttft_p99_ms=math.nan
    )
    healthy = tier_signals(ready_replicas=3, desired_replicas=3, waiting=None, running=None, ttft_p99_ms=None)
    garbage, _ = decide(ScalingContext(T0, config, (TierContext(figures, signals),)))
    missing, _ = decide(ScalingContext(T0, config, (TierContext(figures, healthy),)))
    assert garbage == missing
    assert garbage.tiers[0].replicas == 3  # held: a garbage queue is no demand
