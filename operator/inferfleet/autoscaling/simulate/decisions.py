"""Every decision of a replay as it is taken, with what the policy saw (pure).

`recording(policy, ...)` wraps a policy so that each tick hands one record to the
caller's `sink` (the CLI writes a JSON line): the decision in the shape of
`status.lastScalingDecision` (`Recommendation.to_dict`), the replay time, and per tier
the signals it was taken on. A record is handed over at once, so a 14-day replay
holds none of them in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inferfleet.autoscaling.policy import PolicyFunction, Recommendation, ScalingContext, ScalingState
from inferfleet.autoscaling.policy.types import finite_or_none

DecisionSink = Callable[[dict[str, Any]], None]


def decision_record(
    policy_name: str, ctx: ScalingContext, recommendation: Recommendation, epoch_s: float
) -> dict[str, Any]:
    """One tick: what the policy decided and the signals it decided on."""
    record = {"policy": policy_name, "timeS": round(ctx.now_s - epoch_s, 3), **recommendation.to_dict()}
    seen = {tier.name: tier.signals for tier in ctx.tiers}
    for tier in record["tiers"]:
        signals = seen.get(tier["name"])
        if signals is None:
            continue
        tier["observed"] = {
            "ready": signals.ready_replicas,
            "waiting": finite_or_none(signals.waiting),
            "running": finite_or_none(signals.running),
            "ttftP99Ms": finite_or_none(signals.ttft_p99_ms),
            "requestRateRps": finite_or_none(signals.request_rate_rps),
        }
    return record


def recording(policy: PolicyFunction, policy_name: str, epoch_s: float, sink: DecisionSink) -> PolicyFunction:
    """`policy`, handing every decision it takes to `sink`."""

    def decide_and_record(
        ctx: ScalingContext, state: ScalingState | None
    ) -> tuple[Recommendation, ScalingState]:
        recommendation, new_state = policy(ctx, state)
        sink(decision_record(policy_name, ctx, recommendation, epoch_s))
        return recommendation, new_state

    return decide_and_record
