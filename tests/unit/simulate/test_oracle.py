"""The perfect-foresight oracle (autoscaling.simulate.oracle), on a hand-worked example.

One tier, 8 slots, prefill at 1,000 tokens/s, decode steps of 75 ms whatever the batch.
Every request has a 250-token prompt (0.25 s of prefill) and 26 output tokens (25 steps,
1.875 s of decode when prefill takes none of the GPU). At r requests/s on a replica,
prefill takes s = 0.25 r of the GPU, a step lasts 75 / (1 - s) ms and Little's law gives
the batch: r (0.25 + 1.875 / (1 - 0.25 r)).

- TTFT only: at r = 2, s = 0.5 and the batch is 2 x (0.25 + 3.75) = 8, every slot: a
  replica carries 2 req/s.
- With a 100 ms ITL SLO: a step at s = 0.5 lasts 150 ms, over it; at r = 1 it lasts
  75 / 0.75 = 100 ms, just within it (batch 2.75): a replica carries 1 req/s.

The trace: minutes at 1, 4, 0, 2 and 1 req/s.
"""

from __future__ import annotations

import numpy as np
import pytest

from inferfleet.autoscaling.policy import (
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierSignals,
)
from inferfleet.autoscaling.simulate.engine import ServingModel, SimConfig, SimTier, simulate
from inferfleet.autoscaling.simulate.oracle import (
    bin_mix,
    hold_for,
    perfect_foresight,
    replica_capacity_rps,
    replicas_needed,
)
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.design.policy_config import PolicyConfig, TierPolicy

RATES_RPS = (1, 4, 0, 2, 1)  # per minute
COLD_START_S = 60.0
PERIOD_S = 15.0


def a_tier(kv_tokens_per_slot: float = 0.0) -> SimTier:
    return SimTier(
        figures=TierFigures(name="t", usable_rps=1.0, cold_start_s=COLD_START_S, max_concurrency=8.0),
        serving=ServingModel(1000.0, decode_step_base_ms=75.0, decode_step_per_seq_ms=0.0),
        slots=8,
        kv_tokens_per_slot=kv_tokens_per_slot,
    )


def a_config(tier: SimTier | None = None, *, min_replicas: int = 0) -> SimConfig:
    return SimConfig(
        tiers=(tier or a_tier(),),
        policy=PolicyConfig(
            tiers=(TierPolicy("t", min_replicas=min_replicas, max_replicas=10),),
            ttft_target_ms=1000.0,
            sync_period_s=PERIOD_S,
        ),
        ttft_slo_ms=1000.0,
        itl_slo_ms=100.0,
        timeline=False,
    )


def a_trace(rates: tuple[int, ...] = RATES_RPS) -> Trace:
    """Each minute's requests evenly spread over it."""
    arrivals = np.concatenate(
        [minute * 60.0 + np.arange(rate * 60) / max(rate, 1) for minute, rate in enumerate(rates)]
    )
    count = arrivals.shape[0]
    return Trace(
        name="hand-worked",
        format="azure",
        arrival_s=arrivals,
        input_tokens=np.full(count, 250, dtype=np.int64),
        output_tokens=np.full(count, 26, dtype=np.int64),
        span_s=60.0 * len(rates),
        epoch_s=1_000.0,
    )


def test_a_replica_carries_what_its_slots_and_the_itl_slo_allow() -> None:
    tier = a_tier()
    mix = bin_mix(a_trace(), tier)
    assert mix.rate_rps.tolist() == [1.0, 4.0, 0.0, 2.0, 1.0]
    busy = mix.rate_rps > 0
    assert mix.prefill_s[busy] == pytest.approx(0.25)
    assert mix.steps[busy] == pytest.approx(25.0)
    assert replica_capacity_rps(tier, mix)[busy] == pytest.approx(2.0, rel=1e-6)  # every slot busy
    assert replica_capacity_rps(tier, mix, itl_slo_ms=100.0)[busy] == pytest.approx(1.0, rel=1e-6)


def test_a_long_context_holds_several_slots() -> None:
    # A slot's share of the KV cache is 100 tokens: each 276-token context holds 3 slots,
    # so the busy slots are 3 x the batch.
    tier = a_tier(kv_tokens_per_slot=100.0)
    mix = bin_mix(a_trace(), tier)
    capacity = replica_capacity_rps(tier, mix)[0]
    # 3 r (0.25 + 1.875 / (1 - 0.25 r)) = 8, that is 0.1875 r^2 - 8.375 r + 8 = 0.
    assert 3 * capacity * (0.25 + 1.875 / (1 - 0.25 * capacity)) == pytest.approx(8.0, rel=1e-6)
    assert capacity == pytest.approx((8.375 - (8.375**2 - 6.0) ** 0.5) / 0.375, rel=1e-6)  # 0.977


def test_replicas_per_minute_by_hand() -> None:
    trace, config = a_trace(), a_config()
    assert replicas_needed(trace, config)["t"].tolist() == [1, 2, 0, 1, 1]  # ceil(rate / 2)
    assert replicas_needed(trace, config, utilization=0.5)["t"].tolist() == [1, 4, 0, 2, 1]
    assert replicas_needed(trace, config, keep_itl=True)["t"].tolist() == [1, 4, 0, 2, 1]
    # Past the limit (the cheap end of its frontier): half the replicas the rate needs.
    assert replicas_needed(trace, config, utilization=2.0)["t"].tolist() == [1, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="utilization"):
        replicas_needed(trace, config, utilization=2.5)
    # The spec's bounds hold: the warm minimum in the empty minute.
    assert replicas_needed(trace, a_config(min_replicas=1))["t"].tolist() == [1, 2, 1, 1, 1]


def test_each_tick_holds_the_most_any_minute_needs_until_a_new_replica_is_ready() -> None:
    # A replica asked for now serves from 60 s on and the next decision is 15 s away: the
    # oracle looks 75 s ahead.
    needed = [1, 2, 0, 1, 1]
    horizon = COLD_START_S + PERIOD_S
    held = {t: hold_for(needed, 60.0, t, horizon) for t in (0, 45, 60, 105, 120, 165, 240, 400)}
    assert held == {0: 2, 45: 2, 60: 2, 105: 2, 120: 1, 165: 1, 240: 1, 400: 1}


def test_the_oracle_is_a_pure_policy_function() -> None:
    trace, config = a_trace(), a_config()
    oracle = perfect_foresight(trace, config)
    state = ScalingState()
    ctx = ScalingContext(
        now_s=trace.epoch_s + 105.0,
        policy=config.policy,
        tiers=(TierContext(config.tiers[0].figures, TierSignals(ready_replicas=2, desired_replicas=2)),),
    )
    first, after = oracle(ctx, state)
    again, _ = oracle(ctx, state)
    assert first == again
    assert first.replicas == {"t": 2}
    assert state == ScalingState()  # the caller's state is not touched
    assert after.tier("t").last_desired == 2
    later = ScalingContext(now_s=trace.epoch_s + 120.0, policy=config.policy, tiers=ctx.tiers)
    assert oracle(later, after)[0].replicas == {"t": 1}  # minute 1's burst is behind


def test_replayed_it_keeps_the_slo_with_the_fleet_it_holds() -> None:
    trace, config = a_trace(), a_config()
    result = simulate(trace, config, perfect_foresight(trace, config, utilization=0.8), "oracle")
    # Every request within the TTFT SLO; the fleet never ran more than minute 1 needs.
    assert float(np.mean(result.ttft_s <= 1.0)) == 1.0
    assert result.peak_replicas == {"t": 3}  # ceil(4 / 0.8 / 2)
