"""Build a simulation from a design: the plan, policy and front door the operator would
run (design.design), replayed."""

from __future__ import annotations

import dataclasses
import math

from inferfleet.api.plan import TierPlan
from inferfleet.autoscaling.policy import figures_from_plan
from inferfleet.autoscaling.simulate.engine import (
    DoorPoolModel,
    FrontDoorModel,
    ServingModel,
    SimConfig,
    SimTier,
)
from inferfleet.autoscaling.simulate.prefix_cache import KvCacheModel
from inferfleet.design import Design
from inferfleet.design.policy_config import PolicyConfig, mean_input_tokens, mean_output_tokens
from inferfleet.planner import host_kv
from inferfleet.render import frontdoor


class SetupError(ValueError):
    """The spec and plan cannot be simulated (no feasible tier, no performance figures)."""


def kv_cache_model(tier_plan: TierPlan, host_link_gbs: float | None) -> KvCacheModel | None:
    """One replica's prefix caches as the plan sizes them: its GPU KV cache and its host
    tier (0 without one); None when the plan has no KV figures."""
    per_token = host_kv.bytes_per_token(tier_plan)
    if per_token is None:
        return None
    return KvCacheModel(
        gpu_tokens=tier_plan.kv_cache_tokens,
        host_tokens=tier_plan.host_kv_cache_tokens,
        kv_bytes_per_token=per_token,
        host_link_gbs=host_link_gbs or 0.0,
    )


def sim_tier(
    tier_plan: TierPlan,
    cost_per_gpu_hour: float | None,
    mean_input_tokens: float | None = None,
    mean_output_tokens: float | None = None,
    host_link_gbs: float | None = None,
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
        kv_tokens_per_slot=tier_plan.kv_cache_tokens / max(1, math.floor(figures.max_concurrency)),
        kv_cache=kv_cache_model(tier_plan, host_link_gbs),
    )


def front_door_model(designed: Design, tiers: tuple[SimTier, ...]) -> FrontDoorModel | None:
    """The design's front door as the simulator replays it: its pools over the simulated
    tiers, route weights and holds. None without a Gateway (plain Services)."""
    front = designed.front_door
    if front is None or front.mode != "gateway" or not front.pools:
        return None
    index = {tier.figures.name: k for k, tier in enumerate(tiers)}
    pools = []
    for pool in front.pools:
        own = [index[name] for name in pool.tiers if name in index]
        # Overflow tiers, the tightest range first (the picker's context-length scorer).
        overflow = sorted(
            (index[name] for name in pool.overflow if name in index), key=lambda k: tiers[k].max_model_len
        )
        if own or overflow:
            pools.append(
                DoorPoolModel(
                    pool.name,
                    tuple(own + overflow),
                    len(own),
                    None if pool.weight is None else float(pool.weight),
                    float(pool.hold_s),
                    pool.queue_limit,
                    frontdoor.DETECTOR_QUEUE_DEPTH,
                )
            )
    # With a pre-cache (the default), every tier's nodes hold the weights before a
    # replica needs them.
    cache = designed.service.spec.cache
    cached = frozenset(index) if cache is None or cache.mode != "none" else frozenset()
    return FrontDoorModel(tuple(pools), cached)


def build_config(
    designed: Design,
    *,
    seed: int = 0,
    timeline: bool = True,
    policy: PolicyConfig | None = None,
) -> SimConfig:
    """The design's feasible tiers, its policy (or `policy`), its front door and the spec's
    SLOs: what the operator would run, replayed."""
    spec, plan = designed.service.spec, designed.plan
    if plan is None:
        raise SetupError(f"{designed.source}: nothing to simulate: {designed.invalid}")
    prompt_tokens = mean_input_tokens(spec)
    output_tokens = mean_output_tokens(spec)
    costs = {tier.name: tier.cost_per_gpu_hour for tier in spec.tiers}
    links = {tier.name: tier.gpu.host_link_g_bs if tier.gpu is not None else None for tier in designed.tiers}
    tiers = tuple(
        sim_tier(
            tier_plan, costs.get(tier_plan.name), prompt_tokens, output_tokens, links.get(tier_plan.name)
        )
        for tier_plan in plan.tiers
        if tier_plan.feasible and tier_plan.usable_rps > 0
    )
    if not tiers:
        raise SetupError(f"{plan.name}: no feasible tier to simulate")
    resolved = policy or designed.policy
    kept = {tier.figures.name for tier in tiers}
    resolved = dataclasses.replace(resolved, tiers=tuple(t for t in resolved.tiers if t.name in kept))
    return SimConfig(
        tiers=tiers,
        policy=resolved,
        ttft_slo_ms=spec.workload.slo.ttft_p99_ms,
        itl_slo_ms=spec.workload.slo.itl_p99_ms,
        seed=seed,
        timeline=timeline,
        front_door=front_door_model(designed, tiers),
    )
