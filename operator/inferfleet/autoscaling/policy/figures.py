"""The handful of plan figures the policy and the simulator read (pure)."""

from __future__ import annotations

from inferfleet.api.plan import TierPlan
from inferfleet.autoscaling.policy.types import TierFigures


def figures_from_plan(
    tier_plan: TierPlan,
    mean_input_tokens: float | None = None,
    mean_output_tokens: float | None = None,
) -> TierFigures:
    """The handful of plan figures the policy and the simulator use; the declared means
    are the prior the request mix the engines report replaces."""
    performance = tier_plan.performance
    slots = tier_plan.concurrency_at_p95 if tier_plan.concurrency_at_p95 > 0 else tier_plan.max_concurrency
    if tier_plan.max_num_seqs > 0:
        slots = min(slots, float(tier_plan.max_num_seqs))
    return TierFigures(
        name=tier_plan.name,
        usable_rps=float(tier_plan.usable_rps),
        cold_start_s=float(tier_plan.cold_start_seconds),
        gpus_per_replica=int(tier_plan.gpus_per_replica),
        max_concurrency=max(1.0, float(slots)),
        replicas_for_peak=int(tier_plan.replicas_for_peak),
        cost_per_million_tokens_usd=tier_plan.cost_per_million_tokens_usd,
        feasible=bool(tier_plan.feasible) and tier_plan.usable_rps > 0,
        decode_step_base_ms=performance.decode_step_base_ms if performance else 0.0,
        decode_step_per_seq_ms=performance.decode_step_per_seq_ms if performance else 0.0,
        prefill_tokens_per_s=performance.prefill_tokens_per_second if performance else 0.0,
        mean_input_tokens=mean_input_tokens,
        mean_output_tokens=mean_output_tokens,
        max_model_len=int(tier_plan.max_model_len),
    )
