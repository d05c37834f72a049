"""The plain-data types `decide()` reads and returns.

Everything here is a frozen dataclass of numbers, strings and tuples, so a context
can be built from Prometheus answers (the live loop) or from a replayed trace (the
simulator) and the same `decide()` runs on both. `ScalingState` and `Recommendation`
turn into plain JSON-able dicts (`to_dict()` / `from_dict()`), because the state is
persisted in `status.autoscalerState` and a restarted operator must resume from it
with the decision it would have made had it never stopped.

Conventions: the clock is `now_s`, Unix seconds, passed in (never read here); rates
are requests per second; a signal that could not be read is `None`, never 0, since
"no queue" and "could not ask Prometheus" must lead to different decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

CapacityType = Literal["on-demand", "spot"]

# Names of the signals that can win a tier's decision (also `ScalingDecision.signal`).
SIGNAL_WARM_MINIMUM = "warmMinimum"
SIGNAL_PREDICTIVE = "predictive"
SIGNAL_REACTIVE = "reactive"
SIGNAL_SCHEDULED = "scheduled"
SIGNAL_HOLD = "hold"

STATE_VERSION = 1


# --- configuration (resolved once per spec, see config.resolve_policy) ----------------


@dataclass(frozen=True, slots=True)
class ScaleBehavior:
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
    headroom: float = 0.2
    queue_depth_per_replica: float = 4.0
    predictive_enabled: bool = True
    history_window_hours: float = 336.0
    seasonality: Literal["auto", "daily", "weekly", "none"] = "auto"
    cold_start_margin_s: float = 60.0
    allow_scale_to_zero: bool = False
    scale_up: ScaleBehavior = ScaleBehavior(0.0, 0.0, None)
    scale_down: ScaleBehavior = ScaleBehavior(300.0, 120.0, 1, 25.0)
    prewarm: tuple[PrewarmRule, ...] = ()
    # Only the static-peak baseline reads this: the peak request rate it provisions for.
    static_peak_rps: float | None = None

    def tier(self, name: str) -> TierPolicy | None:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        return None


# --- per-tick inputs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TierFigures:
    """The plan's figures for one tier that scaling needs (see `figures_from_plan`)."""

    name: str
    usable_rps: float  # requests/s one replica serves within the SLO
    cold_start_s: float  # pod start to Ready
    gpus_per_replica: int = 1
    max_concurrency: float = 1.0  # sequences a replica runs at once (busy slots)
    replicas_for_peak: int | None = None
    cost_per_million_tokens_usd: float | None = None
    feasible: bool = True
    # The plan's roofline: decode step time grows with the batch and prefill takes GPU
    # time from decode, so a hold time measured at one load is rescaled to another
    # (0 when the plan has no performance data).
    decode_step_base_ms: float = 0.0
    decode_step_per_seq_ms: float = 0.0
    prefill_tokens_per_s: float = 0.0
    # The declared mean prompt, used until prompt tokens are observed; None: unknown.
    mean_input_tokens: float | None = None


@dataclass(frozen=True, slots=True)
class TierSignals:
    """What the live loop (or the simulator) observed for one tier. None = not observed."""

    ready_replicas: int | None = None
    desired_replicas: int | None = None  # the workload's current spec.replicas
    waiting: float | None = None  # requests queued (vllm:num_requests_waiting, summed)
    running: float | None = None  # requests in flight (vllm:num_requests_running, summed)
    ttft_p99_ms: float | None = None  # over the last window; None also when no request finished
    request_rate_rps: float | None = None  # arrivals into this tier over the last minute
    # Prompt tokens prefilled per second (rate of vllm:prompt_tokens_total), summed over
    # the tier: with the plan's prefill throughput, how busy prefill keeps the replicas.
    prompt_tokens_rps: float | None = None


@dataclass(frozen=True, slots=True)
class TierContext:
    figures: TierFigures
    signals: TierSignals

    @property
    def name(self) -> str:
        return self.figures.name


@dataclass(frozen=True, slots=True)
class ScalingContext:
    """Everything one decision reads. `rate_history_rps` is the whole service's
    request rate per minute, oldest first, the last entry being the latest complete
    minute (NaN marks a minute Prometheus has no sample for)."""

    now_s: float
    policy: PolicyConfig
    tiers: tuple[TierContext, ...]
    rate_history_rps: Sequence[float] | None = None

    def tier(self, name: str) -> TierContext | None:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        return None


# --- state persisted between ticks ----------------------------------------------------


@dataclass(slots=True)
class TierState:
    """Per-tier memory of the policy. Mutable on purpose: decide() copies it first."""

    # (time, target) pairs kept for the scale-down stabilization window, as a
    # monotonically decreasing deque so the window maximum is the first element.
    recent_targets: list[tuple[float, int]] = field(default_factory=list)
    # First tick this state saw: no scale-down before a whole window has been observed.
    observed_since_s: float | None = None
    last_scale_up_s: float | None = None
    last_scale_down_s: float | None = None
    last_desired: int | None = None
    # Failure-to-become-ready tracking: since when desired > ready without progress.
    pending_since_s: float | None = None
    pending_ready: int = 0
    failing_until_s: float | None = None
    # Reactive-policy memory (baselines use it for their own windows).
    last_waiting: float | None = None
    # Learned correction of the plan's usable RPS (1 = trust the plan).
    capacity_factor: float = 1.0
    breach_streak: int = 0
    # Busy slots / (Ready replicas x concurrency), averaged over a few minutes: one
    # scrape of running requests is too noisy to tell room from saturation.
    slot_use_avg: float | None = None
    # Busy slots and arrivals of the whole tier, averaged the same way: their ratio is
    # how long a request holds a slot (Little's law), the basis of the learned capacity.
    running_avg: float | None = None
    rate_avg: float | None = None
    prompt_tokens_avg: float | None = None  # prompt tokens/s into the tier, averaged

    def copy(self) -> TierState:
        return TierState(
            recent_targets=list(self.recent_targets),
            observed_since_s=self.observed_since_s,
            last_scale_up_s=self.last_scale_up_s,
            last_scale_down_s=self.last_scale_down_s,
            last_desired=self.last_desired,
            pending_since_s=self.pending_since_s,
            pending_ready=self.pending_ready,
            failing_until_s=self.failing_until_s,
            last_waiting=self.last_waiting,
            capacity_factor=self.capacity_factor,
            breach_streak=self.breach_streak,
            slot_use_avg=self.slot_use_avg,
            running_avg=self.running_avg,
            rate_avg=self.rate_avg,
            prompt_tokens_avg=self.prompt_tokens_avg,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"recentTargets": [[t, n] for t, n in self.recent_targets]}
        for key, value in (
            ("observedSinceS", self.observed_since_s),
            ("lastScaleUpS", self.last_scale_up_s),
            ("lastScaleDownS", self.last_scale_down_s),
            ("lastDesired", self.last_desired),
            ("pendingSinceS", self.pending_since_s),
            ("failingUntilS", self.failing_until_s),
            ("lastWaiting", self.last_waiting),
            ("slotUseAvg", self.slot_use_avg),
            ("runningAvg", self.running_avg),
            ("rateAvg", self.rate_avg),
            ("promptTokensAvg", self.prompt_tokens_avg),
        ):
            if value is not None:
                data[key] = value
        if self.pending_ready:
            data["pendingReady"] = self.pending_ready
        if self.capacity_factor != 1.0:
            data["capacityFactor"] = self.capacity_factor
        if self.breach_streak:
            data["breachStreak"] = self.breach_streak
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TierState:
        def opt_float(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        last_desired = data.get("lastDesired")
        return cls(
            recent_targets=[(float(t), int(n)) for t, n in data.get("recentTargets", [])],
            observed_since_s=opt_float("observedSinceS"),
            last_scale_up_s=opt_float("lastScaleUpS"),
            last_scale_down_s=opt_float("lastScaleDownS"),
            last_desired=None if last_desired is None else int(last_desired),
            pending_since_s=opt_float("pendingSinceS"),
            pending_ready=int(data.get("pendingReady", 0)),
            failing_until_s=opt_float("failingUntilS"),
            last_waiting=opt_float("lastWaiting"),
            capacity_factor=float(data.get("capacityFactor", 1.0)),
            breach_streak=int(data.get("breachStreak", 0)),
            slot_use_avg=opt_float("slotUseAvg"),
            running_avg=opt_float("runningAvg"),
            rate_avg=opt_float("rateAvg"),
            prompt_tokens_avg=opt_float("promptTokensAvg"),
        )


@dataclass(slots=True)
class ScalingState:
    """The policy's whole memory; lives in `status.autoscalerState` between ticks."""

    tiers: dict[str, TierState] = field(default_factory=dict)
    last_decision_s: float | None = None

    def copy(self) -> ScalingState:
        return ScalingState(
            tiers={name: tier.copy() for name, tier in self.tiers.items()},
            last_decision_s=self.last_decision_s,
        )

    def tier(self, name: str) -> TierState:
        state = self.tiers.get(name)
        if state is None:
            state = TierState()
            self.tiers[name] = state
        return state

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "tiers": {name: tier.to_dict() for name, tier in sorted(self.tiers.items())},
        }
        if self.last_decision_s is not None:
            data["lastDecisionS"] = self.last_decision_s
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ScalingState:
        """Rebuild from `status.autoscalerState`; an empty or foreign dict gives a fresh state."""
        if not data or data.get("version") != STATE_VERSION:
            return cls()
        last = data.get("lastDecisionS")
        return cls(
            tiers={str(name): TierState.from_dict(tier) for name, tier in data.get("tiers", {}).items()},
            last_decision_s=None if last is None else float(last),
        )


# --- output ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TierRecommendation:
    name: str
    replicas: int
    current: int | None
    signal: str  # which signal set `replicas` (SIGNAL_*)
    reason: str
    targets: Mapping[str, int] = field(default_factory=dict)  # each signal's raw target
    traffic_share: float | None = None  # share of the demand placed on this tier


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One decision: replicas per tier, the signal that won and why."""

    now_s: float
    tiers: tuple[TierRecommendation, ...]
    signal: str
    reason: str
    forecast_rps: float | None = None
    demand_rps: float | None = None

    @property
    def replicas(self) -> dict[str, int]:
        return {tier.name: tier.replicas for tier in self.tiers}

    def tier(self, name: str) -> TierRecommendation | None:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "nowS": self.now_s,
            "replicas": self.replicas,
            "signal": self.signal,
            "reason": self.reason,
            "forecastRps": _finite_or_none(self.forecast_rps),
            "demandRps": _finite_or_none(self.demand_rps),
            "tiers": [
                {
                    "name": tier.name,
                    "replicas": tier.replicas,
                    "current": tier.current,
                    "signal": tier.signal,
                    "reason": tier.reason,
                    "targets": dict(tier.targets),
                    "trafficShare": _finite_or_none(tier.traffic_share),
                }
                for tier in self.tiers
            ],
        }


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 6)
