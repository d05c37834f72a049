"""Tick-by-tick tests of decide(): the clock is passed in, so each test is a script."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import math
from collections.abc import Sequence

import pytest

from inferfleet.autoscaling.policy import (
    SIGNAL_HOLD,
    SIGNAL_PREDICTIVE,
    SIGNAL_REACTIVE,
    SIGNAL_SCHEDULED,
    SIGNAL_WARM_MINIMUM,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierRecommendation,
    TierSignals,
    decide,
)
from inferfleet.design.policy_config import PolicyConfig, PrewarmRule, ScalePacing, TierPolicy
from tests.toolkit.step import tier_signals

T0 = dt.datetime(2024, 1, 3, 12, 0, tzinfo=dt.UTC).timestamp()  # a Wednesday noon
PERIOD = 15.0
# The batch the capacity estimate fills a 32-slot replica to: 32 - 0.5 sqrt(32).
TARGET_BATCH = 32 - 0.5 * math.sqrt(32)


def figures(
    name: str = "h100", usable: float = 2.0, cold: float = 120.0, cost: float | None = None
) -> TierFigures:
    return TierFigures(
        name=name, usable_rps=usable, cold_start_s=cold, max_concurrency=32, cost_per_million_tokens_usd=cost
    )


def config(
    *tiers: TierPolicy,
    headroom: float = 0.0,
    down: ScalePacing | None = None,
    prewarm: tuple[PrewarmRule, ...] = (),
    predictive: bool = True,
) -> PolicyConfig:
    return PolicyConfig(
        tiers=tiers or (TierPolicy("h100", min_replicas=2, max_replicas=20),),
        ttft_target_ms=2000.0,
        sync_period_s=PERIOD,
        headroom=headroom,
        # These scripts set the headroom they mean; measured headroom has its own tests.
        headroom_mode="fixed",
        queue_depth_per_replica=4.0,
        cold_start_margin_s=60.0,
        scale_down=down or ScalePacing(300.0, 0.0, 1),
        prewarm=prewarm,
        predictive_enabled=predictive,
    )


def signals(
    replicas: int,
    *,
    waiting: float = 0.0,
    rate: float = 0.0,
    ttft_ms: float | None = 1500.0,
    ready: int | None = None,
    hold_s: float | None = None,
) -> TierSignals:
    # Busy slots only when a test gives the hold time (Little's law: running = rate x
    # hold); without them the capacity estimate has nothing to learn from.
    return tier_signals(
        ready_replicas=replicas if ready is None else ready,
        desired_replicas=replicas,
        waiting=waiting,
        running=None if hold_s is None else rate * hold_s,
        ttft_p99_ms=ttft_ms,
        request_rate_rps=rate,
    )


def ctx(
    now: float, policy: PolicyConfig, tier_signals: TierSignals, history: Sequence[float] | None = None
) -> ScalingContext:
    return ScalingContext(
        now_s=now, policy=policy, tiers=(TierContext(figures(), tier_signals),), rate_history_rps=history
    )


def pick(rec: Recommendation, name: str) -> TierRecommendation:
    tier = rec.tier(name)
    assert tier is not None
    return tier


def flat(rate: float, minutes: int = 60) -> list[float]:
    return [rate] * minutes


def test_warm_minimum_holds_with_no_traffic() -> None:
    policy = config()
    state = None
    replicas = 2
    for tick in range(200):  # 50 minutes of silence
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas), flat(0.0)), state)
        replicas = rec.replicas["h100"]
        assert replicas >= 2
    assert replicas == 2
    assert pick(rec, "h100").signal in (SIGNAL_WARM_MINIMUM, SIGNAL_HOLD)


def test_predictive_target_is_demand_over_usable_with_headroom() -> None:
    policy = config(headroom=0.2)
    rec, _ = decide(ctx(T0, policy, signals(2, rate=10.0), flat(10.0)), None)
    # 10 req/s x 1.2 / 2 req/s per replica = 6
    assert rec.replicas["h100"] == 6
    assert pick(rec, "h100").signal == SIGNAL_PREDICTIVE
    assert rec.forecast_rps == pytest.approx(10.0)


def test_scale_down_waits_for_the_stabilization_window_then_steps() -> None:
    policy = config(down=ScalePacing(300.0, 0.0, 1))
    state = ScalingState()
    replicas = 10
    history = flat(20.0)
    # Warm up at 20 req/s: target 10.
    for tick in range(30):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=20.0), history), state)
        replicas = rec.replicas["h100"]
    assert replicas == 10
    # Demand drops to 4 req/s (target 2): nothing happens for the 300 s window.
    drop = T0 + 30 * PERIOD
    low = flat(20.0) + flat(4.0, 10)
    changes = []
    for tick in range(60):
        now = drop + tick * PERIOD
        rec, state = decide(ctx(now, policy, signals(replicas, rate=4.0), low), state)
        if rec.replicas["h100"] != replicas:
            changes.append((now - drop, rec.replicas["h100"]))
        replicas = rec.replicas["h100"]
    assert changes, "never scaled down"
    first_s, first_replicas = changes[0]
    assert first_s >= 300.0 - PERIOD  # twenty low samples, one every 15 s, span 300 s
    assert first_replicas == 9  # at most one replica per step
    assert all(b[1] == a[1] - 1 for a, b in itertools.pairwise(changes))


def test_bursty_traffic_holds_the_rate_its_requests_come_at() -> None:
    policy = config(headroom=0.2)
    # A minute at 16 req/s every four on a floor of 2: the forecast's level (the last five
    # minutes' mean) is ~5.5 req/s, but 70 % of the requests come in the bursts, which end
    # before a replica starts. The fleet holds the bursts' rate: 16 / 2 = 8 replicas.
    history = [16.0 if m % 4 == 0 else 2.0 for m in range(60)]
    rec, _ = decide(ctx(T0, policy, signals(4, rate=2.0), history), None)
    assert rec.replicas["h100"] == 8
    assert pick(rec, "h100").signal == SIGNAL_PREDICTIVE
    assert "bursty: 90% of the last 30 min's requests came at up to 16.00 req/s" in pick(rec, "h100").reason
    # The same requests spread evenly: the forecast and its headroom, 5.5 x 1.2 / 2.
    smooth, _ = decide(ctx(T0, policy, signals(4, rate=5.5), flat(5.5)), None)
    assert smooth.replicas["h100"] == 4
    assert "bursty" not in pick(smooth, "h100").reason


def test_absurd_bursts_in_the_history_stop_at_max_replicas() -> None:
    policy = config(headroom=0.2)
    history = [1e300 if m % 2 else 0.0 for m in range(60)]
    rec, _ = decide(ctx(T0, policy, signals(4, rate=2.0), history), None)
    assert rec.replicas["h100"] == 20  # the tier's maxReplicas
    assert pick(rec, "h100").reason.startswith("40.00 req/s placed here")  # 20 x 2 req/s


def _after_a_drop(hold_s: float) -> list[tuple[float, int]]:
    """Ten replicas at 20 req/s, then 4 req/s (target 2) held `hold_s` a request each
    (the engines report busy slots from the drop on)."""
    policy = config(down=ScalePacing(300.0, 120.0, 1))
    state = ScalingState()
    replicas = 10
    for tick in range(30):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=20.0), flat(20.0)), state)
        replicas = rec.replicas["h100"]
    drop = T0 + 30 * PERIOD
    changes = []
    for tick in range(60):
        now = drop + tick * PERIOD
        sig = signals(replicas, rate=4.0, hold_s=hold_s)
        rec, state = decide(ctx(now, policy, sig, flat(20.0) + flat(4.0, 10)), state)
        if rec.replicas["h100"] != replicas:
            changes.append((now - drop, rec.replicas["h100"]))
        replicas = rec.replicas["h100"]
    return changes


def test_an_idle_surplus_goes_in_one_step_after_the_window() -> None:
    # 4 req/s held 1 s each: 4 sequences run on 10 replicas of 32 slots. The two kept
    # would be 6 % busy: the engines show the surplus idle, the step limit and cooldown
    # (there to catch a wrong target) have nothing to catch.
    idle = _after_a_drop(hold_s=1.0)
    assert idle[0][0] >= 300.0 - PERIOD
    assert idle[0][1] == 2 and len(idle) == 1
    # 4 req/s held 8 s each: 32 sequences would fill the two kept to 50 % (more than the
    # 37.5 % that counts as idle): the same drop, one replica per step, a cooldown apart.
    busy = _after_a_drop(hold_s=8.0)
    assert busy[0][1] == 9
    assert all(b[1] == a[1] - 1 and b[0] - a[0] >= 120.0 for a, b in itertools.pairwise(busy))


def test_scale_down_never_while_requests_wait() -> None:
    policy = config(down=ScalePacing(0.0, 0.0, 5))
    state = ScalingState(tiers={})
    # Establish the window, then ask with a queue below the breach threshold.
    rec, state = decide(ctx(T0, policy, signals(8, rate=2.0, waiting=3.0), flat(2.0)), state)
    for tick in range(1, 40):
        rec, state = decide(
            ctx(T0 + tick * PERIOD, policy, signals(8, rate=2.0, waiting=3.0), flat(2.0)), state
        )
        assert rec.replicas["h100"] == 8


def test_queue_breach_scales_up_at_once_with_step_following_the_breach() -> None:
    policy = config()
    small, _ = decide(ctx(T0, policy, signals(4, rate=8.0, waiting=30.0), flat(8.0)), None)
    large, _ = decide(ctx(T0, policy, signals(4, rate=12.0, waiting=300.0), flat(8.0)), None)
    assert small.replicas["h100"] > 4
    assert pick(small, "h100").signal == SIGNAL_REACTIVE
    assert large.replicas["h100"] > small.replicas["h100"]
    # Bounded like HPA: double or four more, whichever is larger.
    assert large.replicas["h100"] <= 8


def test_ttft_breach_under_load_is_sized_by_its_arrivals_within_the_breach_ratio() -> None:
    policy = config()
    # A few requests wait (fewer than the queue rule's allowance) and TTFT breaches. The
    # p99 says requests are late, not by how much capacity is missing: the arrivals size
    # the step (2 req/s a replica), the breach ratio bounds it.
    rec, _ = decide(ctx(T0, policy, signals(4, rate=13.0, waiting=3.0, ttft_ms=4000.0), flat(7.0)), None)
    assert rec.replicas["h100"] == 7  # ceil(13 / 2), within 4 x min(2, 4000/2000) = 8
    assert pick(rec, "h100").signal == SIGNAL_REACTIVE
    assert "13.00 req/s arriving" in pick(rec, "h100").reason
    surge, _ = decide(ctx(T0, policy, signals(4, rate=40.0, waiting=3.0, ttft_ms=3000.0), flat(7.0)), None)
    assert surge.replicas["h100"] == 6  # bounded: ceil(4 x 3000/2000)
    # Arrivals the Ready replicas nearly carry still get one replica more.
    edge, _ = decide(ctx(T0, policy, signals(4, rate=7.0, waiting=3.0, ttft_ms=3000.0), flat(7.0)), None)
    assert edge.replicas["h100"] == 5
    # The same breach on an idle fleet (one long prompt) does not scale.
    idle, _ = decide(ctx(T0, policy, signals(4, rate=0.5, waiting=3.0, ttft_ms=3000.0), flat(0.5)), None)
    assert idle.replicas["h100"] == 4
    # Nor does a p99 that still remembers a burst the fleet has absorbed: nothing waits.
    absorbed, _ = decide(ctx(T0, policy, signals(4, rate=7.0, ttft_ms=3000.0), flat(7.0)), None)
    assert absorbed.replicas["h100"] == 4


def test_reactive_target_does_not_compound_during_a_cold_start() -> None:
    policy = config()
    state = None
    replicas = 4
    for tick in range(8):  # 2 minutes: the new replicas are still starting
        sig = signals(replicas, rate=12.0, waiting=200.0 + 100 * tick, ready=4)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, sig, flat(8.0)), state)
        replicas = rec.replicas["h100"]
    assert replicas <= 8


def test_missing_signals_hold_and_never_scale_down() -> None:
    policy = config(down=ScalePacing(0.0, 0.0, 5))
    state = None
    missing = tier_signals(desired_replicas=7)
    for tick in range(40):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, missing, None), state)
        assert rec.replicas["h100"] == 7
        assert pick(rec, "h100").signal == SIGNAL_HOLD


def test_missing_history_blocks_scale_down_but_not_scale_up() -> None:
    policy = config(down=ScalePacing(0.0, 0.0, 5))
    state = None
    for tick in range(40):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(7, rate=1.0), None), state)
        assert rec.replicas["h100"] == 7
    # Arrivals above what the two Ready replicas carry (2 req/s each): the queue grows.
    up, _ = decide(ctx(T0, policy, signals(2, rate=5.0, waiting=50.0), None), None)
    assert up.replicas["h100"] > 2


def test_restart_from_persisted_state_gives_the_same_decision() -> None:
    policy = config(headroom=0.2)
    state = None
    replicas = 4
    history = flat(6.0, 120)
    rec = None
    for tick in range(50):
        rate = 6.0 if tick < 25 else 2.0
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=rate), history), state)
        replicas = rec.replicas["h100"]
    assert state is not None
    persisted = json.loads(json.dumps(state.to_dict()))  # through status as JSON
    restored = ScalingState.from_dict(persisted)
    now = T0 + 50 * PERIOD
    sig = signals(replicas, rate=2.0)
    live, live_state = decide(ctx(now, policy, sig, history), state)
    again, again_state = decide(ctx(now, policy, sig, history), restored)
    assert live.to_dict() == again.to_dict()
    assert live_state.to_dict() == again_state.to_dict()


def test_lost_state_never_causes_an_immediate_scale_down() -> None:
    policy = config(down=ScalePacing(300.0, 0.0, 5))
    rec, state = decide(ctx(T0, policy, signals(10, rate=1.0), flat(1.0)), None)
    assert rec.replicas["h100"] == 10  # a fresh state has not seen a whole window yet
    rec, _ = decide(ctx(T0 + 150, policy, signals(10, rate=1.0), flat(1.0)), state)
    assert rec.replicas["h100"] == 10


def test_prewarm_window_opens_one_lead_time_early() -> None:
    # Weekdays 13:00 UTC for an hour, 5 replicas; lead = 120 s cold start + 60 s margin.
    rule = PrewarmRule(schedule="0 13 * * 1-5", duration_s=3600.0, replicas=5, tier="h100")
    policy = config(prewarm=(rule,))
    before, _ = decide(ctx(T0 + 3600 - 400, policy, signals(2), flat(0.0)), None)
    early, _ = decide(ctx(T0 + 3600 - 170, policy, signals(2), flat(0.0)), None)
    inside, _ = decide(ctx(T0 + 3600 + 1800, policy, signals(2), flat(0.0)), None)
    assert before.replicas["h100"] == 2
    assert early.replicas["h100"] == 5
    assert pick(early, "h100").signal == SIGNAL_SCHEDULED
    assert inside.replicas["h100"] == 5


def two_tier_ctx(
    now: float, policy: PolicyConfig, cheap: TierSignals, dear: TierSignals, history: list[float]
) -> ScalingContext:
    return ScalingContext(
        now_s=now,
        policy=policy,
        tiers=(
            TierContext(figures("l4", usable=1.0, cost=0.2), cheap),
            TierContext(figures("a100", usable=3.0, cost=0.1), dear),
        ),
        rate_history_rps=history,
    )


def test_spot_tier_takes_the_burst_above_the_on_demand_base() -> None:
    policy = config(
        TierPolicy("l4", min_replicas=1, max_replicas=20),
        TierPolicy("a100", min_replicas=0, max_replicas=10, capacity_type="spot"),
    )
    # An hour at 4 req/s, then 10 req/s: the base (4) stays on L4, the burst goes to spot.
    history = flat(4.0) + flat(10.0, 5)
    rec, _ = decide(two_tier_ctx(T0, policy, signals(4, rate=10.0), signals(0, rate=0.0), history), None)
    assert rec.replicas["l4"] == 4
    assert rec.replicas["a100"] >= 2


def test_routing_share_is_honoured_and_cost_orders_the_rest() -> None:
    policy = config(
        TierPolicy("l4", min_replicas=1, max_replicas=20, routing_share=0.5),
        TierPolicy("a100", min_replicas=1, max_replicas=10),
    )
    rec, _ = decide(two_tier_ctx(T0, policy, signals(1, rate=6.0), signals(1, rate=0.0), flat(6.0)), None)
    assert rec.replicas["l4"] == 3  # 50% of 6 req/s at 1 req/s each
    assert rec.replicas["a100"] == 1  # the other 3 req/s fit one A100
    assert pick(rec, "l4").traffic_share == pytest.approx(0.5)


def test_a_tier_that_never_becomes_ready_is_skipped() -> None:
    policy = config(
        TierPolicy("l4", min_replicas=1, max_replicas=20),
        TierPolicy("a100", min_replicas=0, max_replicas=10),
    )
    history = flat(9.0)
    state = None
    a100 = 0
    l4 = 1
    # The cheap A100 tier is asked for replicas that never become Ready (no GPU nodes).
    for tick in range(120):
        rec, state = decide(
            two_tier_ctx(
                T0 + tick * PERIOD,
                policy,
                signals(l4, rate=9.0 if a100 == 0 else 0.0),
                signals(a100, rate=0.0, ready=0),
                history,
            ),
            state,
        )
        a100 = rec.replicas["a100"]
        l4 = rec.replicas["l4"]
    assert a100 == 0
    assert l4 >= 9  # the L4 tier took the whole demand
    assert pick(rec, "a100").signal == SIGNAL_HOLD


def _factor_after(ticks: int, history: list[float]) -> float:
    """The capacity factor after `ticks` decisions of ten replicas carrying 20 req/s
    whose requests hold a slot for 6.6 s, with `history` as the service's minutes."""
    state = None
    for tick in range(ticks):
        carrying = signals(10, rate=20.0, hold_s=6.6)
        _, state = decide(ctx(T0 + tick * PERIOD, config(), carrying, history), state)
    assert state is not None
    return state.tiers["h100"].capacity_factor


def test_capacity_factor_rises_fast_only_on_traffic_known_to_be_smooth() -> None:
    # Ten replicas at the plan's 2 req/s each measure 2.2x the plan (below). Half an
    # hour of smooth minutes: the factor follows the measurement up at its 2-minute
    # pace, most of the way within 10 minutes (40 ticks).
    goal = TARGET_BATCH / 6.6 / 2.0
    smooth = _factor_after(40, flat(20.0))
    assert smooth == pytest.approx(goal, rel=0.03)
    # The same mean rate in bursts (nothing one minute, 40 req/s the next), or a
    # service too new to tell (5 known minutes): a 10-minute pace, about two thirds of
    # the way after 10 minutes.
    bursty = _factor_after(40, [0.0, 40.0] * 30)
    new = _factor_after(40, flat(20.0, minutes=5))
    for slow in (bursty, new):
        assert 1.5 < slow < 2.0
    assert _factor_after(8, flat(20.0)) == pytest.approx(bursty, rel=0.05)  # 2 min vs 10 min


def test_capacity_factor_follows_littles_law_within_bounds() -> None:
    policy = config()
    state = None
    # Ten replicas carry 20 req/s (the plan's 2 per replica), each request holding a
    # slot for 6.6 s: 13.2 of 32 slots busy. At the target batch (32 - 0.5 sqrt(32) =
    # 29.2 slots) a replica would take 29.2 / 6.6 = 4.4 req/s, 2.2x the plan: the
    # factor rises towards 2.2 and no further.
    for tick in range(240):
        rec, state = decide(
            ctx(T0 + tick * PERIOD, policy, signals(10, rate=20.0, hold_s=6.6), flat(20.0)), state
        )
    assert state is not None
    grown = state.tiers["h100"].capacity_factor
    assert grown == pytest.approx(TARGET_BATCH / 6.6 / 2.0, rel=0.03)
    assert rec.replicas["h100"] < 10  # the same demand needs fewer replicas
    # A sustained breach at that load cuts it back at once.
    for tick in range(240, 243):
        _rec, state = decide(
            ctx(T0 + tick * PERIOD, policy, signals(10, rate=35.0, hold_s=6.6, ttft_ms=2600.0), flat(20.0)),
            state,
        )
    assert state.tiers["h100"].capacity_factor < grown


def test_capacity_estimate_slows_decode_with_the_batch_and_prefill_share() -> None:
    # The same measurement on a tier whose plan says decode steps slow as the batch
    # grows, and whose prompts keep prefill busy, claims less capacity.
    def learned(tier_figures: TierFigures, prompt_tokens_rps: float | None) -> float:
        policy = config()
        state = None
        for tick in range(240):
            sig = tier_signals(
                ready_replicas=10, desired_replicas=10, waiting=0.0, running=20.0 * 6.6,
                ttft_p99_ms=500.0, request_rate_rps=20.0, prompt_tokens_rps=prompt_tokens_rps,
            )  # fmt: skip
            context = ScalingContext(
                now_s=T0 + tick * PERIOD,
                policy=policy,
                tiers=(TierContext(tier_figures, sig),),
                rate_history_rps=flat(20.0),
            )
            _, state = decide(context, state)
        assert state is not None
        return state.tiers["h100"].capacity_factor

    plain = learned(figures(), None)
    roofline = TierFigures(
        name="h100", usable_rps=2.0, cold_start_s=120.0, max_concurrency=32,
        decode_step_base_ms=20.0, decode_step_per_seq_ms=1.0, prefill_tokens_per_s=10_000.0,
    )  # fmt: skip
    batch_slowed = learned(roofline, 0.0)
    # Step at 29.2 vs 13.2 running: (20 + 29.2) / (20 + 13.2) = 1.48 times longer.
    assert batch_slowed == pytest.approx(plain / 1.481, rel=0.03)
    # 2000-token prompts at 10k tokens/s: 0.2 s of prefill per request, so prefill
    # takes 0.4 of the GPU now; without it the hold would be 6.6 x 1.481 x 0.6 = 5.86 s.
    # x * hold(x) = 29.2 with hold(x) = 5.86 / (1 - 0.2 x) gives x = 29.2 / (5.86 + 5.83).
    prefill_slowed = learned(roofline, 20.0 * 2000)
    assert prefill_slowed == pytest.approx(TARGET_BATCH / (5.865 + TARGET_BATCH * 0.2) / 2.0, rel=0.03)
    # Prefill alone is held under 80 % busy: with 8000-token prompts (0.8 s each) a
    # replica takes at most 0.8 / 0.8 = 1 req/s, half the plan's figure.
    assert learned(roofline, 20.0 * 8000) == pytest.approx(0.5, rel=0.03)


def test_capacity_factor_stays_near_the_plan_while_slots_are_busy() -> None:
    # Low TTFT but three quarters of the slots busy: latency is flat until the knee, so
    # low latency is no evidence of spare capacity; Little's law says how little there is.
    policy = config()
    state = None
    for tick in range(240):
        busy = tier_signals(
            ready_replicas=10, desired_replicas=10, waiting=0.0, running=0.75 * 10 * 32,
            ttft_p99_ms=200.0, request_rate_rps=20.0,
        )  # fmt: skip
        _, state = decide(ctx(T0 + tick * PERIOD, policy, busy, flat(20.0)), state)
    assert state is not None
    # hold = 240 / 20 = 12 s; 29.2 slots / 12 s = 2.4 req/s against the plan's 2.
    assert state.tiers["h100"].capacity_factor == pytest.approx(TARGET_BATCH / 12.0 / 2.0, rel=0.03)
    # and the averaged slot use survives a restart through status
    restored = ScalingState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored.tiers["h100"].slot_use_avg == pytest.approx(state.tiers["h100"].slot_use_avg)


def test_a_backlog_the_ready_replicas_drain_before_a_cold_start_adds_nothing() -> None:
    policy = config()
    # 40 waiting on 4 replicas (16 allowed) but they carry 8 req/s against 3 arriving:
    # the excess is gone in 5 s, long before a new replica's 120 s cold start.
    drains, _ = decide(ctx(T0, policy, signals(4, rate=3.0, waiting=40.0), flat(3.0)), None)
    assert drains.replicas["h100"] == 4
    # Arrivals above what they carry: the backlog is still there (and growing) when a
    # new replica is Ready, so the step is sized for the arrivals plus that backlog.
    grows, _ = decide(ctx(T0, policy, signals(4, rate=10.0, waiting=40.0), flat(10.0)), None)
    # backlog at +120 s = 24 + (10 - 8) x 120 = 264; (10 + 264/120) / 2 = 6.1 -> 7
    assert grows.replicas["h100"] == 7
    assert pick(grows, "h100").signal == SIGNAL_REACTIVE


def test_scale_down_steps_may_take_a_share_of_the_fleet() -> None:
    # HPA-style: one replica or a quarter of the fleet per step, whichever is more.
    policy = config(down=ScalePacing(60.0, 0.0, 1, 25.0))
    state = None
    replicas = 20
    sizes = []
    for tick in range(40):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=4.0), flat(4.0)), state)
        if rec.replicas["h100"] != replicas:
            sizes.append(replicas - rec.replicas["h100"])
        replicas = rec.replicas["h100"]
    assert replicas == 2  # 4 req/s / 2 per replica
    assert sizes[:3] == [5, 4, 3]  # ceil(20/4), ceil(15/4), ceil(11/4)


def test_a_new_service_scales_down_once_the_window_is_observed() -> None:
    # Five minutes of history is too little for a forecast, but it is no gap: after a
    # whole stabilization window at a low rate the fleet shrinks.
    policy = config(down=ScalePacing(120.0, 0.0, 5))
    state = None
    replicas = 8
    seen = []
    for tick in range(20):
        history = flat(2.0, minutes=tick // 4)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=2.0), history), state)
        replicas = rec.replicas["h100"]
        seen.append(replicas)
    assert seen[:8] == [8] * 8  # the first 120 s: the window is not yet observed
    assert seen[8] == 3  # then one step of at most five
    assert replicas == 2  # and on to the warm minimum


def test_a_new_service_padded_with_gaps_is_no_gap() -> None:
    # The metrics cache pads a new service's series with NaN back to its retention. Those
    # minutes are before the service existed, not holes in what it recorded: the fleet
    # shrinks after one stabilization window (it held the first peak for the half hour a
    # forecast needs before), and a forecast comes as soon as ten minutes are recorded.
    policy = config(down=ScalePacing(120.0, 0.0, 5))
    padding = [math.nan] * (14 * 1440)
    state = None
    replicas = 8
    seen = []
    for tick in range(20):
        history = padding + flat(2.0, minutes=tick // 4)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=2.0), history), state)
        replicas = rec.replicas["h100"]
        seen.append(replicas)
    assert seen[:8] == [8] * 8  # the first 120 s: the window is not yet observed
    assert seen[8] == 3 and replicas == 2
    rec, _ = decide(ctx(T0, policy, signals(2, rate=2.0), padding + flat(2.0, minutes=12)), None)
    assert rec.forecast_rps == pytest.approx(2.0)
    # A hole after the service's first minutes is a gap: nothing is taken away.
    holed = padding + flat(2.0, 20) + [math.nan] * 12
    state = None
    for tick in range(20):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(8, rate=2.0), holed), state)
        assert rec.replicas["h100"] == 8


def test_a_percent_step_limit_applies_on_its_own() -> None:
    # scaleUp.maxPercentPerStep without maxReplicasPerStep still limits the step.
    assert ScalePacing(0.0, 0.0, None, 50.0).step_limit(10) == 5
    assert ScalePacing(0.0, 0.0, None, 50.0).step_limit(0) == 1  # an empty fleet can grow
    assert ScalePacing(0.0, 0.0, 2, 10.0).step_limit(10) == 2  # the larger of the two
    assert ScalePacing(0.0, 0.0, None, None).step_limit(10) is None


def _first_scale_down_after_silence_s(policy: PolicyConfig) -> tuple[float | None, list[str]]:
    """20 req/s on 10 replicas, then 45 minutes with nothing at all: seconds from the
    silence to the first scale-down, and the h100 reasons seen at its tenth minute."""
    state = ScalingState()
    replicas = 10
    busy = flat(20.0, 120)
    for tick in range(30):
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, signals(replicas, rate=20.0), busy), state)
        replicas = rec.replicas["h100"]
    assert replicas == 10
    stop = T0 + 30 * PERIOD
    first_down_s = None
    tenth_minute: list[str] = []
    for tick in range(4 * 45):  # 45 minutes of silence, four ticks a minute
        history = busy + [0.0] * (tick // 4)
        rec, state = decide(ctx(stop + tick * PERIOD, policy, signals(replicas, rate=0.0), history), state)
        if tick // 4 == 10:
            tenth_minute.append(pick(rec, "h100").reason)
        if rec.replicas["h100"] < replicas and first_down_s is None:
            first_down_s = tick * PERIOD
        replicas = rec.replicas["h100"]
    return first_down_s, tenth_minute


def test_traffic_that_stops_dead_keeps_the_fleet_until_the_hold_runs_out() -> None:
    # An upstream outage comes back all at once, so the fleet stays for the forecaster's
    # 30-minute hold, and only then does the usual slow scale-down start.
    first_down_s, tenth_minute = _first_scale_down_after_silence_s(config(down=ScalePacing(300.0, 0.0, 1)))
    assert tenth_minute and all("interrupted" in reason for reason in tenth_minute)
    assert first_down_s is not None, "never scaled down after the demand had gone"
    assert first_down_s >= 30 * 60 + 300 - PERIOD  # the hold, then the stabilization window


def test_an_interruption_hold_of_zero_treats_silence_as_demand_gone() -> None:
    # scaling.interruptionHoldMinutes 0 (an SRE whose traffic pauses by design): the
    # same silence starts the scale-down after the stabilization window alone.
    policy = dataclasses.replace(config(down=ScalePacing(300.0, 0.0, 1)), interruption_hold_min=0)
    first_down_s, tenth_minute = _first_scale_down_after_silence_s(policy)
    assert not any("interrupted" in reason for reason in tenth_minute)
    assert first_down_s is not None
    assert first_down_s <= 300 + 2 * 60  # the window, plus the minutes the history lags
