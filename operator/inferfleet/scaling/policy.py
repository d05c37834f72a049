"""The inferfleet policy: `decide(ctx, state) -> (recommendation, state)`.

Per tier, the target is the largest of six signals:

- warm minimum: `minReplicas`, always held (field guide 9.2: the warm minimum "is the
  premium you pay for responsive scaling");
- predictive: the forecast rate at now + lead time (the tier's cold start plus a
  margin) plus headroom (scaling.headroom: the forecaster's measured error), divided
  by the tier's capacity for the traffic it really gets (the plan's usable RPS rescaled
  to the request mix the engines report, scaling.mix, and corrected by what Little's
  law measures) and placed across tiers by cost;
- reactive: the queue, TTFT and busy batch slots, the signals production teams scale
  on (production-lessons article: queue depth and TTFT, not CPU). A queue above its
  allowance sizes the tier for its arrivals plus the backlog still left when a new
  replica is Ready, so the step grows with the breach; a TTFT p99 breach with requests
  waiting multiplies the Ready replicas by the breach ratio (at most x2); slots nearly
  all busy size the tier back to a target share;
- escalation: a queue that keeps growing, or a TTFT p99 above the SLO with requests
  waiting, for ESCALATE_AFTER_S raises the tier whatever the forecast, the plan or the
  learned capacity say, and again after each lead time while it lasts;
- scheduled: pre-warm windows from the spec, opened one lead time early;
- wake: a front-door pool that holds requests with no replica wanted wakes its
  cheapest tier whose nodes hold the weights (scaling.wake).

Scale-up applies at once. Scale-down is slow and safe: the target must stay low for
the whole stabilization window (the window's maximum is used), at most N replicas
(or a share of the fleet) go per step with a cooldown between steps, never while
requests wait, never on missing data, and never before a full window has been
observed (so a restart with lost state cannot cause a scale-down). A tier whose
replicas keep failing to become Ready is skipped for a while and its demand placed
on the next tier.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from inferfleet.scaling import cron, mix, wake
from inferfleet.scaling import headroom as headroom_rules
from inferfleet.scaling.forecast import Forecast, ForecastConfig, forecast
from inferfleet.scaling.placement import UNPRICED_RANK, Placement, TierSlot, place
from inferfleet.scaling.types import (
    SIGNAL_ESCALATION,
    SIGNAL_HOLD,
    SIGNAL_PREDICTIVE,
    SIGNAL_REACTIVE,
    SIGNAL_SCHEDULED,
    SIGNAL_WAKE,
    SIGNAL_WARM_MINIMUM,
    PolicyConfig,
    Recommendation,
    ScalePacing,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierPolicy,
    TierRecommendation,
    TierState,
)
from inferfleet.scaling.window import SequenceWindow

UNBOUNDED_REPLICAS = 10_000
_FORECAST_MIN_POINTS = ForecastConfig().min_points
# The queue a new replica's capacity should drain, in seconds of its throughput:
# requests already waiting are late; clearing them within two minutes of the new
# replicas' arrival keeps the tail short without sizing the fleet for the backlog.
BACKLOG_DRAIN_S = 120.0
# A TTFT breach only scales when there is load behind it (a queue, or arrivals near
# what the Ready replicas are estimated to carry): one long prompt on an idle replica,
# or a few-second burst the fleet has already absorbed, breaches the p99 too, and
# more replicas would not have helped.
TTFT_LOAD_EVIDENCE = 0.8
TTFT_MAX_STEP_RATIO = 2.0
# The p99 is read over this window (the live loop's 2-minute rate window): a p99 taken
# sooner after new replicas became Ready still remembers the minutes before them.
TTFT_WINDOW_S = 120.0
# Batch slots this full say the tier is at its real capacity; it is sized back to the
# target share (Kubernetes HPA on the same utilization would aim at 70 %).
OCCUPANCY_HIGH = 0.85
OCCUPANCY_TARGET = 0.75
REACTIVE_MAX_ADD = 4
# A tier that asked for replicas and saw no new one Ready for this long (at least
# twice its lead time) is failing (no GPU nodes, image pull errors): skip it for a while.
FAIL_AFTER_MIN_S = 600.0
FAIL_RETRY_S = 1800.0
# The base load (for on-demand vs spot placement) is the trough of the last hour.
BASE_WINDOW_MIN = 60
# Learned capacity: the plan's usable RPS is a roofline estimate for the declared
# workload; what the fleet measures says how far off it is for the traffic it gets.
# Little's law gives the measurement: a request holds a slot for busy slots / arrival
# rate seconds. The plan's roofline carries that hold time from the load it was seen
# at to a full replica (decode steps slow as the batch grows and as prefill takes a
# larger share of the GPU), which gives the requests/s that fill a replica to its
# target batch; prefill itself is kept under CAPACITY_PREFILL_TARGET. The correction
# factor follows that estimate slowly up and quickly down; a breach under load cuts
# it at once.
# Square-root staffing (Halfin-Whitt): c slots at c - beta*sqrt(c) busy keep the
# chance that an arrival finds them all busy small whatever c is, so big batches run
# fuller than small ones.
CAPACITY_SLOT_BETA = 0.5
CAPACITY_SLOT_TARGET_MIN = 0.5
CAPACITY_PREFILL_TARGET = 0.8
MAX_PREFILL_SHARE = 0.9  # decode always keeps some of the GPU (chunked prefill)
CAPACITY_RISE_S = 600.0
CAPACITY_FALL_S = 120.0
CAPACITY_MIN_BATCH = 1.0  # busy slots per replica for a hold time to mean anything
CAPACITY_AVG_S = 180.0  # averaging window of busy slots and arrivals: one scrape is noise
CAPACITY_CUT = 0.9
CAPACITY_MIN = 0.5
CAPACITY_MAX = 4.0
CAPACITY_EVIDENCE_LOAD = 0.7
# Slots this full while carrying no more than the estimate count as a breach.
CAPACITY_SLOT_FULL = 0.8
# Escalation, the floor no forecast or capacity estimate can out-vote: a queue that keeps
# growing past its allowance, or a TTFT p99 above the SLO with requests waiting, for
# ESCALATE_AFTER_S raises the tier. It raises it again after each lead time (cold start
# plus margin: the replicas asked for must have had time to become Ready) for as long
# as the breach lasts, so a sustained breach meets a scale-up within ESCALATE_AFTER_S
# plus one sync period, or within one lead time of replicas already on their way.
ESCALATE_AFTER_S = 30.0
# Each escalation sizes the tier by how much more arrives than the Ready replicas serve
# (at saturation, what they serve is their capacity, whatever the plan says), at least
# one replica more and at most double (HPA's default scale-up policy).
ESCALATE_MAX_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class _TierInputs:
    ctx: TierContext
    policy: TierPolicy
    current: int
    ready: int | None
    missing: bool
    lead_s: float
    max_replicas: int
    failing: bool
    usable_rps: float  # the plan's figure rescaled to the observed mix and learned capacity
    dt_s: float  # since the previous decision


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


def _queue_allowance(config: PolicyConfig, usable_rps: float) -> float:
    """Waiting requests one Ready replica may have before its queue is a breach.

    A replica can clear about ttft_target x usable requests within the SLO (Little's
    law, field guide 9.4): more waiting than that per replica is late whatever the
    queue-depth setting says.
    """
    return max(1.0, min(config.queue_depth_per_replica, config.ttft_target_ms / 1000.0 * usable_rps))


def _measured_capacity_rps(
    state: TierState, figures: TierFigures, ready: int, service: mix.ServiceMix = mix.NO_SERVICE_MIX
) -> float | None:
    """Requests/s one replica takes at its target batch, from Little's law and the
    roofline; None while there is too little load to measure a hold time."""
    running, rate = state.running_avg, state.rate_avg
    if running is None or rate is None or rate <= 0.0 or running / ready < CAPACITY_MIN_BATCH:
        return None
    slots = figures.max_concurrency
    batch_target = max(1.0, slots * CAPACITY_SLOT_TARGET_MIN, slots - CAPACITY_SLOT_BETA * math.sqrt(slots))
    batch_now = running / ready
    hold_s = running / rate
    step_now_ms = figures.decode_step_base_ms + figures.decode_step_per_seq_ms * batch_now
    step_target_ms = figures.decode_step_base_ms + figures.decode_step_per_seq_ms * batch_target
    if step_now_ms > 0.0:
        hold_s *= step_target_ms / step_now_ms
    # Prefill seconds per request on one replica: the observed mean prompt once there is
    # evidence, the declared one until then.
    prefill_s = 0.0
    if figures.prefill_tokens_per_s > 0.0:
        prompt = mix.mean_prompt_tokens(state, figures, service)
        if prompt:
            prefill_s = prompt / figures.prefill_tokens_per_s
    if prefill_s <= 0.0:
        return batch_target / hold_s
    # hold(x) = base / (1 - x*prefill_s), base being the hold free of prefill's share;
    # x * hold(x) = batch_target solves to the expression below.
    share_now = min(MAX_PREFILL_SHARE, rate / ready * prefill_s)
    base_hold_s = hold_s * (1.0 - share_now)
    capacity = batch_target / (base_hold_s + batch_target * prefill_s)
    return min(capacity, CAPACITY_PREFILL_TARGET / prefill_s)


def _learn_capacity(
    state: TierState,
    tier: TierContext,
    ready: int | None,
    config: PolicyConfig,
    *,
    dt_s: float,
    prior_rps: float,
    now_s: float,
    service: mix.ServiceMix = mix.NO_SERVICE_MIX,
    mix_settling: bool = False,
) -> float:
    """Update and return the tier's capacity factor: how far the engines' measured
    capacity sits from `prior_rps`, the plan's usable RPS rescaled to the observed mix."""
    factor = state.capacity_factor
    signals = tier.signals
    figures = tier.figures
    usable = prior_rps
    if (
        ready is None
        or ready <= 0
        or usable <= 0
        or signals.request_rate_rps is None
        or signals.waiting is None
    ):
        return factor
    weight = min(1.0, dt_s / CAPACITY_AVG_S)
    if signals.running is not None and figures.max_concurrency > 0:
        state.running_avg = mix.average(state.running_avg, signals.running, weight)
        sample = signals.running / (ready * figures.max_concurrency)
        state.slot_use_avg = mix.average(state.slot_use_avg, sample, weight)
    load = signals.request_rate_rps / ready / (usable * factor)
    p99 = signals.ttft_p99_ms
    allowance = _queue_allowance(config, usable * factor)
    breach = (
        (p99 is not None and p99 > config.ttft_target_ms)
        or signals.waiting > allowance * ready
        or (state.slot_use_avg is not None and state.slot_use_avg >= CAPACITY_SLOT_FULL)
    )
    state.breach_streak = state.breach_streak + 1 if breach else 0
    if mix_settling and breach:
        # The request mix the engines report is heavier than the plan's and its factor is
        # still on the way down: that explains the breach, and cutting this factor too
        # would count the heavier mix twice (a fleet held ~1.5x too large for the half
        # hour this factor takes to rise back). Escalation and the reactive rules carry
        # the breach meanwhile.
        state.breach_streak = 0
    elif state.breach_streak >= 2 and CAPACITY_EVIDENCE_LOAD <= load <= 1.0:
        # A sustained breach while carrying about what the estimate says a replica can:
        # the estimate is wrong. (Above it, or for one tick, it is a burst: the
        # reactive path acts and the estimate stays.) Once per time a cut can show in
        # the fleet: while the replicas the last cut asked for are starting, or the p99
        # window still remembers the minutes before them, the breach is the evidence
        # already acted on, and cutting again would compound one burst into several
        # cuts (a fleet held too large for the ten minutes the factor takes to rise
        # back).
        if _cut_can_show(state, figures, now_s):
            factor = max(CAPACITY_MIN, factor * CAPACITY_CUT)
            state.capacity_cut_s = now_s
        state.breach_streak = 0
    elif not breach and signals.request_rate_rps > 0.0:
        # Only while requests arrive: when arrivals stop (a minute without one), the
        # averages drain at their own pace and their ratio is no hold time (a fleet idle
        # in a traffic gap would learn a capacity it never measured).
        measured = _measured_capacity_rps(state, figures, ready, service)
        if measured is not None:
            goal = min(CAPACITY_MAX, max(CAPACITY_MIN, measured / usable))
            pace_s = CAPACITY_RISE_S if goal > factor else CAPACITY_FALL_S
            factor += (goal - factor) * min(1.0, dt_s / pace_s)
    state.capacity_factor = factor
    return factor


def _cut_can_show(state: TierState, figures: TierFigures, now_s: float) -> bool:
    """Whether a breach now is fresh evidence about the capacity estimate: the replicas
    the last cut asked for had time to start and the TTFT window to see them."""
    settle_s = figures.cold_start_s + TTFT_WINDOW_S
    return state.capacity_cut_s is None or now_s - state.capacity_cut_s >= settle_s


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
    rates = [t.signals.request_rate_rps for t in ctx.tiers if t.signals.request_rate_rps is not None]
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
    config: PolicyConfig, tiers: Sequence[_TierInputs], cheapest: str | None, now_s: float
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


def _reactive(tier: _TierInputs, config: PolicyConfig, state: TierState, now_s: float) -> tuple[int, str]:
    """Target from the queue and TTFT; 0 when neither is in breach."""
    signals = tier.ctx.signals
    ready = tier.ready or 0
    usable = tier.usable_rps
    if usable <= 0.0 or signals.waiting is None:
        return 0, ""
    allowance = _queue_allowance(config, usable)
    target = 0
    why = ""
    waiting = signals.waiting
    excess = waiting - allowance * ready
    arrivals = _arrivals_rps(tier, state, config.sync_period_s)
    if arrivals is None:
        # Without an arrival rate, assume the Ready replicas run at their usable rate.
        arrivals = ready * usable
    if waiting > 0 and excess > 0:
        # Replicas asked for now serve one lead time from now: size them for the backlog
        # still left then. A burst the Ready replicas drain on their own before that
        # (they carry more than arrives) needs no new replica, only patience.
        backlog = max(0.0, excess + (arrivals - ready * usable) * tier.ctx.figures.cold_start_s)
        needed = (arrivals * (1.0 + config.headroom) + backlog / BACKLOG_DRAIN_S) / usable
        if needed > ready:
            # Computed from Ready replicas, so ticks during a cold start ask for the same
            # thing instead of compounding; bounded like HPA's default scale-up policy
            # (double or add four per period) so one burst cannot ask for an absurd fleet
            # (nor an infinite one: the bound is applied before rounding).
            cap = max(2 * ready, ready + REACTIVE_MAX_ADD)
            target = cap if needed >= cap else min(cap, max(ready + 1, math.ceil(needed - 1e-9)))
            why = f"queue {waiting:.0f} > {allowance * ready:.0f} allowed"
    p99 = signals.ttft_p99_ms
    # Only when the queue rule has nothing to say: a backlog is sized above from its
    # size. The p99 covers the last window, so it still shows a burst the fleet has
    # already absorbed: only a queue now, with arrivals near what the Ready replicas
    # carry, says more replicas would still help.
    loaded = ready > 0 and waiting > 0 and arrivals >= TTFT_LOAD_EVIDENCE * usable * ready
    settled = _ttft_settled(tier, state, now_s)
    if target == 0 and loaded and settled and p99 is not None and p99 > config.ttft_target_ms:
        ratio = min(TTFT_MAX_STEP_RATIO, p99 / config.ttft_target_ms)
        target = max(ready + 1, math.ceil(ready * ratio - 1e-9))
        why = f"TTFT p99 {p99:.0f} ms > {config.ttft_target_ms:.0f} ms"
    # Busy slots are what the engines serve, whatever the plan says a replica can: a tier
    # whose batches are nearly full is at its capacity for the traffic it really gets.
    running = signals.running
    slots = tier.ctx.figures.max_concurrency
    if target == 0 and running is not None and ready > 0 and slots > 0:
        occupancy = running / (ready * slots)
        if occupancy > OCCUPANCY_HIGH:
            needed = math.ceil(running / (slots * OCCUPANCY_TARGET) - 1e-9)
            target = min(max(ready + 1, needed), max(2 * ready, ready + REACTIVE_MAX_ADD))
            why = f"{occupancy:.0%} of the batch slots busy"
    return target, why


def _ttft_settled(tier: _TierInputs, state: TierState, now_s: float) -> bool:
    """Whether the TTFT p99 can show the last scale-up: its replicas are Ready and the
    p99's window no longer holds only the minutes before them."""
    last = state.last_scale_up_s
    return last is None or now_s - last >= tier.ctx.figures.cold_start_s + TTFT_WINDOW_S


def _arrivals_rps(tier: _TierInputs, state: TierState, period_s: float) -> float | None:
    """Arrivals into the tier: what the engines take on plus what piles up in the queue
    (vLLM counts requests it serves; a growing queue is demand it has not reached). The
    growth is taken over at least one sync period: two readings a moment apart are noise."""
    signals = tier.ctx.signals
    if signals.request_rate_rps is None:
        return None
    growth = 0.0
    if signals.waiting is not None and state.last_waiting is not None:
        growth = max(0.0, (signals.waiting - state.last_waiting) / max(tier.dt_s, period_s, 1e-9))
    return signals.request_rate_rps + growth


def _escalation(tier: _TierInputs, state: TierState, config: PolicyConfig, now_s: float) -> tuple[int, str]:
    """The escalation target (0: none) and why; updates the tier's breach tracking."""
    signals = tier.ctx.signals
    waiting = signals.waiting
    ready = tier.ready
    if waiting is None or ready is None or tier.missing:
        state.breach_since_s = state.breach_waiting = None
        return 0, ""
    p99 = signals.ttft_p99_ms
    ttft_breach = (
        waiting > 0 and p99 is not None and p99 > config.ttft_target_ms and _ttft_settled(tier, state, now_s)
    )
    queue_limit = config.queue_depth_per_replica * max(1, ready)
    reference = state.breach_waiting if state.breach_since_s is not None else state.last_waiting
    growing = waiting > queue_limit and reference is not None and waiting > reference
    if not (ttft_breach or growing):
        state.breach_since_s = state.breach_waiting = None
        return 0, ""
    if state.breach_since_s is None:
        state.breach_since_s = now_s
        state.breach_waiting = waiting
    if now_s - state.breach_since_s < ESCALATE_AFTER_S:
        return 0, ""
    starting = tier.current > ready
    recent_up = state.last_scale_up_s is not None and now_s - state.last_scale_up_s < tier.lead_s
    if starting and recent_up:
        return 0, ""  # replicas asked for are still in their cold start: let them land
    served = signals.request_rate_rps
    arrivals = _arrivals_rps(tier, state, config.sync_period_s)
    ratio = ESCALATE_MAX_RATIO
    if served is not None and arrivals is not None and served > 0.0:
        ratio = min(ESCALATE_MAX_RATIO, arrivals / served * (1.0 + config.headroom))
    base = max(tier.current, ready)
    target = max(base + 1, math.ceil(ready * ratio - 1e-9))
    since = now_s - state.breach_since_s
    what = (
        f"TTFT p99 {p99:.0f} ms > {config.ttft_target_ms:.0f} ms"
        if ttft_breach and p99 is not None
        else f"queue growing to {waiting:.0f}"
    )
    return target, f"escalation: {what} with {waiting:.0f} waiting for {since:.0f} s"


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
) -> tuple[int, str]:
    """Apply stabilization, cooldowns and step limits. Returns (replicas, note)."""
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
    ctx = _measurements_only(ctx)
    last = state.last_decision_s
    dt_s = ctx.policy.sync_period_s if last is None else max(0.0, now - last)
    for tier in ctx.tiers:
        mix.observe(state.tier(tier.name), tier.signals, dt_s)
    service = mix.service_mix(state.tier(tier.name) for tier in ctx.tiers)
    tiers = [_observe_tier(tier, ctx.policy, state, now, dt_s=dt_s, service=service) for tier in ctx.tiers]
    demand = _forecast_demand(ctx, tiers, state)
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


@dataclass(frozen=True, slots=True)
class _Placed:
    """Demand placed across tiers, plus the other service-wide targets."""

    placement: Placement | None
    woken: dict[str, wake.Wake]
    held_at_door: frozenset[str]
    scheduled: dict[str, int]


_READINGS = (
    "waiting",
    "running",
    "ttft_p99_ms",
    "request_rate_rps",
    "prompt_tokens_rps",
    "generation_tokens_rps",
    "rejected_rps",
)


def _is_measurement(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value >= 0.0)


def _measurements_only(ctx: ScalingContext) -> ScalingContext:
    """`ctx` with every NaN, infinite or negative reading read as missing (the rule the
    live loop's edge applies, promql.signals): no such value is a count, rate or
    duration, and it must neither crash the decision nor count as demand."""
    if all(_is_measurement(getattr(t.signals, key)) for t in ctx.tiers for key in _READINGS):
        return ctx
    tiers = tuple(
        TierContext(
            t.figures,
            dataclasses.replace(
                t.signals, **{k: None for k in _READINGS if not _is_measurement(getattr(t.signals, k))}
            ),
        )
        for t in ctx.tiers
    )
    return dataclasses.replace(ctx, tiers=tiers)


def _observe_tier(
    tier: TierContext,
    config: PolicyConfig,
    state: ScalingState,
    now_s: float,
    *,
    dt_s: float,
    service: mix.ServiceMix,
) -> _TierInputs:
    """One tier's inputs: what it runs, whether it is failing, and its learned capacity.
    Updates the tier's readiness tracking, mix factor and capacity factor (its observed
    mix is already folded in; `service` is every tier's, the prior of a tier that has
    seen few requests itself)."""
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
    factor = _learn_capacity(
        tier_state,
        tier,
        signals.ready_replicas,
        config,
        dt_s=dt_s,
        prior_rps=prior_rps,
        now_s=now_s,
        service=service,
        mix_settling=mix.settling(tier_state, tier.figures, service),
    )
    return _TierInputs(
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


def _forecast_demand(ctx: ScalingContext, tiers: Sequence[_TierInputs], state: ScalingState) -> _Demand:
    """Predictive: the service demand one lead time ahead. Scores and files forecasts
    for the measured headroom."""
    now = ctx.now_s
    config = ctx.policy
    demand_now = _demand_now(ctx)
    fc: Forecast | None = None
    demand = demand_now
    history = _known_history(ctx.rate_history_rps)
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
    return _Demand(config, demand_now, fc, demand, base_rps, history_gap)


def _learned_cost_rank(t: _TierInputs, index: int) -> float:
    """The plan's cost per served request, at what a replica really serves: the plan
    priced a request of the declared mix, and a mix that costs one GPU type more than
    another (long prompts on a prefill-bound tier) changes which tier is cheaper."""
    rank = cost_rank(t.ctx, t.policy, index)
    plan_rps = t.ctx.figures.usable_rps
    if rank >= UNPRICED_RANK or plan_rps <= 0.0 or t.usable_rps <= 0.0:
        return rank
    return rank * plan_rps / t.usable_rps


def _place_demand(ctx: ScalingContext, demand: _Demand, tiers: Sequence[_TierInputs]) -> _Placed:
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
            available=not t.failing and t.ctx.figures.feasible,
        )
        for index, t in enumerate(tiers)
    ]
    placement: Placement | None = None
    if demand.demand_rps is not None:
        placement = place(
            demand.demand_rps * (1.0 + config.headroom), demand.base_rps * (1.0 + config.headroom), slots
        )
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
    available = [s for s in slots if s.available and s.usable_rps > 0]
    cheapest = min(available, key=lambda s: s.cost_rank).name if available else None
    return _Placed(
        placement=placement,
        woken=woken,
        held_at_door=wake.held_tiers(ctx.front_door),
        scheduled=_scheduled(config, tiers, cheapest, ctx.now_s),
    )


def _tier_targets(
    t: _TierInputs, demand: _Demand, placed: _Placed, tier_state: TierState, now_s: float
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
            targets[SIGNAL_PREDICTIVE] = placement.needed.get(name, 0)
            reasons[SIGNAL_PREDICTIVE] = (
                f"{placement.rps.get(name, 0.0):.2f} req/s placed here "
                f"(demand {demand.demand_rps or 0.0:.2f} req/s at +{t.lead_s:.0f} s, "
                f"+{config.headroom:.0%} headroom{measured}{interrupted})"
            )
        reactive, why = _reactive(t, config, tier_state, now_s)
        if reactive:
            targets[SIGNAL_REACTIVE] = reactive
            reasons[SIGNAL_REACTIVE] = why
        escalation, why = _escalation(t, tier_state, config, now_s)
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


def _may_scale_down(t: _TierInputs, demand: _Demand, placed: _Placed) -> bool:
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
    t: _TierInputs, demand: _Demand, placed: _Placed, tier_state: TierState, now_s: float
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
    placement, demand_rps = placed.placement, demand.demand_rps
    if placement is not None and demand_rps:
        share = placement.rps.get(t.ctx.name, 0.0) / (demand_rps * (1.0 + config.headroom))
    return TierRecommendation(
        name=t.ctx.name,
        replicas=new,
        current=t.current,
        signal=signal,
        reason=reason,
        targets=targets,
        traffic_share=share,
    )


def _bound(replicas: int, policy: TierPolicy) -> tuple[int, str]:
    """The paced replicas moved into the spec's bounds, and a note when that moved them.
    The spec's bounds move at once (maxReplicas lowered, minReplicas raised): no
    stabilization, cooldown, step limit or missing signal holds them back."""
    bounded = _within_bounds(replicas, policy)
    if bounded == replicas:
        return replicas, ""
    side = "maxReplicas" if bounded < replicas else "minReplicas"
    return bounded, f"moved to {side} {bounded} at once (the spec's bounds are not paced)"


def _record(tier_state: TierState, t: _TierInputs, new: int, now_s: float) -> None:
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
