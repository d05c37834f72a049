"""Tick-by-tick tests: the policy follows the traffic the engines report, not the
declared one (learned mix, escalation that nothing out-votes, measured headroom,
the drift verdict)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import math

import pytest

from inferfleet.api.spec import TokenPercentiles
from inferfleet.autoscaling.policy import (
    SIGNAL_ESCALATION,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierSignals,
    TokenQuantiles,
    decide,
    drift,
    mix,
)
from inferfleet.autoscaling.policy import capacity as capacity_rules
from inferfleet.autoscaling.policy import headroom as headroom_rules
from inferfleet.autoscaling.policy import reactive as reactive_rules
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy
from tests.toolkit.step import tier_signals

T0 = dt.datetime(2024, 1, 3, 12, 0, tzinfo=dt.UTC).timestamp()
PERIOD = 15.0
# A 70B-on-H100-like roofline: 64 slots, decode step 17.7 + 0.19 x batch ms, prefill
# 12,000 tokens/s; the plan believed prompts of 200 tokens and outputs of 236.
FIGURES = TierFigures(
    name="h100",
    usable_rps=6.0,
    cold_start_s=70.0,
    gpus_per_replica=2,
    max_concurrency=64,
    decode_step_base_ms=17.7,
    decode_step_per_seq_ms=0.19,
    prefill_tokens_per_s=12_000.0,
    mean_input_tokens=200.0,
    mean_output_tokens=236.0,
    max_model_len=9216,
)


def config(**changes: object) -> PolicyConfig:
    base = PolicyConfig(
        tiers=(TierPolicy("h100", min_replicas=1, max_replicas=40),),
        ttft_target_ms=2000.0,
        sync_period_s=PERIOD,
        headroom=0.0,
        headroom_mode="fixed",
        cold_start_margin_s=60.0,
        scale_down=ScalePacing(300.0, 0.0, 1),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def signals(
    replicas: int,
    *,
    rate: float,
    prompt: float = 200.0,
    output: float = 236.0,
    waiting: float = 0.0,
    running: float | None = None,
    ttft_ms: float | None = 500.0,
    ready: int | None = None,
    rejected: float = 0.0,
    prompt_q: TokenQuantiles | None = None,
) -> TierSignals:
    return tier_signals(
        ready_replicas=replicas if ready is None else ready,
        desired_replicas=replicas,
        waiting=waiting,
        running=running,
        ttft_p99_ms=ttft_ms,
        request_rate_rps=rate,
        prompt_tokens_rps=rate * prompt,
        generation_tokens_rps=rate * output,
        rejected_rps=rejected,
        prompt_tokens=prompt_q or TokenQuantiles(prompt * 0.8, prompt * 2.5, prompt * 3.0),
        generation_tokens=TokenQuantiles(output * 0.6, output * 2.0, output * 2.5),
    )


def ctx(
    now: float,
    policy: PolicyConfig,
    tier: TierSignals,
    history: list[float] | None,
    figures: TierFigures = FIGURES,
) -> ScalingContext:
    return ScalingContext(
        now_s=now, policy=policy, tiers=(TierContext(figures, tier),), rate_history_rps=history
    )


def only(rec: Recommendation) -> int:
    return rec.replicas["h100"]


# --- learned mix -----------------------------------------------------------------


def test_the_observed_mix_replaces_the_declared_one_and_rescales_capacity() -> None:
    """Prompts seven times the declared ones: within a few minutes of traffic the policy
    sizes the fleet for what a replica really serves, not for the plan."""
    policy = config()
    rate = 20.0
    history = [rate] * 60
    state: ScalingState | None = None
    replicas = 4
    goals = []
    for tick in range(40):  # ten minutes
        sig = signals(replicas, rate=rate, prompt=1400.0, output=236.0)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, sig, history), state)
        replicas = only(rec)
        goals.append(state.tiers["h100"].mix_factor)
    assert state is not None
    declared = mix.request_cost_s(FIGURES, 200.0, 236.0)
    observed = mix.request_cost_s(FIGURES, 1400.0, 236.0)
    assert declared is not None and observed is not None
    # The factor is the plan's roofline at the observed mix over the declared one ...
    assert state.tiers["h100"].mix_factor == pytest.approx(declared / observed, rel=0.02)
    # ... reached within a few minutes (a one-minute time constant down) and falling
    # all the way, never overshooting ...
    settled = next(i for i, g in enumerate(goals) if g == pytest.approx(goals[-1], rel=0.02))
    assert settled * PERIOD <= 5 * mix.MIX_FALL_S
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(goals))
    # ... and the predictive target is the demand over the rescaled capacity.
    assert replicas == math.ceil(rate / (FIGURES.usable_rps * declared / observed) - 1e-9)


def test_the_declared_mix_is_the_prior_until_requests_are_seen() -> None:
    state = ScalingState()
    tier = state.tier("h100")
    mix.observe(tier, signals(1, rate=1.0, prompt=2000.0), dt_s=15.0)  # 15 requests seen
    prompt = mix.mean_prompt_tokens(tier, FIGURES)
    assert prompt is not None
    share = 15.0 / mix.MIX_FULL_REQUESTS
    assert prompt == pytest.approx(share * 2000.0 + (1 - share) * 200.0)


def test_a_lighter_mix_raises_capacity_only_slowly() -> None:
    state = ScalingState()
    tier = state.tier("h100")
    for _ in range(100):
        mix.observe(tier, signals(1, rate=10.0, prompt=50.0, output=100.0), dt_s=15.0)
    goal = mix.mix_goal(tier, FIGURES)
    assert goal is not None and goal > 1.5
    factor = mix.update_mix_factor(tier, FIGURES, dt_s=15.0)
    assert 1.0 < factor < 1.0 + (goal - 1.0) * 15.0 / mix.MIX_RISE_S + 1e-9


def test_a_breach_the_falling_mix_explains_does_not_cut_capacity_twice() -> None:
    """Prompts seven times the declared ones and TTFT above the SLO with requests
    waiting. While the mix factor is still falling towards the observed mix, the breach
    is what it is correcting: the capacity factor is not cut on top. Once the mix has
    settled, the same breach under a load the estimate says a replica carries does cut
    it: the estimate is wrong beyond the mix."""
    policy = config()
    state: ScalingState | None = None
    heavy_usable = FIGURES.usable_rps * (mix.request_cost_s(FIGURES, 200.0, 236.0) or 0.0)
    heavy_usable /= mix.request_cost_s(FIGURES, 1400.0, 236.0) or 1.0
    rate = 4 * heavy_usable * 0.85  # 85 % of what four replicas carry at the real mix
    was_settling: list[bool] = []
    factors: list[float] = []
    for tick in range(60):
        sig = signals(4, rate=rate, prompt=1400.0, waiting=30.0, ttft_ms=5000.0)
        _, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [rate] * 60), state)
        tier = state.tiers["h100"]
        was_settling.append(mix.settling(tier, FIGURES))
        factors.append(tier.capacity_factor)
    assert was_settling[0] and not was_settling[-1]
    settling_ticks = [i for i, flag in enumerate(was_settling) if flag]
    assert all(factors[i] == pytest.approx(1.0) for i in settling_ticks)
    assert factors[-1] < 1.0  # cut once the mix had settled and the breach went on


def test_one_breach_cuts_the_learned_capacity_once_per_time_it_can_show() -> None:
    """A breach under the load the estimate says a replica carries cuts the capacity
    factor, but not again while the replicas that cut asked for are starting or the p99
    window still remembers the minutes before them: one burst is one correction, not a
    cut every other tick for as long as the p99 takes to forget it."""
    # maxReplicas 4: no scale-up can be asked for, only the cuts' own pacing is seen.
    policy = config(tiers=(TierPolicy("h100", min_replicas=1, max_replicas=4),))
    state: ScalingState | None = None
    rate = 4 * FIGURES.usable_rps * 0.72  # 72 % of what four replicas carry
    cuts: list[float] = []
    factor = 1.0
    for tick in range(80):  # twenty minutes of breach, the fleet held at four
        now = T0 + tick * PERIOD
        sig = signals(4, rate=rate, waiting=30.0, ttft_ms=5000.0)
        _, state = decide(ctx(now, policy, sig, [rate] * 60), state)
        tier = state.tiers["h100"]
        if tier.capacity_factor < factor - 1e-9:
            cuts.append(now - T0)
        factor = tier.capacity_factor
    settle = FIGURES.cold_start_s + reactive_rules.TTFT_WINDOW_S
    assert len(cuts) >= 3  # a breach that goes on is still acted on ...
    gaps = [b - a for a, b in itertools.pairwise(cuts)]
    assert min(gaps) >= settle  # ... once per time a cut can show in the fleet
    assert max(gaps) <= settle + 3 * PERIOD


def test_a_traffic_gap_teaches_the_capacity_nothing() -> None:
    """Arrivals stop dead: the averages drain at their own pace and their ratio is no
    hold time. The capacity learned under load stays what it was through the gap."""
    policy = config()
    state: ScalingState | None = None
    rate = 10.0
    for tick in range(80):  # twenty minutes under load, 32 of 64 slots busy
        sig = signals(3, rate=rate, running=96.0)
        _, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [rate] * 60), state)
    assert state is not None
    learned = state.tiers["h100"].capacity_factor
    assert learned != pytest.approx(1.0)  # it did learn something under load
    for tick in range(80, 120):  # ten minutes without a request
        sig = signals(3, rate=0.0, running=0.0, ttft_ms=None)
        _, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [rate] * 60 + [0.0] * 10), state)
        assert state.tiers["h100"].capacity_factor == pytest.approx(learned)


def two_tiers(light: TierSignals, idle: TierSignals) -> tuple[TierContext, ...]:
    spare = dataclasses.replace(FIGURES, name="spare")
    return (TierContext(FIGURES, light), TierContext(spare, idle))


def test_a_tier_without_requests_of_its_own_takes_the_services_mix() -> None:
    """Two tiers, the traffic all on the first, prompts seven times the declared ones:
    the idle tier's capacity follows the mix the service's engines report (a spot tier
    started for a burst serves the same prompts), not the declaration."""
    policy = dataclasses.replace(
        config(),
        tiers=(TierPolicy("h100", min_replicas=1, max_replicas=40), TierPolicy("spare", min_replicas=0)),
    )
    state: ScalingState | None = None
    idle = tier_signals(ready_replicas=0, desired_replicas=0, waiting=0.0, running=0.0, request_rate_rps=0.0)
    for tick in range(40):
        busy = signals(4, rate=20.0, prompt=1400.0)
        context = ScalingContext(
            now_s=T0 + tick * PERIOD, policy=policy, tiers=two_tiers(busy, idle), rate_history_rps=[20.0] * 60
        )
        _, state = decide(context, state)
    assert state is not None
    busy_factor = state.tiers["h100"].mix_factor
    assert busy_factor < 0.6
    assert state.tiers["spare"].mix_factor == pytest.approx(busy_factor, rel=0.02)


def test_the_burst_goes_to_spot_only_while_spot_is_cheaper_for_the_real_mix() -> None:
    """The plan priced a request of the declared mix: the spot tier, slow at prefill,
    was cheaper per request there. Prompts seven times the declared ones make it the
    dearer one, and the burst above the base load no longer goes to it."""
    spot = dataclasses.replace(
        FIGURES, name="spot", prefill_tokens_per_s=3000.0, cost_per_million_tokens_usd=0.8
    )
    on_demand = dataclasses.replace(FIGURES, cost_per_million_tokens_usd=1.0)
    policy = dataclasses.replace(
        config(),
        tiers=(
            TierPolicy("h100", min_replicas=1, max_replicas=40),
            TierPolicy("spot", min_replicas=0, max_replicas=40, capacity_type="spot"),
        ),
    )
    history = [5.0] * 40 + [20.0] * 20  # a trough of 5 req/s in the last hour, 20 now
    idle = tier_signals(ready_replicas=0, desired_replicas=0, waiting=0.0, running=0.0, request_rate_rps=0.0)

    def spot_target(prompt: float) -> int:
        state: ScalingState | None = None
        rec = None
        for tick in range(40):
            busy = signals(8, rate=20.0, prompt=prompt)
            tiers = (TierContext(on_demand, busy), TierContext(spot, idle))
            rec, state = decide(ScalingContext(T0 + tick * PERIOD, policy, tiers, history), state)
        assert rec is not None
        tier = rec.tier("spot")
        assert tier is not None
        return tier.targets.get("predictive", 0)

    assert spot_target(200.0) > 0  # the declared mix: spot takes the burst
    assert spot_target(1400.0) == 0  # the real one: it costs more there


# --- escalation ------------------------------------------------------------------


# The plan believes a replica carries 60 req/s; the engines serve 3.
WRONG_PLAN = dataclasses.replace(FIGURES, usable_rps=60.0)


def growing_queue_run(policy: PolicyConfig, ticks: int) -> list[tuple[float, int, str]]:
    """A tier whose plan is twenty times too optimistic: the queue grows by 180 requests
    a tick whatever the forecast and the queue rule (which trusts the plan's capacity)
    say. Replicas become Ready one cold start after they were asked for."""
    state: ScalingState | None = None
    desired = 4
    asked: list[tuple[float, int]] = [(T0 - 1000.0, desired)]
    waiting = 0.0
    out = []
    history = [12.0] * 60  # the forecaster sees 12 req/s: two replicas' worth by the plan
    for tick in range(ticks):
        now = T0 + tick * PERIOD
        ready = max(n for t, n in asked if t + FIGURES.cold_start_s <= now)
        served = 3.0 * ready
        waiting = max(0.0, waiting + (24.0 - served) * PERIOD)
        # The engines keep all 64 slots of a replica busy and serve `served` req/s; the
        # last minute's p99 is far above the SLO once requests queue.
        sig = signals(
            desired, rate=served, ready=ready, waiting=waiting, running=64.0 * ready,
            ttft_ms=30_000.0 if waiting else 900.0,
        )  # fmt: skip
        rec, state = decide(ctx(now, policy, sig, history, WRONG_PLAN), state)
        if only(rec) != desired:
            asked.append((now, only(rec)))
        desired = only(rec)
        tier = rec.tier("h100")
        assert tier is not None
        out.append((now - T0, desired, tier.signal))
    return out


def test_a_growing_queue_raises_the_fleet_within_the_bound_whatever_the_plan_says() -> None:
    # Capacity learning and occupancy off: only escalation is left to see the problem.
    policy = config()
    saved = reactive_rules.OCCUPANCY_HIGH, capacity_rules.CAPACITY_MIN
    reactive_rules.OCCUPANCY_HIGH, capacity_rules.CAPACITY_MIN = 10.0, 1.0
    try:
        run = growing_queue_run(policy, 40)
    finally:
        reactive_rules.OCCUPANCY_HIGH, capacity_rules.CAPACITY_MIN = saved
    ups = [(t, n, signal) for (t, n, signal), (_, before, _) in zip(run[1:], run, strict=False) if n > before]
    assert ups, "the fleet was never raised"
    first_t, _, first_signal = ups[0]
    # The breach starts at the first tick (the queue grows from it); escalation raises
    # the fleet within ESCALATE_AFTER_S plus one sync period.
    assert first_t <= reactive_rules.ESCALATE_AFTER_S + PERIOD
    assert first_signal == SIGNAL_ESCALATION
    # While the breach lasts the fleet keeps rising, once per lead time at most apart.
    lead = FIGURES.cold_start_s + policy.cold_start_margin_s
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(ups)]
    assert gaps and max(gaps) <= lead + reactive_rules.ESCALATE_AFTER_S + PERIOD
    # Enough replicas arrive for the 24 req/s the engines really get (3 per replica).
    assert run[-1][1] >= 8


def test_escalation_is_not_outvoted_by_a_forecast_of_low_demand() -> None:
    policy = config()
    state: ScalingState | None = None
    rec = None
    for tick in range(4):
        # The history says 1 req/s; the queue says otherwise.
        sig = signals(2, rate=5.0, waiting=100.0 + 60.0 * tick, running=100.0, ttft_ms=9000.0)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [1.0] * 60, WRONG_PLAN), state)
    assert rec is not None and only(rec) > 2
    tier = rec.tier("h100")
    assert tier is not None and tier.signal == SIGNAL_ESCALATION
    assert tier.targets.get("predictive", 0) <= 1  # the forecast wanted less
    assert "reactive" not in tier.targets  # the queue rule trusted the plan
    assert state is not None and state.tiers["h100"].breach_since_s == T0


def test_escalation_waits_for_replicas_on_their_way_then_raises_again() -> None:
    policy = config()
    saved = reactive_rules.OCCUPANCY_HIGH
    reactive_rules.OCCUPANCY_HIGH = 10.0
    try:
        state = ScalingState()
        state.tier("h100").last_scale_up_s = T0 - 10.0  # asked for 2 more 10 s ago
        # 4 desired, 2 Ready: two are in their cold start.
        seen = []
        for tick in range(12):
            now = T0 + tick * PERIOD
            sig = signals(4, ready=2, rate=6.0, waiting=50.0 + 40.0 * tick, running=128.0, ttft_ms=20_000.0)
            rec, state = decide(ctx(now, policy, sig, [6.0] * 60, WRONG_PLAN), state)
            seen.append(only(rec))
            if only(rec) > 4:
                break
    finally:
        reactive_rules.OCCUPANCY_HIGH = saved
    lead = FIGURES.cold_start_s + policy.cold_start_margin_s
    raised_at = len(seen) - 1
    assert seen[-1] > 4
    # Not before the replicas already asked for could have landed ...
    assert raised_at * PERIOD >= lead - 10.0 - PERIOD
    # ... and not much after.
    assert raised_at * PERIOD <= lead + PERIOD


def test_a_p99_from_before_the_last_scale_up_does_not_escalate() -> None:
    policy = config()
    state = ScalingState()
    state.tier("h100").last_scale_up_s = T0 - 30.0
    for tick in range(6):
        sig = signals(6, rate=10.0, waiting=1.0, running=100.0, ttft_ms=5000.0)
        rec, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [10.0] * 60), state)
        assert only(rec) == 6, rec.reason


# --- measured headroom -----------------------------------------------------------


def test_headroom_follows_the_measured_forecast_error() -> None:
    state = ScalingState()
    prior = 0.2
    # Demand comes in 30 % above the forecast in one minute of two.
    now = T0
    history: list[float] = []
    for minute in range(400):
        now = T0 + minute * 60.0
        history.append(13.0 if minute % 2 else 10.0)
        headroom_rules.check_forecasts(state, now, history, prior)
        headroom_rules.file_forecast(state, now, 120.0, 10.0)
    measured = headroom_rules.measured_headroom(state)
    assert measured == pytest.approx(0.3, abs=0.05)
    policy = config(headroom=prior, headroom_mode="measured")
    assert headroom_rules.headroom(policy, state) == pytest.approx(measured)
    assert headroom_rules.headroom(config(headroom=prior, headroom_mode="fixed"), state) == prior


def test_an_accurate_forecast_needs_little_headroom_and_the_prior_fades_in() -> None:
    state = ScalingState()
    history: list[float] = []
    trust = []
    for minute in range(200):
        now = T0 + minute * 60.0
        history.append(10.0)
        headroom_rules.check_forecasts(state, now, history, 0.2)
        headroom_rules.file_forecast(state, now, 120.0, 10.0)
        trust.append(headroom_rules.headroom(config(headroom=0.2, headroom_mode="measured"), state))
    assert trust[0] == 0.2  # nothing checked yet: the prior
    assert trust[-1] < headroom_rules.STEP  # it jitters around zero by less than a step
    assert state.forecast_errors_seen >= headroom_rules.MIN_SAMPLES


def test_measured_headroom_round_trips_through_status() -> None:
    state = ScalingState(forecasts_due=[(T0, 3.0)], forecast_error=0.1, forecast_errors_seen=7)
    again = ScalingState.from_dict(state.to_dict())
    assert again.forecasts_due == state.forecasts_due
    assert again.forecast_error == 0.1 and again.forecast_errors_seen == 7


# --- the drift verdict -----------------------------------------------------------

DECLARED_IN = TokenPercentiles(p50=100, p95=400, p99=420)
DECLARED_OUT = TokenPercentiles(p50=130, p95=450, p99=600)


def learned(rate: float, prompt: float, *, rejected: float = 0.0, prompt_q: TokenQuantiles) -> ScalingState:
    state = ScalingState()
    tier = state.tier("h100")
    for _ in range(60):
        mix.observe(
            tier, signals(2, rate=rate, prompt=prompt, rejected=rejected, prompt_q=prompt_q), dt_s=15.0
        )
    return state


def test_prompts_beyond_max_model_len_are_reported_with_a_plan_that_fits_them() -> None:
    figures = dataclasses.replace(FIGURES, max_model_len=1024)
    state = learned(4.0, 600.0, rejected=6.0, prompt_q=TokenQuantiles(600.0, 980.0, 1010.0))
    verdict = drift.assess(state, {"h100": figures}, DECLARED_IN, DECLARED_OUT, previously=False)
    assert verdict.drifted is True
    assert verdict.reason == drift.REASON_PROMPTS_REJECTED
    assert "60.0% of requests are answered 4xx" in verdict.message
    assert "declared 100/400/420" in verdict.message
    implied = verdict.implied_input_tokens
    # 60 % of the requests are rejected: the true p50, p95 and p99 all lie beyond 1,024.
    assert implied is not None and implied.p50 >= 2048 and implied.p99 >= 2048


def test_a_mix_that_halves_capacity_is_a_drift_and_hysteresis_holds_it() -> None:
    heavy = learned(5.0, 3000.0, prompt_q=TokenQuantiles(2500.0, 7000.0, 8000.0))
    verdict = drift.assess(heavy, {"h100": FIGURES}, DECLARED_IN, DECLARED_OUT, previously=False)
    assert verdict.drifted is True and verdict.reason == drift.REASON_CAPACITY_MISMATCH
    assert verdict.observed is not None and verdict.observed.capacity_ratio is not None
    assert verdict.observed.capacity_ratio < 1.0 / drift.CAPACITY_RATIO_ON
    assert verdict.implied_input_tokens == TokenPercentiles(p50=2500, p95=7000, p99=8000)
    # A ratio between the two thresholds keeps the verdict it had.
    figures = FIGURES
    middle = learned(5.0, 1400.0, prompt_q=TokenQuantiles(1200.0, 3000.0, 3500.0))
    ratio = mix.mix_goal(middle.tiers["h100"], figures)
    assert ratio is not None and drift.CAPACITY_RATIO_OFF < 1.0 / ratio < drift.CAPACITY_RATIO_ON
    # (Declared lengths near the observed ones: only the capacity criterion is at play.)
    near = TokenPercentiles(p50=1000, p95=2500, p99=3000)
    held = drift.assess(middle, {"h100": figures}, near, DECLARED_OUT, previously=True)
    fresh = drift.assess(middle, {"h100": figures}, near, DECLARED_OUT, previously=False)
    assert held.drifted is True and fresh.drifted is False


def test_no_verdict_before_enough_requests_and_none_for_an_honest_mix() -> None:
    thin = ScalingState()
    mix.observe(thin.tier("h100"), signals(1, rate=1.0, prompt=3000.0), dt_s=15.0)
    assert drift.assess(thin, {"h100": FIGURES}, DECLARED_IN, DECLARED_OUT, previously=None).drifted is None
    honest = learned(5.0, 210.0, prompt_q=TokenQuantiles(100.0, 400.0, 420.0))
    verdict = drift.assess(honest, {"h100": FIGURES}, DECLARED_IN, DECLARED_OUT, previously=None)
    assert verdict.drifted is False and verdict.reason == drift.REASON_MATCHES_PLAN


def test_decide_learns_the_mix_tick_by_tick_and_the_verdict_follows() -> None:
    """Three minutes of prompts ten times the declared ones through decide(): the
    verdict turns from 'not enough data' to drifted as the requests come in."""
    policy = config()
    state: ScalingState | None = None
    verdicts = []
    for tick in range(16):
        sig = signals(4, rate=5.0, prompt=2000.0, prompt_q=TokenQuantiles(1800.0, 4000.0, 4200.0))
        _, state = decide(ctx(T0 + tick * PERIOD, policy, sig, [5.0] * 60), state)
        verdicts.append(
            drift.assess(state, {"h100": FIGURES}, DECLARED_IN, DECLARED_OUT, previously=None).drifted
        )
    # 300 requests at 5 req/s: the first verdict comes after a minute of traffic.
    first = verdicts.index(True)
    assert verdicts[:first] == [None] * first
    assert first * PERIOD <= mix.MIX_FULL_REQUESTS / 5.0


def test_prompts_ten_times_the_declared_ones_are_a_drift_even_when_decode_hides_them() -> None:
    """Long outputs make decode dominate, so a 5x longer prompt moves capacity by less
    than 2x; its length still changes the KV sizing the plan made."""
    figures = dataclasses.replace(FIGURES, mean_output_tokens=2000.0)
    out = TokenPercentiles(p50=1500, p95=3000, p99=3500)
    state = ScalingState()
    tier = state.tier("h100")
    for _ in range(60):
        sig = signals(
            2, rate=5.0, prompt=1000.0, output=2000.0, prompt_q=TokenQuantiles(900.0, 2000.0, 2100.0)
        )
        mix.observe(
            tier,
            dataclasses.replace(
                sig,
                load=dataclasses.replace(sig.load, generation_tokens=TokenQuantiles(1500.0, 3000.0, 3500.0)),
            ),
            15.0,
        )
    ratio = mix.mix_goal(tier, figures)
    assert ratio is not None and 1.0 / ratio < drift.CAPACITY_RATIO_ON
    verdict = drift.assess(state, {"h100": figures}, DECLARED_IN, out, previously=False)
    assert verdict.drifted is True and verdict.reason == drift.REASON_LENGTHS_MISMATCH
    assert verdict.message.startswith(
        "the prompt p50 is 9.0x longer than declared (900 tokens, declared 100)"
    )
