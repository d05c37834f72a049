"""Build a simulation from an InferenceService spec and its plan."""

from __future__ import annotations

import dataclasses
import math

from inferfleet.api.plan import Plan, TierPlan
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.config import OperatorSettings
from inferfleet.scaling import (
    PolicyConfig,
    figures_from_plan,
    mean_input_tokens,
    mean_output_tokens,
    resolve_policy,
)
from inferfleet.simulate.engine import ServingModel, SimConfig, SimTier


class SetupError(ValueError):
    """The spec and plan cannot be simulated (no feasible tier, no performance figures)."""


def sim_tier(
    tier_plan: TierPlan,
    cost_per_gpu_hour: float | None,
    mean_input_tokens: float | None = None,
    mean_output_tokens: float | None = None,
) -> SimTier:
    performance = tier_plan.performance
    if performance is None:
        raise SetupError(f"tier {tier_plan.name}: the plan has no performance figures to simulate with")
    figures = figures_from_plan(tier_plan, mean_input_tokens, mean_output_tokens)
    return SimTier(
        figures=figures,
        serving=ServingModel(
            prefill_tokens_per_s=performance.prefill_tokens_per_second,
            decode_step_base_ms=performance.decode_step_base_ms,
            decode_step_per_seq_ms=performance.decode_step_per_seq_ms,
        ),
        slots=max(1, math.floor(figures.max_concurrency)),
        cost_per_gpu_hour=cost_per_gpu_hour or 0.0,
    )


def build_config(
    spec: InferenceServiceSpec,
    plan: Plan,
    *,
    settings: OperatorSettings | None = None,
    seed: int = 0,
    timeline: bool = True,
    policy: PolicyConfig | None = None,
) -> SimConfig:
    """Feasible tiers of the plan, the resolved policy, and the spec's SLOs."""
    prompt_tokens = mean_input_tokens(spec)
    output_tokens = mean_output_tokens(spec)
    costs = {tier.name: tier.cost_per_gpu_hour for tier in spec.tiers}
    tiers = tuple(
        sim_tier(tier_plan, costs.get(tier_plan.name), prompt_tokens, output_tokens)
        for tier_plan in plan.tiers
        if tier_plan.feasible and tier_plan.usable_rps > 0
    )
    if not tiers:
        raise SetupError(f"{plan.name}: no feasible tier to simulate")
    resolved = policy or resolve_policy(settings or OperatorSettings(), spec)
    kept = {tier.figures.name for tier in tiers}
    resolved = dataclasses.replace(resolved, tiers=tuple(t for t in resolved.tiers if t.name in kept))
    return SimConfig(
        tiers=tiers,
        policy=resolved,
        ttft_slo_ms=spec.workload.slo.ttft_p99_ms,
        itl_slo_ms=spec.workload.slo.itl_p99_ms,
        seed=seed,
        timeline=timeline,
    )
