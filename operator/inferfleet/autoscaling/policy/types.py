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
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from inferfleet.autoscaling.policy.readings import NO_READINGS, TierReadings, TokenQuantiles
from inferfleet.design.policy_config import PolicyConfig

# Names of the signals that can win a tier's decision (also `ScalingDecision.signal`).
SIGNAL_WARM_MINIMUM = "warmMinimum"
SIGNAL_PREDICTIVE = "predictive"
SIGNAL_REACTIVE = "reactive"
SIGNAL_SCHEDULED = "scheduled"
SIGNAL_ESCALATION = "escalation"
SIGNAL_HOLD = "hold"
SIGNAL_WAKE = "wake"  # the front door holds requests and no replica of their pool is wanted

STATE_VERSION = 1


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
    # The declared mean prompt and output, used until the engines report the real mix;
    # None: unknown.
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    # The deployed --max-model-len: vLLM answers a longer prompt with HTTP 400 (0: unknown).
    max_model_len: int = 0


@dataclass(frozen=True, slots=True)
class TierSignals:
    """What the live loop (or the simulator) observed for one tier: the workload's replica
    counts (None = not observed) and the engines' load readings, checked once when they
    were made (autoscaling.policy.readings)."""

    ready_replicas: int | None = None
    desired_replicas: int | None = None  # the workload's current spec.replicas
    load: TierReadings = NO_READINGS

    @property
    def waiting(self) -> float | None:
        """Requests queued (vllm:num_requests_waiting, summed)."""
        return self.load.waiting

    @property
    def running(self) -> float | None:
        """Requests in flight (vllm:num_requests_running, summed)."""
        return self.load.running

    @property
    def ttft_p99_ms(self) -> float | None:
        """Over the last window; None also when no request finished."""
        return self.load.ttft_p99_ms

    @property
    def request_rate_rps(self) -> float | None:
        """Requests the engines took on over the last minute (vllm:request_success_total): a
        saturated tier serves less than arrives, the queue holds the rest."""
        return self.load.request_rate_rps

    @property
    def prompt_tokens_rps(self) -> float | None:
        """Prompt tokens prefilled per second, summed over the tier: with the plan's
        prefill throughput, how busy prefill keeps the replicas."""
        return self.load.prompt_tokens_rps

    @property
    def generation_tokens_rps(self) -> float | None:
        """Output tokens per second: with the request rate, the mean output produced."""
        return self.load.generation_tokens_rps

    @property
    def rejected_rps(self) -> float | None:
        """4xx answers per second (http_requests_total): prompts longer than max-model-len
        never reach the engine, so only the HTTP layer counts them."""
        return self.load.rejected_rps

    @property
    def prompt_tokens(self) -> TokenQuantiles | None:
        """Prompt-length percentiles of the requests finished over the mix window."""
        return self.load.prompt_tokens

    @property
    def generation_tokens(self) -> TokenQuantiles | None:
        return self.load.generation_tokens


@dataclass(frozen=True, slots=True)
class DoorPool:
    """One InferencePool of the front door: the tiers whose pods it routes to (its own
    tier first in share mode, then the overflow tiers) and the requests its endpoint
    picker holds (the flow-control queue; None: not read)."""

    tiers: tuple[str, ...]
    waiting: float | None


@dataclass(frozen=True, slots=True)
class FrontDoorSignals:
    """What the front door shows: its pools' held requests, and the tiers whose weights
    already sit on at least one of their nodes (pre-cache Ready: they start fastest)."""

    pools: tuple[DoorPool, ...]
    cached_tiers: frozenset[str] = frozenset()


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
    # None: no front door that holds requests (then no tier may stand at zero).
    front_door: FrontDoorSignals | None = None

    def tier(self, name: str) -> TierContext | None:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        return None


# --- state persisted between ticks ----------------------------------------------------


@dataclass(slots=True)
class TierState:
    """Per-tier memory of the policy. Mutable on purpose: decide() copies it first.

    Persisted as camelCase keys of the field names (`to_dict`), a field at its default
    left out, so old states read back unchanged and new fields start at their defaults.
    """

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
    # Learned correction of the plan's usable RPS beyond what the request mix explains
    # (1 = trust the roofline).
    capacity_factor: float = 1.0
    breach_streak: int = 0
    capacity_cut_s: float | None = None  # when a breach last cut the factor
    # Busy slots / (Ready replicas x concurrency), averaged over a few minutes: one
    # scrape of running requests is too noisy to tell room from saturation.
    slot_use_avg: float | None = None
    # Busy slots and arrivals of the whole tier, averaged the same way: their ratio is
    # how long a request holds a slot (Little's law), the basis of the learned capacity.
    running_avg: float | None = None
    rate_avg: float | None = None
    prompt_tokens_avg: float | None = None  # prompt tokens/s into the tier, averaged
    generation_tokens_avg: float | None = None  # output tokens/s, averaged
    rejected_avg: float | None = None  # 4xx answers/s, averaged
    # The request mix the engines report (see autoscaling.policy.mix): mean prompt and output per
    # request, how many requests that rests on, and the plan's capacity rescaled to it.
    mix_requests: float = 0.0
    mix_factor: float = 1.0
    prompt_quantiles: list[float] | None = None  # [p50, p95, p99], the last reading
    output_quantiles: list[float] | None = None
    # Escalation (autoscaling.policy.policy): since when queue or TTFT has been in breach, and the
    # queue when it started.
    breach_since_s: float | None = None
    breach_waiting: float | None = None
    # Since when the tier has had Ready replicas but no load data (the autoscaler's step
    # reports it only after a first-scrape grace; decide() does not read it).
    metrics_missing_since_s: float | None = None

    def copy(self) -> TierState:
        clone = TierState(**{name: getattr(self, name) for name in _TIER_FIELDS})
        clone.recent_targets = list(self.recent_targets)
        if self.prompt_quantiles is not None:
            clone.prompt_quantiles = list(self.prompt_quantiles)
        if self.output_quantiles is not None:
            clone.output_quantiles = list(self.output_quantiles)
        return clone

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"recentTargets": [[t, n] for t, n in self.recent_targets]}
        for name, key in _TIER_FIELDS.items():
            value = getattr(self, name)
            if name == "recent_targets" or value == _TIER_DEFAULTS[name]:
                continue
            data[key] = list(value) if isinstance(value, list) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TierState:
        state = cls(recent_targets=[(float(t), int(n)) for t, n in data.get("recentTargets", [])])
        for name, key in _TIER_FIELDS.items():
            value = data.get(key)
            if name == "recent_targets" or value is None:
                continue
            default = _TIER_DEFAULTS[name]
            if name in _TIER_INT_FIELDS:
                setattr(state, name, int(value))
            elif name in _TIER_LIST_FIELDS:
                setattr(state, name, [float(v) for v in value])
            else:
                setattr(state, name, float(value) if default is None or isinstance(default, float) else value)
        return state


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() if part != "s" else "S" for part in rest)


_TIER_FIELDS = {f.name: _camel(f.name) for f in fields(TierState)}
_TIER_DEFAULTS: dict[str, Any] = {
    f.name: (f.default if f.default is not MISSING else None) for f in fields(TierState)
}
_TIER_INT_FIELDS = frozenset({"last_desired", "pending_ready", "breach_streak"})
_TIER_LIST_FIELDS = frozenset({"prompt_quantiles", "output_quantiles"})


@dataclass(slots=True)
class ScalingState:
    """The policy's whole memory; lives in `status.autoscalerState` between ticks."""

    tiers: dict[str, TierState] = field(default_factory=dict)
    last_decision_s: float | None = None
    # Measured forecast error (autoscaling.policy.headroom): forecasts waiting for the minute they
    # predicted, as (due time s, forecast req/s), and the running estimate of how far
    # above its forecast demand turns out (a log ratio quantile) with its sample count.
    forecasts_due: list[tuple[float, float]] = field(default_factory=list)
    forecast_error: float | None = None
    forecast_errors_seen: int = 0

    def copy(self) -> ScalingState:
        return ScalingState(
            tiers={name: tier.copy() for name, tier in self.tiers.items()},
            last_decision_s=self.last_decision_s,
            forecasts_due=list(self.forecasts_due),
            forecast_error=self.forecast_error,
            forecast_errors_seen=self.forecast_errors_seen,
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
        if self.forecasts_due:
            data["forecastsDue"] = [[t, v] for t, v in self.forecasts_due]
        if self.forecast_error is not None:
            data["forecastError"] = self.forecast_error
            data["forecastErrorsSeen"] = self.forecast_errors_seen
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ScalingState:
        """Rebuild from `status.autoscalerState`; an empty or foreign dict gives a fresh state."""
        if not data or data.get("version") != STATE_VERSION:
            return cls()
        last = data.get("lastDecisionS")
        error = data.get("forecastError")
        return cls(
            tiers={str(name): TierState.from_dict(tier) for name, tier in data.get("tiers", {}).items()},
            last_decision_s=None if last is None else float(last),
            forecasts_due=[(float(t), float(v)) for t, v in data.get("forecastsDue", [])],
            forecast_error=None if error is None else float(error),
            forecast_errors_seen=int(data.get("forecastErrorsSeen", 0)),
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
            "forecastRps": finite_or_none(self.forecast_rps),
            "demandRps": finite_or_none(self.demand_rps),
            "tiers": [
                {
                    "name": tier.name,
                    "replicas": tier.replicas,
                    "current": tier.current,
                    "signal": tier.signal,
                    "reason": tier.reason,
                    "targets": dict(tier.targets),
                    "trafficShare": finite_or_none(tier.traffic_share),
                }
                for tier in self.tiers
            ],
        }


def finite_or_none(value: float | None) -> float | None:
    """A reading as it goes on the wire: rounded, or None when absent or not finite."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, 6)
