"""Resolve the scaling policy: operator-wide defaults, overridden by the spec.

The SRE sets defaults once (Helm values → `OperatorSettings`); each InferenceService
may override any of them in `spec.scaling`. Resolving is pure and happens once per
spec change, so every tick reads one flat `PolicyConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from inferfleet.api.spec import CapacityType, InferenceServiceSpec, ScaleBehavior, TierSpec
from inferfleet.config import OperatorSettings
from inferfleet.planner.workload import mean_tokens


@dataclass(frozen=True, slots=True)
class ScalePacing:
    """Pacing of changes in one direction."""

    stabilization_s: float
    cooldown_s: float
    max_replicas_per_step: int | None  # None: unlimited
    # Like HPA's Percent policy beside its Pods policy: a step may remove this share of
    # the current replicas when that is more than max_replicas_per_step. None: no share.
    max_percent_per_step: float | None = None

    def step_limit(self, current: int) -> int | None:
        """Most replicas one step may change from `current`: the larger of the limits
        that are set (HPA's selectPolicy Max); None when neither is set."""
        limits = []
        if self.max_replicas_per_step is not None:
            limits.append(self.max_replicas_per_step)
        if self.max_percent_per_step is not None:
            # At least one, so a share of an empty fleet can still grow it.
            limits.append(max(1, math.ceil(current * self.max_percent_per_step / 100.0 - 1e-9)))
        return max(limits) if limits else None


@dataclass(frozen=True, slots=True)
class PrewarmRule:
    """Hold `replicas` on `tier` (None: the cheapest tier) from each cron start for `duration_s`."""

    schedule: str
    duration_s: float
    replicas: int
    tier: str | None = None
    time_zone: str | None = None


@dataclass(frozen=True, slots=True)
class TierPolicy:
    """What the spec says about one tier's scaling: bounds, price, share, capacity type."""

    name: str
    min_replicas: int
    max_replicas: int | None = None  # None: the plan's replicasForPeak
    capacity_type: CapacityType = "on-demand"
    routing_share: float | None = None
    cost_per_gpu_hour: float | None = None


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The resolved policy: operator defaults with the spec's `scaling` fields on top."""

    tiers: tuple[TierPolicy, ...]
    ttft_target_ms: float
    mode: Literal["active", "advisory"] = "active"
    sync_period_s: float = 15.0
    # The prior (and, in `fixed` mode, the whole) share kept above forecast demand;
    # `measured` follows the forecaster's measured error (scaling.headroom).
    headroom: float = 0.2
    headroom_mode: Literal["measured", "fixed"] = "measured"
    queue_depth_per_replica: float = 4.0
    # The ITL SLO the learned capacity keeps decode steps within (autoscaling.policy.capacity):
    # the spec's, unless spec.scaling.capacitySlos or the operator setting says ttft (None:
    # the capacity keeps the TTFT SLO alone).
    itl_target_ms: float | None = None
    predictive_enabled: bool = True
    history_window_hours: float = 336.0
    seasonality: Literal["auto", "daily", "weekly", "none"] = "auto"
    cold_start_margin_s: float = 60.0
    # Minutes the forecaster holds the level from before a cliff to silence (forecast).
    interruption_hold_min: int = 30
    allow_scale_to_zero: bool = False
    scale_up: ScalePacing = ScalePacing(0.0, 0.0, None)
    scale_down: ScalePacing = ScalePacing(300.0, 120.0, 1, 25.0)
    prewarm: tuple[PrewarmRule, ...] = ()
    # Only the static-peak baseline reads this: the peak request rate it provisions for.
    static_peak_rps: float | None = None
    # A deployed prefill/decode split (design.pd_split): (prefill tier, decode tier). The
    # prefill tier takes no whole requests: it prefills what the decode tier is placed.
    split: tuple[str, str] | None = None

    def tier(self, name: str) -> TierPolicy | None:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        return None


def _behavior(
    spec: ScaleBehavior | None,
    stabilization_s: float,
    cooldown_s: float,
    max_step: int | None,
    max_percent: float | None = None,
) -> ScalePacing:
    if spec is None:
        return ScalePacing(float(stabilization_s), float(cooldown_s), max_step, max_percent)
    return ScalePacing(
        stabilization_s=float(
            spec.stabilization_seconds if spec.stabilization_seconds is not None else stabilization_s
        ),
        cooldown_s=float(spec.cooldown_seconds if spec.cooldown_seconds is not None else cooldown_s),
        max_replicas_per_step=(
            spec.max_replicas_per_step if spec.max_replicas_per_step is not None else max_step
        ),
        max_percent_per_step=(
            float(spec.max_percent_per_step) if spec.max_percent_per_step is not None else max_percent
        ),
    )


def tier_policy(tier: TierSpec, routing: dict[str, float] | None) -> TierPolicy:
    return TierPolicy(
        name=tier.name,
        min_replicas=tier.min_replicas,
        max_replicas=tier.max_replicas,
        capacity_type=tier.capacity_type,
        routing_share=None if routing is None else routing.get(tier.name),
        cost_per_gpu_hour=tier.cost_per_gpu_hour,
    )


def resolve_policy(settings: OperatorSettings, spec: InferenceServiceSpec) -> PolicyConfig:
    """The flat policy for one InferenceService: every `spec.scaling` field that is set
    wins over the operator setting of the same meaning."""
    scaling = spec.scaling
    predictive = scaling.predictive if scaling else None
    reactive = scaling.reactive if scaling else None
    routing = spec.workload.routing

    ttft_target_ms = spec.workload.slo.ttft_p99_ms
    queue_depth = settings.queue_depth_per_replica
    if reactive is not None:
        if reactive.ttft_target_ms is not None:
            ttft_target_ms = reactive.ttft_target_ms
        if reactive.queue_depth_per_replica is not None:
            queue_depth = reactive.queue_depth_per_replica

    prewarm = tuple(
        PrewarmRule(
            schedule=window.schedule,
            duration_s=window.duration_minutes * 60.0,
            replicas=window.replicas,
            tier=window.tier,
            time_zone=window.time_zone,
        )
        for window in ((scaling.prewarm or []) if scaling else [])
    )

    return PolicyConfig(
        tiers=tuple(tier_policy(tier, routing) for tier in spec.tiers),
        ttft_target_ms=float(ttft_target_ms),
        mode=(scaling.mode if scaling and scaling.mode else settings.scaling_mode),
        sync_period_s=float(
            scaling.sync_period_seconds
            if scaling and scaling.sync_period_seconds is not None
            else settings.sync_period_s
        ),
        headroom=float(scaling.headroom if scaling and scaling.headroom is not None else settings.headroom),
        headroom_mode=_headroom_mode(settings, spec),
        queue_depth_per_replica=float(queue_depth),
        itl_target_ms=float(spec.workload.slo.itl_p99_ms)
        if _capacity_slos(settings, spec) == "ttftAndItl"
        else None,
        predictive_enabled=(
            predictive.enabled
            if predictive is not None and predictive.enabled is not None
            else settings.predictive_enabled
        ),
        history_window_hours=float(
            predictive.history_window_hours
            if predictive is not None and predictive.history_window_hours is not None
            else settings.forecast_window_hours
        ),
        seasonality=(predictive.seasonality if predictive is not None and predictive.seasonality else "auto"),
        cold_start_margin_s=float(settings.cold_start_margin_s),
        interruption_hold_min=settings.interruption_hold_min,
        allow_scale_to_zero=bool(scaling.allow_scale_to_zero) if scaling else False,
        scale_up=_behavior(
            scaling.scale_up if scaling else None,
            settings.scale_up_stabilization_s,
            settings.scale_up_cooldown_s,
            None,
        ),
        scale_down=_behavior(
            scaling.scale_down if scaling else None,
            settings.scale_down_stabilization_s,
            settings.scale_down_cooldown_s,
            settings.scale_down_max_replicas_per_step,
            float(settings.scale_down_max_percent_per_step),
        ),
        prewarm=prewarm,
    )


def _headroom_mode(settings: OperatorSettings, spec: InferenceServiceSpec) -> Literal["measured", "fixed"]:
    scaling = spec.scaling
    if scaling is not None and scaling.headroom_mode is not None:
        return scaling.headroom_mode
    if scaling is not None and scaling.headroom is not None:
        return "fixed"  # a headroom written into the spec is the share the team wants, as it is
    return settings.headroom_mode


def _capacity_slos(settings: OperatorSettings, spec: InferenceServiceSpec) -> Literal["ttft", "ttftAndItl"]:
    """The SLOs the learned capacity keeps: spec.scaling.capacitySlos, else the operator
    setting, else (neither set) every SLO the spec declares. `workload.slo` always has an
    ITL (itlP99Ms defaults to 100 ms, the ITL the plan sizes for), so a capacity left to
    the declared SLOs keeps it; `ttft` is a choice someone writes down."""
    scaling = spec.scaling
    if scaling is not None and scaling.capacity_slos is not None:
        return scaling.capacity_slos
    if settings.capacity_slos is not None:
        return settings.capacity_slos
    return "ttftAndItl"


def replan_mode(settings: OperatorSettings, spec: InferenceServiceSpec) -> Literal["advise", "auto"]:
    """Whether a WorkloadDrift only advises (the default) or also re-plans."""
    scaling = spec.scaling
    if scaling is not None and scaling.replan is not None:
        return scaling.replan
    return settings.replan


def mean_input_tokens(spec: InferenceServiceSpec) -> float:
    """The declared mean prompt length, as the planner estimates it."""
    tokens = spec.workload.input_tokens
    return mean_tokens(tokens.p50, tokens.p95)


def mean_output_tokens(spec: InferenceServiceSpec) -> float:
    """The declared mean output length, as the planner estimates it."""
    tokens = spec.workload.output_tokens
    return mean_tokens(tokens.p50, tokens.p95)
