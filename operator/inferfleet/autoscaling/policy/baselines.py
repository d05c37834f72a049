"""The usual alternatives, in the same interface as `decide`, so comparisons are fair.

Each is written exactly as defined in the autoscaling issue:

- `static-peak`: a constant fleet, `ceil(peak RPS of the trace / usable RPS per
  replica)` (peaks placed across tiers like our own demand, without headroom). The
  peak is `PolicyConfig.static_peak_rps`, set by whoever knows the trace.
- `reactive-util`: the Kubernetes HPA algorithm on busy-slot utilization (running
  sequences / the replica's concurrency slots): target 70 %, 10 % tolerance, every sync
  period (15 s), scale-down stabilization 300 s (the window maximum), no scale-up limit.
  Like HPA, replicas that are not Ready count as idle when scaling up, which makes
  `ceil(running / (slots x 0.7))` the proposal.
- `queue-only`: KEDA-style `ceil(waiting / threshold)` with our queue threshold,
  floored at the warm minimum, with a 300 s cooldown before any scale-down.

Each has one knob an operator of that autoscaler would tune, and the benchmark sweeps it
(hack/bench/autoscale.py): `reactive_util_at(target)` is reactive-util at another target
utilization, `queue_only_at(threshold)` queue-only at another queue threshold, and
static-peak's replica count follows `PolicyConfig.static_peak_rps`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from inferfleet.autoscaling.policy.demand_placement import place
from inferfleet.autoscaling.policy.policy import (
    decide,
    max_replicas_of,
    plan_slot,
    push_window,
    tier_policy_of,
)
from inferfleet.autoscaling.policy.types import (
    SIGNAL_HOLD,
    SIGNAL_REACTIVE,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierRecommendation,
    TierState,
)
from inferfleet.design.policy_config import PolicyConfig

PolicyFunction = Callable[[ScalingContext, ScalingState | None], tuple[Recommendation, ScalingState]]

HPA_TARGET_UTILIZATION = 0.7
HPA_TOLERANCE = 0.1
HPA_SCALE_DOWN_STABILIZATION_S = 300.0
KEDA_COOLDOWN_S = 300.0


def _current(tier: TierContext, config: PolicyConfig, state: ScalingState) -> int:
    if tier.signals.desired_replicas is not None:
        return tier.signals.desired_replicas
    last = state.tier(tier.name).last_desired
    if last is not None:
        return last
    return tier_policy_of(config, tier.name).min_replicas


def _bounded(tier: TierContext, config: PolicyConfig, replicas: int) -> int:
    policy = tier_policy_of(config, tier.name)
    return min(max_replicas_of(tier, policy), max(policy.min_replicas, replicas))


def _finish(
    ctx: ScalingContext, state: ScalingState, results: list[TierRecommendation], label: str
) -> tuple[Recommendation, ScalingState]:
    for result in results:
        state.tier(result.name).last_desired = result.replicas
    state.last_decision_s = ctx.now_s
    changed = [r for r in results if r.current is not None and r.replicas != r.current]
    return (
        Recommendation(
            now_s=ctx.now_s,
            tiers=tuple(results),
            signal=changed[0].signal if changed else SIGNAL_HOLD,
            reason=f"{label}: "
            + "; ".join(f"{r.name} {r.current}->{r.replicas} {r.reason}" for r in results),
        ),
        state,
    )


def static_peak(
    ctx: ScalingContext, state: ScalingState | None = None
) -> tuple[Recommendation, ScalingState]:
    config = ctx.policy
    state = ScalingState() if state is None else state.copy()
    peak = config.static_peak_rps or 0.0
    slots = [
        plan_slot(tier, config, index, tier.figures.usable_rps if tier.figures.feasible else 0.0)
        for index, tier in enumerate(ctx.tiers)
    ]
    placement = place(peak, peak, slots)
    results = [
        TierRecommendation(
            name=tier.name,
            replicas=placement.replicas[tier.name],
            current=_current(tier, config, state),
            signal=SIGNAL_HOLD,
            reason=f"constant for peak {peak:.2f} req/s",
            targets={"static": placement.replicas[tier.name]},
        )
        for tier in ctx.tiers
    ]
    return _finish(ctx, state, results, "static-peak")


def _stabilized(
    tier: TierContext,
    config: PolicyConfig,
    tier_state: TierState,
    *,
    now_s: float,
    current: int,
    proposal: int,
    why: str,
    window_s: float,
    target_name: str,
) -> TierRecommendation:
    """Scale up at once; scale down only to the highest proposal of the last `window_s`."""
    proposal = _bounded(tier, config, proposal)
    stabilized = push_window(tier_state.recent_targets, now_s, proposal, window_s, keep_max=True)
    new = proposal if proposal >= current else min(current, stabilized)
    return TierRecommendation(
        name=tier.name,
        replicas=new,
        current=current,
        signal=SIGNAL_REACTIVE if new != current else SIGNAL_HOLD,
        reason=why,
        targets={target_name: proposal},
    )


def reactive_util(
    ctx: ScalingContext, state: ScalingState | None = None
) -> tuple[Recommendation, ScalingState]:
    """HPA on busy-slot utilization at its usual 70 % target."""
    return _reactive_util(ctx, state, target=HPA_TARGET_UTILIZATION)


def reactive_util_at(target: float) -> PolicyFunction:
    """reactive-util with another target utilization (0-1]: the knob an SRE tunes."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target utilization must be in (0, 1], not {target}")
    return partial(_reactive_util, target=target)


def _reactive_util(
    ctx: ScalingContext, state: ScalingState | None, *, target: float
) -> tuple[Recommendation, ScalingState]:
    config = ctx.policy
    state = ScalingState() if state is None else state.copy()
    results: list[TierRecommendation] = []
    for tier in ctx.tiers:
        current = _current(tier, config, state)
        tier_state = state.tier(tier.name)
        signals = tier.signals
        slots = max(1.0, tier.figures.max_concurrency)
        ready = signals.ready_replicas
        if ready is None or signals.running is None or ready <= 0:
            proposal, why = current, "no metrics from Ready pods"
        else:
            utilization = signals.running / (ready * slots)
            ratio = utilization / target
            if abs(ratio - 1.0) <= HPA_TOLERANCE:
                proposal, why = current, f"utilization {utilization:.0%} within tolerance"
            else:
                proposal = math.ceil(signals.running / (slots * target) - 1e-9)
                why = f"utilization {utilization:.0%} vs target {target:.0%}"
        results.append(
            _stabilized(
                tier,
                config,
                tier_state,
                now_s=ctx.now_s,
                current=current,
                proposal=proposal,
                why=why,
                window_s=HPA_SCALE_DOWN_STABILIZATION_S,
                target_name="utilization",
            )
        )
    return _finish(ctx, state, results, "reactive-util")


def queue_only(ctx: ScalingContext, state: ScalingState | None = None) -> tuple[Recommendation, ScalingState]:
    """KEDA on queue depth at our own queue threshold (queueDepthPerReplica)."""
    return _queue_only(ctx, state, threshold=None)


def queue_only_at(threshold: float) -> PolicyFunction:
    """queue-only with another threshold (waiting requests per replica): its knob."""
    if threshold <= 0.0:
        raise ValueError(f"queue threshold must be positive, not {threshold}")
    return partial(_queue_only, threshold=threshold)


def _queue_only(
    ctx: ScalingContext, state: ScalingState | None, *, threshold: float | None
) -> tuple[Recommendation, ScalingState]:
    config = ctx.policy
    per_replica = config.queue_depth_per_replica if threshold is None else threshold
    state = ScalingState() if state is None else state.copy()
    results: list[TierRecommendation] = []
    for tier in ctx.tiers:
        current = _current(tier, config, state)
        tier_state = state.tier(tier.name)
        waiting = tier.signals.waiting
        if waiting is None:
            proposal, why = current, "queue depth missing"
        else:
            proposal = math.ceil(waiting / per_replica - 1e-9)
            why = f"{waiting:.0f} waiting / {per_replica:g}"
        results.append(
            _stabilized(
                tier,
                config,
                tier_state,
                now_s=ctx.now_s,
                current=current,
                proposal=proposal,
                why=why,
                window_s=KEDA_COOLDOWN_S,
                target_name="queue",
            )
        )
    return _finish(ctx, state, results, "queue-only")


POLICIES: dict[str, PolicyFunction] = {
    "inferfleet": decide,
    "static-peak": static_peak,
    "reactive-util": reactive_util,
    "queue-only": queue_only,
}


def policy_function(name: str) -> PolicyFunction:
    """The policy called `name`; KeyError names the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
