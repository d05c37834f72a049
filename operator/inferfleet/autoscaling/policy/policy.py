"""The inferfleet policy: `decide(ctx, state) -> (recommendation, state)`.

Per tier, the target is the largest of six signals:

- warm minimum: `minReplicas`, always held (the warm minimum is the premium paid for
  responsive scaling);
- predictive: the forecast rate at now + lead time (the tier's cold start plus a
  margin) plus headroom (autoscaling.policy.headroom: the forecaster's measured error), divided
  by the tier's capacity for the traffic it really gets (the plan's usable RPS rescaled
  to the request mix the engines report, autoscaling.policy.mix, and corrected by what Little's
  law measures, autoscaling.policy.capacity) and placed across tiers by cost;
- reactive: the queue, TTFT and busy batch slots, the signals production teams scale
  on (production-lessons article: queue depth and TTFT, not CPU; autoscaling.policy.reactive);
- escalation: a queue that keeps growing, or a TTFT p99 above the SLO with requests
  waiting, for ESCALATE_AFTER_S raises the tier whatever the forecast, the plan or the
  learned capacity say, and again after each lead time while it lasts (autoscaling.policy.reactive);
- scheduled: pre-warm windows from the spec, opened one lead time early;
- wake: a front-door pool that holds requests with no replica wanted wakes its
  cheapest tier whose nodes hold the weights (autoscaling.policy.wake).

Scale-up applies at once. Scale-down is slow and safe: the target must stay low for
the whole stabilization window (the window's maximum is used), at most N replicas
(or a share of the fleet) go per step with a cooldown between steps, never while
requests wait, never on missing data, and never before a full window has been
observed (so a restart with lost state cannot cause a scale-down). The step limit and
cooldown guard against a target that is wrong; when the engines themselves show the
surplus idle (the sequences they run would fill the replicas kept to at most
IDLE_OCCUPANCY of their batch slots), the surplus goes in one step. A tier whose
replicas keep failing to become Ready is skipped for a while and its demand placed
on the next tier.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from inferfleet.autoscaling.policy import headroom as headroom_rules
from inferfleet.autoscaling.policy import mix, wake
from inferfleet.autoscaling.policy import prewarm_windows as cron
from inferfleet.autoscaling.policy.capacity import learn_capacity
from inferfleet.autoscaling.policy.demand_placement import (
    UNPRICED_RANK,
    Placement,
    TierSlot,
    place,
    replicas_for,
)
from inferfleet.autoscaling.policy.forecast import (
    BURST_QUANTILE,
    BURST_WINDOW_MIN,
    Forecast,
    ForecastConfig,
    burst_level_rps,
    forecast,
    smooth,
)
from inferfleet.autoscaling.policy.observed_tier import ObservedTier
from inferfleet.autoscaling.policy.reactive import OCCUPANCY_TARGET, escalation_target, reactive_target
from inferfleet.autoscaling.policy.types import (
    SIGNAL_ESCALATION,
    SIGNAL_HOLD,
    SIGNAL_PREDICTIVE,
    SIGNAL_REACTIVE,
    SIGNAL_SCHEDULED,
    SIGNAL_WAKE,
    SIGNAL_WARM_MINIMUM,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierRecommendation,
    TierState,
)
from inferfleet.autoscaling.policy.window import SequenceWindow
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy

UNBOUNDED_REPLICAS = 10_000
_FORECAST_MIN_POINTS = ForecastConfig().min_points
# A tier that asked for replicas and saw no new one Ready for this long (at least
# twice its lead time) is failing (no GPU nodes, image pull errors): skip it for a while.
FAIL_AFTER_MIN_S = 600.0
FAIL_RETRY_S = 1800.0
# The base load (for on-demand vs spot placement) is the trough of the last hour.
BASE_WINDOW_MIN = 60
# Half the busy-slot share the reactive rule sizes a tier back to: replicas kept at this
# occupancy or less are far from any limit, so the surplus above them is idle.
IDLE_OCCUPANCY = OCCUPANCY_TARGET / 2.0


def tier_policy_of(config: PolicyConfig, name: str) -> TierPolicy:
    policy = config.tier(name)
    return policy if policy is not None else TierPolicy(name=name, min_replicas=1)


def cost_rank(tier: TierContext, policy: TierPolicy, index: int) -> float:
    """Cost per served request, comparable across tiers; spec order breaks ties."""
    figures = tier.figures
    if figures.cost_per_million_tokens_usd is not None:
        return figures.cost_per_million_tokens_usd + index * 1e-9
    if policy.cost_per_gpu_hour is not None and figures.usable_rps > 0:
        # USD per million requests: comparable between tiers, not with the line above;
        # plans carry costPerMillionTokensUsd for every tier or for none.
        return policy.cost_per_gpu_hour * figures.gpus_per_replica / figures.usable_rps / 3600 * 1e6
    return UNPRICED_RANK + index


def plan_slot(tier: TierContext, config: PolicyConfig, index: int, usable_rps: float) -> TierSlot:
    """A tier as demand placement sees it from its plan and the spec's policy alone,
    nothing observed: what static-peak, the simulator's common start and the oracle
    place demand on (`index`: its place in the spec, the tie-break of equal costs)."""
    policy = tier_policy_of(config, tier.name)
    return TierSlot(
        name=tier.name,
        usable_rps=usable_rps,
        min_replicas=policy.min_replicas,
        max_replicas=max_replicas_of(tier, policy),
        cost_rank=cost_rank(tier, policy, index),
        spot=policy.capacity_type == "spot",
        share=policy.routing_share,
    )


def max_replicas_of(tier: TierContext, policy: TierPolicy) -> int:
    if policy.max_replicas is not None:
        return max(policy.max_replicas, policy.min_replicas)
    if tier.figures.replicas_for_peak:
        return max(tier.figures.replicas_for_peak, policy.min_replicas)
    return UNBOUNDED_REPLICAS


def _track_readiness(state: TierState, current: int, ready: int | None, lead_s: float, now_s: float) -> bool:
    """Update the failure-to-become-ready tracking; True while the tier is skipped."""
    if state.failing_until_s is not None:
        if now_s < state.failing_until_s:
            return True
        state.failing_until_s = None
        state.pending_since_s = None
    if ready is None:
        return False
    if current > ready:
        if state.pending_since_s is None or ready > state.pending_ready:
            state.pending_since_s = now_s
            state.pending_ready = ready
        elif now_s - state.pending_since_s >= max(FAIL_AFTER_MIN_S, 2.0 * lead_s):
            state.failing_until_s = now_s + FAIL_RETRY_S
            state.pending_since_s = None
            return True
    else:
        state.pending_since_s = None
        state.pending_ready = ready
    return False


def _finite_tail(history: Sequence[float], count: int) -> list[float]:
    start = max(0, len(history) - count)
    return [v for v in history[start:] if math.isfinite(v) and v >= 0.0]


def _known_history(history: Sequence[float] | None) -> Sequence[float] | None:
    """The history from the service's first recorded minute on (the metrics cache pads a
    new service's series with gaps back to its retention): empty for a service that has
    recorded none yet. None stays None (unknown)."""
    if history is None:
        return None
    first = 0
    size = len(history)
    while first < size and not math.isfinite(history[first]):
        first += 1
    return history if first == 0 else SequenceWindow(history, first, size)


def _demand_now(ctx: ScalingContext) -> float | None:
    # A split's prefill tier finishes a prefill of each request its decode tier finishes.
    rates = [
        t.signals.request_rate_rps
        for t in ctx.tiers
        if t.signals.request_rate_rps is not None and not _prefills(ctx.policy, t.name)
    ]
    if rates:
        return float(sum(rates))
    if ctx.rate_history_rps:
        tail = _finite_tail(ctx.rate_history_rps, 1)
        if tail:
            return tail[-1]
    return None


def _forecast_config(config: PolicyConfig) -> ForecastConfig:
    return ForecastConfig(
        seasonality=config.seasonality,
        history_window_min=max(60, int(config.history_window_hours * 60)),
        interruption_hold_min=config.interruption_hold_min,
    )


def _scheduled(
    config: PolicyConfig, tiers: Sequence[ObservedTier], cheapest: str | None, now_s: float
) -> dict[str, int]:
    targets: dict[str, int] = {}
    leads = {t.ctx.name: t.lead_s for t in tiers}
    for rule in config.prewarm:
        name = rule.tier or cheapest
        if name is None or name not in leads:
            continue
        # Open the window one lead time early, so the replicas are Ready when it starts.
        lead_s = leads[name]
        if cron.window_open(rule.schedule, rule.duration_s + lead_s, now_s + lead_s, rule.time_zone):
            targets[name] = max(targets.get(name, 0), rule.replicas)
    return targets


def push_window(
    window: list[tuple[float, int]], now_s: float, target: int, span_s: float, keep_max: bool
) -> int:
    """Sliding-window max (or min) with a monotone deque kept in a list; returns the extreme."""
    if keep_max:
        while window and window[-1][1] <= target:
            window.pop()
    else:
        while window and window[-1][1] >= target:
            window.pop()
    window.append((now_s, target))
    while len(window) > 1 and window[0][0] <= now_s - span_s:
        window.pop(0)
    return window[0][1]


def _within_bounds(replicas: int, policy: TierPolicy) -> int:
    """`replicas` moved into the spec's own [minReplicas, maxReplicas]. A maxReplicas left
    empty (the plan's peak sizing) only caps targets: it moves with the plan, and a
    changed plan is paced like any other change of demand."""
    if policy.max_replicas is not None:
        replicas = min(replicas, max(policy.max_replicas, policy.min_replicas))
    return max(replicas, policy.min_replicas)


def _pace(
    state: TierState,
    *,
    current: int,
    target: int,
    now_s: float,
    up: ScalePacing,
    down: ScalePacing,
    may_scale_down: bool,
    busy_replicas: float | None = None,
) -> tuple[int, str]:
    """Apply stabilization, cooldowns and step limits. Returns (replicas, note).
    `busy_replicas`: the replicas the running sequences fill to IDLE_OCCUPANCY (None:
    unknown); a scale-down keeping at least that many skips the step limit and cooldown."""
    down_target = push_window(state.recent_targets, now_s, target, down.stabilization_s, keep_max=True)
    if state.observed_since_s is None:
        state.observed_since_s = now_s
    if target > current:
        if (
            up.cooldown_s
            and state.last_scale_up_s is not None
            and now_s - state.last_scale_up_s < up.cooldown_s
        ):
            return current, "scale-up cooldown"
        step = up.step_limit(current)
        new = target if step is None else min(target, current + step)
        return new, ""
    if down_target >= current:
        return current, "stabilizing" if target < current else ""
    if not may_scale_down:
        return current, "scale-down blocked (queue or missing data)"
    if now_s - state.observed_since_s < down.stabilization_s:
        return current, "stabilizing (window not yet observed)"
    if busy_replicas is not None and down_target >= busy_replicas:
        return down_target, ""  # the surplus is idle: no step limit, no cooldown
    for last in (state.last_scale_down_s, state.last_scale_up_s):
        if last is not None and now_s - last < down.cooldown_s:
            return current, "scale-down cooldown"
    step = down.step_limit(current)
    new = down_target if step is None else max(down_target, current - step)
    return new, ""


def decide(ctx: ScalingContext, state: ScalingState | None = None) -> tuple[Recommendation, ScalingState]:
    """One decision for all tiers. Pure: reads ctx and a copy of state, returns both.

    The steps, in order: observe each tier (readiness, mix, learned capacity), forecast
    the service demand one lead time ahead, place it across tiers, then per tier take
    the largest target and pace it (stabilize, cooldowns, step limits, the spec's bounds).
    """
    state = ScalingState() if state is None else state.copy()
    now = ctx.now_s
    last = state.last_decision_s
    dt_s = ctx.policy.sync_period_s if last is None else max(0.0, now - last)
    for tier in ctx.tiers:
        mix.observe(state.tier(tier.name), tier.signals, dt_s)
    service = mix.service_mix(state.tier(tier.name) for tier in ctx.tiers)
    history = _known_history(ctx.rate_history_rps)
    smooth_traffic = history is not None and smooth(history)
    tiers = [
        _observe_tier(tier, ctx.policy, state, now, dt_s=dt_s, service=service, smooth_traffic=smooth_traffic)
        for tier in ctx.tiers
    ]
    demand = _forecast_demand(ctx, history, tiers, state)
    placed = _place_demand(ctx, demand, tiers)
    results = [_decide_tier(t, demand, placed, state.tier(t.ctx.name), now) for t in tiers]
    state.last_decision_s = now
    return _summarize(results, now, demand), state


@dataclass(frozen=True, slots=True)
class _Demand:
    """The service demand this decision sizes for, and how it was found."""

    config: PolicyConfig  # with this decision's headroom
    demand_now_rps: float | None
    forecast: Forecast | None
    demand_rps: float | None  # the forecast when there is one, else the current rate
    base_rps: float  # the trough of the last hour (on-demand vs spot placement)
    history_gap: bool  # the history is unknown or has holes: hold what runs
    # Bursty traffic: the rate most of the last half hour's requests came at or below
    # (forecast.burst_level_rps); None when the traffic is not bursty.
    burst_rps: float | None = None

    @property
    def with_headroom_rps(self) -> float | None:
        """The demand plus this decision's headroom; None without a demand."""
        return None if self.demand_rps is None else self.demand_rps * (1.0 + self.config.headroom)

    @property
    def provisioned_rps(self) -> float | None:
        """What the fleet is sized for: the demand plus headroom, or the burst level when
        that is higher (a quantile of real minutes: no forecast error to cover on top)."""
        with_headroom = self.with_headroom_rps
        return None if with_headroom is None else max(with_headroom, self.burst_rps or 0.0)

    @property
    def bursty(self) -> bool:
        """Whether the burst level, not the demand, sizes the fleet."""
        return self.burst_rps is not None and self.burst_rps > (self.with_headroom_rps or 0.0)


@dataclass(frozen=True, slots=True)
class _Placed:
    """Demand placed across tiers, plus the other service-wide targets."""

    placement: Placement | None
    woken: dict[str, wake.Wake]
    held_at_door: frozenset[str]
    scheduled: dict[str, int]


def _observe_tier(
    tier: TierContext,
    config: PolicyConfig,
    state: ScalingState,
    now_s: float,
    *,
    dt_s: float,
    service: mix.ServiceMix,
    smooth_traffic: bool,
) -> ObservedTier:
    """One tier's inputs: what it runs, whether it is failing, and its learned capacity.
    Updates the tier's readiness tracking, mix factor and capacity factor (its observed
    mix is already folded in; `service` is every tier's, the prior of a tier that has
    seen few requests itself; `smooth_traffic`: the service's recent minutes are known
    to be free of bursts)."""
    policy = tier_policy_of(config, tier.name)
    tier_state = state.tier(tier.name)
    signals = tier.signals
    if signals.desired_replicas is not None:
        current = signals.desired_replicas
    elif tier_state.last_desired is not None:
        current = tier_state.last_desired
    else:
        current = policy.min_replicas
    lead_s = tier.figures.cold_start_s + config.cold_start_margin_s
    missing = signals.ready_replicas is None or signals.waiting is None
    failing = _track_readiness(tier_state, current, signals.ready_replicas, lead_s, now_s)
    mix_factor = mix.update_mix_factor(tier_state, tier.figures, dt_s, service)
    prior_rps = tier.figures.usable_rps * mix_factor
    factor = learn_capacity(
        tier_state,
        tier,
        signals.ready_replicas,
        config,
        dt_s=dt_s,
        prior_rps=prior_rps,
        now_s=now_s,
        service=service,
        mix_settling=mix.settling(tier_state, tier.figures, service),
        smooth_traffic=smooth_traffic,
    )
    return ObservedTier(
        ctx=tier,
        policy=policy,
        current=current,
        ready=signals.ready_replicas,
        missing=missing or not tier.figures.feasible,
        lead_s=lead_s,
        max_replicas=max_replicas_of(tier, policy),
        failing=failing,
        usable_rps=prior_rps * factor,
        dt_s=dt_s,
    )


def _forecast_demand(
    ctx: ScalingContext, history: Sequence[float] | None, tiers: Sequence[ObservedTier], state: ScalingState
) -> _Demand:
    """Predictive: the service demand one lead time ahead, from `history` (the service's
    known minutes, `_known_history`). Scores and files forecasts for the measured
    headroom."""
    now = ctx.now_s
    config = ctx.policy
    demand_now = _demand_now(ctx)
    fc: Forecast | None = None
    demand = demand_now
    headroom_rules.check_forecasts(state, now, history, config.headroom)
    # This decision's headroom: the forecaster's measured error (or the fixed share).
    config = dataclasses.replace(config, headroom=headroom_rules.headroom(config, state))
    if config.predictive_enabled and history:
        lead_s = max((t.lead_s for t in tiers if t.ctx.figures.feasible), default=0.0)
        fc = forecast(history, lead_s / 60.0, _forecast_config(config))
        if fc.rate_rps is not None:
            # The forecast already starts from the last minutes' level: taking the
            # last-minute rate on top would chase sub-minute bursts that are over long
            # before a replica could start (the reactive path owns those).
            demand = fc.rate_rps
            if fc.method != "interrupted":  # a deliberate hold, not a prediction
                headroom_rules.file_forecast(state, now, lead_s, fc.rate_rps)
    # No forecast because the history is unknown (its query failed) or has holes since
    # the service's first minute: hold what runs. A history too short for one, or none
    # at all (a new service), is not a gap: the current rate and the observed
    # stabilization window are all anyone could know, and holding the first peak for
    # the half hour a forecast needs costs replicas for nothing.
    history_gap = config.predictive_enabled and (
        history is None or (fc is not None and fc.rate_rps is None and len(history) >= _FORECAST_MIN_POINTS)
    )
    base_rps = demand or 0.0
    if history:
        recent = _finite_tail(history, BASE_WINDOW_MIN)
        if len(recent) >= BASE_WINDOW_MIN // 2:
            base_rps = min(base_rps, min(recent) * (1.0 + config.headroom))
    burst = burst_level_rps(history) if config.predictive_enabled and history else None
    return _Demand(config, demand_now, fc, demand, base_rps, history_gap, burst)


def _learned_cost_rank(t: ObservedTier, index: int) -> float:
    """The plan's cost per served request, at what a replica really serves: the plan
    priced a request of the declared mix, and a mix that costs one GPU type more than
    another (long prompts on a prefill-bound tier) changes which tier is cheaper."""
    rank = cost_rank(t.ctx, t.policy, index)
    plan_rps = t.ctx.figures.usable_rps
    if rank >= UNPRICED_RANK or plan_rps <= 0.0 or t.usable_rps <= 0.0:
        return rank
    return rank * plan_rps / t.usable_rps


def _place_demand(ctx: ScalingContext, demand: _Demand, tiers: Sequence[ObservedTier]) -> _Placed:
    """Place the demand across tiers by cost; the front door's wakes and the pre-warm
    windows."""
    config = demand.config
    slots = [
        TierSlot(
            name=t.ctx.name,
            usable_rps=t.usable_rps if t.ctx.figures.feasible else 0.0,
            min_replicas=t.policy.min_replicas,
            max_replicas=t.max_replicas,
            cost_rank=_learned_cost_rank(t, index),
            spot=t.policy.capacity_type == "spot",
            share=t.policy.routing_share,
            # A split's prefill tier takes no whole requests (placed below, from its decode tier's).
            available=not t.failing and t.ctx.figures.feasible and not _prefills(config, t.ctx.name),
        )
        for index, t in enumerate(tiers)
    ]
    placement: Placement | None = None
    provisioned = demand.provisioned_rps
    if provisioned is not None:
        placement = place(provisioned, demand.base_rps * (1.0 + config.headroom), slots)
        placement = _prefill_for_decode(config, placement, tiers)
    # The front door: a pool that holds requests with no replica wanted wakes a tier.
    woken = wake.wakes(
        ctx.front_door,
        [
            wake.WakeCandidate(
                name=t.ctx.name,
                current=t.current,
                runnable=t.ctx.figures.feasible and not t.failing,
                cost_rank=slot.cost_rank,
                max_replicas=t.max_replicas,
                slots_per_replica=t.ctx.figures.max_concurrency,
            )
            for t, slot in zip(tiers, slots, strict=True)
        ],
    )
    woken = _wake_both_roles(config, woken, tiers)
    available = [s for s in slots if s.available and s.usable_rps > 0]
    cheapest = min(available, key=lambda s: s.cost_rank).name if available else None
    return _Placed(
        placement=placement,
        woken=woken,
        held_at_door=wake.held_tiers(ctx.front_door),
        scheduled=_scheduled(config, tiers, cheapest, ctx.now_s),
    )


def _prefills(config: PolicyConfig, tier: str) -> bool:
    return config.split is not None and config.split[0] == tier


def _prefill_for_decode(
    config: PolicyConfig, placement: Placement, tiers: Sequence[ObservedTier]
) -> Placement:
    """A deployed prefill/decode split: every request placed on the decode tier is
    prefilled by the prefill tier, so the prefill tier is sized for that rate at its own
    prefill rate (every request counted, though the picker prefills a prompt with few
    uncached tokens where it decodes: it errs toward more prefill capacity)."""
    if config.split is None:
        return placement
    prefill, decode = config.split
    pool = next((t for t in tiers if t.ctx.name == prefill), None)
    if pool is None:
        return placement
    rps = placement.rps.get(decode, 0.0)
    needed = replicas_for(rps, pool.usable_rps)
    return dataclasses.replace(
        placement,
        rps={**placement.rps, prefill: rps},
        needed={**placement.needed, prefill: needed},
        replicas={**placement.replicas, prefill: max(needed, placement.replicas.get(prefill, 0))},
    )


def _wake_both_roles(
    config: PolicyConfig, woken: dict[str, wake.Wake], tiers: Sequence[ObservedTier]
) -> dict[str, wake.Wake]:
    """Scale from zero wakes a split's two roles together: a held request needs a decode
    pod and, for a long prompt, a prefill pod; whichever the front door woke, the other
    starts with it (at one replica, unless it runs already)."""
    if config.split is None:
        return woken
    current = {t.ctx.name: t.current for t in tiers}
    out = dict(woken)
    for tier, other in (config.split, config.split[::-1]):
        if tier in woken and other not in woken and current.get(other, 0) == 0:
            out[other] = wake.Wake(other, 1, f"woken with {tier}: {woken[tier].reason}")
    return out


def _tier_targets(
    t: ObservedTier, demand: _Demand, placed: _Placed, tier_state: TierState, now_s: float
) -> tuple[dict[str, int], dict[str, str]]:
    """Every signal's target for one tier, and why. Updates the escalation tracking."""
    config = demand.config
    name = t.ctx.name
    warm = t.policy.min_replicas
    targets: dict[str, int] = {SIGNAL_WARM_MINIMUM: warm}
    reasons: dict[str, str] = {SIGNAL_WARM_MINIMUM: f"warm minimum {warm}"}
    if t.failing:
        # Keep what runs, stop asking for what never comes; the placement already
        # moved this tier's demand to the next one.
        targets[SIGNAL_HOLD] = max(warm, t.ready or 0)
        reasons[SIGNAL_HOLD] = "tier keeps failing to become Ready; skipped"
    else:
        placement = placed.placement
        if placement is not None and not t.missing:
            measured = " (measured)" if config.headroom_mode == "measured" else ""
            fc = demand.forecast
            interrupted = (
                "; traffic stopped dead, the level from before is held (interrupted)"
                if fc is not None and fc.method == "interrupted"
                else ""
            )
            bursty = (
                f"; bursty: {BURST_QUANTILE:.0%} of the last {BURST_WINDOW_MIN} min's requests "
                f"came at up to {demand.burst_rps or 0.0:.2f} req/s"
                if demand.bursty
                else ""
            )
            targets[SIGNAL_PREDICTIVE] = placement.needed.get(name, 0)
            reasons[SIGNAL_PREDICTIVE] = (
                f"{placement.rps.get(name, 0.0):.2f} req/s placed here "
                f"(demand {demand.demand_rps or 0.0:.2f} req/s at +{t.lead_s:.0f} s, "
                f"+{config.headroom:.0%} headroom{measured}{interrupted}{bursty})"
            )
        reactive, why = reactive_target(t, config, tier_state, now_s)
        if reactive:
            targets[SIGNAL_REACTIVE] = reactive
            reasons[SIGNAL_REACTIVE] = why
        escalation, why = escalation_target(t, tier_state, config, now_s)
        if escalation:
            targets[SIGNAL_ESCALATION] = escalation
            reasons[SIGNAL_ESCALATION] = why
    if name in placed.scheduled:
        targets[SIGNAL_SCHEDULED] = placed.scheduled[name]
        reasons[SIGNAL_SCHEDULED] = f"pre-warm window holds {placed.scheduled[name]}"
    if name in placed.woken:
        targets[SIGNAL_WAKE] = placed.woken[name].replicas
        reasons[SIGNAL_WAKE] = placed.woken[name].reason
    return targets, reasons


def _may_scale_down(t: ObservedTier, demand: _Demand, placed: _Placed) -> bool:
    """Scale-down needs an empty queue, every signal, a whole history and no request
    held at the front door for this tier."""
    queue_empty = t.ctx.signals.waiting is not None and t.ctx.signals.waiting <= 0
    may_down = queue_empty and not t.missing
    if demand.history_gap and not t.failing:
        may_down = False  # do not shrink on partial knowledge
    if t.ctx.name in placed.held_at_door:
        may_down = False  # requests wait at the front door for this tier's pool
    return may_down


def _decide_tier(
    t: ObservedTier, demand: _Demand, placed: _Placed, tier_state: TierState, now_s: float
) -> TierRecommendation:
    """One tier: the largest target wins, capped at maxReplicas, then paced and bounded."""
    config = demand.config
    targets, reasons = _tier_targets(t, demand, placed, tier_state, now_s)
    signal = SIGNAL_HOLD if t.failing else max(targets, key=lambda key: (targets[key], _PRIORITY[key]))
    raw = min(t.max_replicas, max(targets.values()))
    if t.missing and not t.failing:
        # Missing data: hold what runs (raising to a floor is still safe).
        raw = max(raw, t.current)
    paced, note = _pace(
        tier_state,
        current=t.current,
        target=raw,
        now_s=now_s,
        up=config.scale_up,
        down=config.scale_down,
        may_scale_down=_may_scale_down(t, demand, placed),
        busy_replicas=_busy_replicas(t),
    )
    new, clamp = _bound(paced, t.policy)
    _record(tier_state, t, new, now_s)
    if new == t.current and raw != t.current:
        signal, reason = SIGNAL_HOLD, f"{note}; wanted {raw} ({reasons[signal]})"
    elif new == t.current:
        reason = reasons[signal] if signal != SIGNAL_HOLD else reasons[SIGNAL_HOLD]
        if t.missing:
            signal, reason = SIGNAL_HOLD, "signals missing; holding"
    else:
        reason = clamp or reasons[signal]
    if raw == t.max_replicas and max(targets.values()) > t.max_replicas:
        reason += f" (capped at maxReplicas {t.max_replicas})"
    share = None
    placement, provisioned = placed.placement, demand.provisioned_rps
    if placement is not None and provisioned:
        share = placement.rps.get(t.ctx.name, 0.0) / provisioned
    return TierRecommendation(
        name=t.ctx.name,
        replicas=new,
        current=t.current,
        signal=signal,
        reason=reason,
        targets=targets,
        traffic_share=share,
    )


def _busy_replicas(t: ObservedTier) -> float | None:
    """The replicas the tier's running sequences fill to IDLE_OCCUPANCY; None unknown."""
    running = t.ctx.signals.running
    slots = t.ctx.figures.max_concurrency
    if running is None or slots <= 0 or t.missing:
        return None
    return running / (slots * IDLE_OCCUPANCY)


def _bound(replicas: int, policy: TierPolicy) -> tuple[int, str]:
    """The paced replicas moved into the spec's bounds, and a note when that moved them.
    The spec's bounds move at once (maxReplicas lowered, minReplicas raised): no
    stabilization, cooldown, step limit or missing signal holds them back."""
    bounded = _within_bounds(replicas, policy)
    if bounded == replicas:
        return replicas, ""
    side = "maxReplicas" if bounded < replicas else "minReplicas"
    return bounded, f"moved to {side} {bounded} at once (the spec's bounds are not paced)"


def _record(tier_state: TierState, t: ObservedTier, new: int, now_s: float) -> None:
    """Remember this decision for the next one: scale times, the replicas asked, the queue."""
    if new > t.current:
        tier_state.last_scale_up_s = now_s
    elif new < t.current:
        tier_state.last_scale_down_s = now_s
    tier_state.last_desired = new
    tier_state.last_waiting = t.ctx.signals.waiting


def _summarize(results: Sequence[TierRecommendation], now_s: float, demand: _Demand) -> Recommendation:
    """The service's recommendation: the first tier that changes (else the most
    informative signal) leads; the reason lists every tier."""
    changed = [r for r in results if r.current is not None and r.replicas != r.current]
    lead = changed[0] if changed else max(results, key=lambda r: _PRIORITY.get(r.signal, 0))
    summary = "; ".join(f"{r.name} {r.current}->{r.replicas} {r.signal}: {r.reason}" for r in results)
    return Recommendation(
        now_s=now_s,
        tiers=tuple(results),
        signal=lead.signal,
        reason=summary,
        forecast_rps=None if demand.forecast is None else demand.forecast.rate_rps,
        demand_rps=demand.demand_now_rps,
    )


# Tie-break between equal targets: name the most informative signal.
_PRIORITY = {
    SIGNAL_HOLD: 0,
    SIGNAL_WARM_MINIMUM: 1,
    SIGNAL_SCHEDULED: 2,
    SIGNAL_PREDICTIVE: 3,
    SIGNAL_REACTIVE: 4,
    SIGNAL_ESCALATION: 5,
    SIGNAL_WAKE: 6,
}
