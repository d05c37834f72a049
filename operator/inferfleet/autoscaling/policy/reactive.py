"""The reactive rules and escalation (pure): what the queue, the TTFT p99 and the busy
batch slots say a tier needs now, whatever the forecast or the plan say.

- reactive: a queue above its allowance sizes the tier for its arrivals plus the
  backlog still left when a new replica is Ready; a TTFT p99 breach with requests
  waiting sizes it for its arrivals (at least one replica more, at most the Ready
  replicas times the breach ratio, itself at most x2); slots nearly all busy size the
  tier back to a target share;
- escalation: a queue that keeps growing, or a TTFT p99 above the SLO with requests
  waiting, for ESCALATE_AFTER_S raises the tier, and again after each lead time while
  it lasts.
"""

from __future__ import annotations

import math

from inferfleet.autoscaling.policy.observed_tier import ObservedTier
from inferfleet.autoscaling.policy.types import TierState
from inferfleet.design.policy_config import PolicyConfig

# The queue a new replica's capacity should drain, in seconds of its throughput:
# requests already waiting are late; clearing them within two minutes of the new
# replicas' arrival keeps the tail short without sizing the fleet for the backlog.
BACKLOG_DRAIN_S = 120.0
# A TTFT breach only scales when there is load behind it (a queue, or arrivals near
# what the Ready replicas are estimated to carry): one long prompt on an idle replica,
# or a few-second burst the fleet has already absorbed, breaches the p99 too, and
# more replicas would not have helped.
TTFT_LOAD_EVIDENCE = 0.8
# A breach ratio bounds the step, it does not size it: queueing delay grows without
# bound as arrivals near capacity, so a p99 three times the SLO may need one replica
# more, not three times the fleet. The arrivals size it (issue 34: on the Azure code
# hour, doubling on the ratio started replicas that came Ready after the burst and were
# paid for through the stabilization window).
TTFT_MAX_STEP_RATIO = 2.0
# The p99 is read over this window (the live loop's 2-minute rate window): a p99 taken
# sooner after new replicas became Ready still remembers the minutes before them.
TTFT_WINDOW_S = 120.0
# Batch slots this full say the tier is at its real capacity; it is sized back to the
# target share (Kubernetes HPA on the same utilization would aim at 70 %).
OCCUPANCY_HIGH = 0.85
OCCUPANCY_TARGET = 0.75
REACTIVE_MAX_ADD = 4
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


def queue_allowance(config: PolicyConfig, usable_rps: float) -> float:
    """Waiting requests one Ready replica may have before its queue is a breach.

    A replica can clear about ttft_target x usable requests within the SLO (Little's
    law): more waiting than that per replica is late whatever the
    queue-depth setting says.
    """
    return max(1.0, min(config.queue_depth_per_replica, config.ttft_target_ms / 1000.0 * usable_rps))


def reactive_target(
    tier: ObservedTier, config: PolicyConfig, state: TierState, now_s: float
) -> tuple[int, str]:
    """Target from the queue and TTFT; 0 when neither is in breach."""
    signals = tier.ctx.signals
    ready = tier.ready or 0
    usable = tier.usable_rps
    if usable <= 0.0 or signals.waiting is None:
        return 0, ""
    allowance = queue_allowance(config, usable)
    target = 0
    why = ""
    waiting = signals.waiting
    excess = waiting - allowance * ready
    arrivals = arrivals_rps(tier, state, config.sync_period_s)
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
    settled = ttft_settled(tier, state, now_s)
    if target == 0 and loaded and settled and p99 is not None and p99 > config.ttft_target_ms:
        ratio = min(TTFT_MAX_STEP_RATIO, p99 / config.ttft_target_ms)
        bound = math.ceil(ready * ratio - 1e-9)
        needed = math.ceil(arrivals * (1.0 + config.headroom) / usable - 1e-9)
        target = max(ready + 1, min(bound, needed))
        why = f"TTFT p99 {p99:.0f} ms > {config.ttft_target_ms:.0f} ms ({arrivals:.2f} req/s arriving)"
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


def ttft_settled(tier: ObservedTier, state: TierState, now_s: float) -> bool:
    """Whether the TTFT p99 can show the last scale-up: its replicas are Ready and the
    p99's window no longer holds only the minutes before them."""
    last = state.last_scale_up_s
    return last is None or now_s - last >= tier.ctx.figures.cold_start_s + TTFT_WINDOW_S


def arrivals_rps(tier: ObservedTier, state: TierState, period_s: float) -> float | None:
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


def escalation_target(
    tier: ObservedTier, state: TierState, config: PolicyConfig, now_s: float
) -> tuple[int, str]:
    """The escalation target (0: none) and why; updates the tier's breach tracking."""
    signals = tier.ctx.signals
    waiting = signals.waiting
    ready = tier.ready
    if waiting is None or ready is None or tier.missing:
        state.breach_since_s = state.breach_waiting = None
        return 0, ""
    p99 = signals.ttft_p99_ms
    ttft_breach = (
        waiting > 0 and p99 is not None and p99 > config.ttft_target_ms and ttft_settled(tier, state, now_s)
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
    arrivals = arrivals_rps(tier, state, config.sync_period_s)
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
