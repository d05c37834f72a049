"""Is the plan wrong for the traffic the engines see? (pure)

The plan is made for the declared workload. `assess` compares what the policy has
learned from vLLM's metrics (autoscaling.policy.mix) with it and says whether the difference is
large enough to change the plan:

- `PromptsRejected`: at least `REJECTED_SHARE_ON` of the requests are answered 4xx while
  the prompts the engines do accept reach towards max-model-len (their p99 at least
  `NEAR_LIMIT_SHARE` of it): prompts longer than the limit are being refused. vLLM
  refuses them before its engine sees them, so the engines' histograms only hold the
  shorter ones: the workload implied for re-planning puts every percentile that the
  rejected share says lies beyond the limit at `BEYOND_LIMIT_FACTOR` times the limit (a
  lower bound; re-planning again if they still do not fit doubles it again, up to the
  model's context, where the planner stops).
- `CapacityMismatch`: the observed mix changes a replica's capacity (the plan's own
  roofline, autoscaling.policy.mix) by `CAPACITY_RATIO_ON` or more either way;
- `TokenLengthsMismatch`: a median or p95 of prompts or outputs is `LENGTH_RATIO_ON`
  times the declared one or more, either way: even where decode time hides it from the
  capacity, the KV cache a request holds (max-num-seqs, concurrency) and the context
  the plan allows are sized from these. (vLLM's 1-2-5 histogram buckets are 2-2.5x
  wide; a ratio this large is not an artefact of interpolating inside one.)

Hysteresis keeps the verdict from flapping: it is set at the `_ON` thresholds and
cleared only below the `_OFF` ones, and so is its reason (a reason that holds keeps
holding down to its `_OFF` thresholds). Nothing is said before `mix.MIX_FULL_REQUESTS`
requests have been observed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from inferfleet.api.plan import TierPlan
from inferfleet.api.spec import TokenPercentiles
from inferfleet.autoscaling.policy import mix
from inferfleet.autoscaling.policy.types import ScalingState, TierFigures

REASON_PROMPTS_REJECTED = "PromptsRejected"
REASON_CAPACITY_MISMATCH = "CapacityMismatch"
REASON_LENGTHS_MISMATCH = "TokenLengthsMismatch"
REASON_MATCHES_PLAN = "MatchesPlan"

REJECTED_SHARE_ON = 0.01
REJECTED_SHARE_OFF = 0.002
NEAR_LIMIT_SHARE = 0.5
NEAR_LIMIT_SHARE_OFF = 0.4
BEYOND_LIMIT_FACTOR = 2
CAPACITY_RATIO_ON = 2.0
CAPACITY_RATIO_OFF = 1.6
LENGTH_RATIO_ON = 4.0
LENGTH_RATIO_OFF = 3.0
_PERCENTILES = (0.50, 0.95, 0.99)


@dataclass(frozen=True)
class ObservedMix:
    """The request mix the engines report, service-wide."""

    input_tokens: TokenPercentiles
    output_tokens: TokenPercentiles
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    requests: float
    rejected_share: float
    capacity_ratio: float | None  # a replica's capacity for this mix / for the declared one
    max_model_len: int

    def to_wire(self) -> dict[str, object]:
        return {
            "inputTokens": self.input_tokens.to_wire(),
            "outputTokens": self.output_tokens.to_wire(),
            "meanInputTokens": _rounded(self.mean_input_tokens),
            "meanOutputTokens": _rounded(self.mean_output_tokens),
            "requests": int(self.requests),
            "rejectedShare": round(self.rejected_share, 4),
            "capacityRatio": None if self.capacity_ratio is None else round(self.capacity_ratio, 3),
        }


@dataclass(frozen=True)
class Drift:
    """The verdict. `drifted` is None while there is too little traffic to judge."""

    drifted: bool | None
    reason: str
    message: str
    observed: ObservedMix | None = None
    # The workload to plan with instead of the declared one (None: keep the declared).
    implied_input_tokens: TokenPercentiles | None = None
    implied_output_tokens: TokenPercentiles | None = None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _percentiles(values: Sequence[float]) -> TokenPercentiles:
    """Histogram quantiles as spec percentiles: whole tokens, at least 1, non-decreasing."""
    p50, p95, p99 = (max(1, round(v)) for v in values)
    return TokenPercentiles(p50=p50, p95=max(p50, p95), p99=max(p50, p95, p99))


def observe(state: ScalingState, figures: Mapping[str, TierFigures]) -> ObservedMix | None:
    """The service-wide observed mix: means over all tiers, percentiles from the tier that
    served the most; None before there is enough evidence or any histogram."""
    tiers = [(name, state.tiers[name]) for name in figures if name in state.tiers]
    seen = [(name, tier) for name, tier in tiers if tier.rate_avg is not None]
    if not seen:
        return None
    requests = sum(tier.mix_requests for _, tier in seen)
    if requests < mix.MIX_FULL_REQUESTS:
        return None
    name, busiest = max(seen, key=lambda item: item[1].rate_avg or 0.0)
    if busiest.prompt_quantiles is None or busiest.output_quantiles is None:
        return None
    rate = sum(tier.rate_avg or 0.0 for _, tier in seen)
    rejected = sum(tier.rejected_avg or 0.0 for _, tier in seen)
    prompt = sum(tier.prompt_tokens_avg or 0.0 for _, tier in seen)
    output = sum(tier.generation_tokens_avg or 0.0 for _, tier in seen)
    has_prompt = any(tier.prompt_tokens_avg is not None for _, tier in seen)
    has_output = any(tier.generation_tokens_avg is not None for _, tier in seen)
    offered = rate + rejected
    return ObservedMix(
        input_tokens=_percentiles(busiest.prompt_quantiles),
        output_tokens=_percentiles(busiest.output_quantiles),
        mean_input_tokens=prompt / rate if has_prompt and rate > 0 else None,
        mean_output_tokens=output / rate if has_output and rate > 0 else None,
        requests=requests,
        rejected_share=rejected / offered if offered > 0 else 0.0,
        capacity_ratio=mix.mix_goal(busiest, figures[name]),
        max_model_len=figures[name].max_model_len,
    )


def _beyond_limit(percentiles: TokenPercentiles, rejected_share: float, limit: int) -> TokenPercentiles:
    """Percentiles that the rejected share puts beyond the limit, raised past it."""
    values = [percentiles.p50, percentiles.p95, percentiles.p99]
    for index, quantile in enumerate(_PERCENTILES):
        if rejected_share > 1.0 - quantile:
            values[index] = max(values[index], BEYOND_LIMIT_FACTOR * limit)
    return _percentiles(values)


def _describe(observed: ObservedMix, declared_in: TokenPercentiles, declared_out: TokenPercentiles) -> str:
    def fmt(p: TokenPercentiles) -> str:
        return f"{p.p50:,}/{p.p95:,}/{p.p99:,}"

    return (
        f"observed prompts p50/p95/p99 {fmt(observed.input_tokens)} tokens "
        f"(declared {fmt(declared_in)}), outputs {fmt(observed.output_tokens)} "
        f"(declared {fmt(declared_out)}), over {observed.requests:,.0f} requests"
    )


def assess(
    state: ScalingState,
    figures: Mapping[str, TierFigures],
    declared_input: TokenPercentiles,
    declared_output: TokenPercentiles,
    *,
    previously: bool | None,
    previous_reason: str | None = None,
) -> Drift:
    """The verdict on the declared workload given what the engines report; `previously`
    is the last verdict and `previous_reason` its reason (hysteresis).

    A reason that held keeps holding down to its `_OFF` thresholds, and another reason
    takes over only at its `_ON` ones (PromptsRejected first, then CapacityMismatch, then
    TokenLengthsMismatch): readings that hover around one threshold (a p99 around half
    of max-model-len) would otherwise flip the reason, its message and a Warning event
    every few ticks."""
    observed = observe(state, figures)
    if observed is None:
        return Drift(None, "", "")
    described = _describe(observed, declared_input, declared_output)
    checks: tuple[tuple[str, Callable[[bool], Drift | None]], ...] = (
        (REASON_PROMPTS_REJECTED, partial(_rejected, observed, described)),
        (REASON_CAPACITY_MISMATCH, partial(_capacity, observed, described)),
        (REASON_LENGTHS_MISMATCH, partial(_lengths, observed, described, declared_input, declared_output)),
    )
    known = {reason for reason, _ in checks}
    sticky = previous_reason if previously and previous_reason in known else None
    for reason, check in checks:
        # Before the reason that holds: only a reason that crosses its own set threshold.
        verdict = check(reason == sticky or (sticky is None and bool(previously)))
        if verdict is not None:
            return verdict
        if reason == sticky:
            sticky = None  # it no longer holds: the rest are judged as after any drift
    return Drift(False, REASON_MATCHES_PLAN, f"the traffic matches the plan: {described}", observed)


def _rejected(observed: ObservedMix, described: str, held: bool) -> Drift | None:
    limit = observed.max_model_len
    share_on = REJECTED_SHARE_OFF if held else REJECTED_SHARE_ON
    near = NEAR_LIMIT_SHARE_OFF if held else NEAR_LIMIT_SHARE
    if limit <= 0 or observed.input_tokens.p99 < near * limit or observed.rejected_share < share_on:
        return None
    implied = _beyond_limit(observed.input_tokens, observed.rejected_share, limit)
    return Drift(
        True,
        REASON_PROMPTS_REJECTED,
        f"{observed.rejected_share:.1%} of requests are answered 4xx while the prompts served "
        f"reach {observed.input_tokens.p99:,} of max-model-len {limit:,} tokens: prompts "
        f"longer than max-model-len are rejected; {described}",
        observed,
        implied_input_tokens=implied,
        implied_output_tokens=observed.output_tokens,
    )


def _capacity(observed: ObservedMix, described: str, held: bool) -> Drift | None:
    ratio = observed.capacity_ratio
    ratio_on = CAPACITY_RATIO_OFF if held else CAPACITY_RATIO_ON
    if ratio is None or ratio <= 0 or max(ratio, 1.0 / ratio) < ratio_on:
        return None
    direction = "less" if ratio < 1.0 else "more"
    factor = 1.0 / ratio if ratio < 1.0 else ratio
    return Drift(
        True,
        REASON_CAPACITY_MISMATCH,
        f"a replica serves {factor:.1f}x {direction} of the real mix than the plan assumes; {described}",
        observed,
        implied_input_tokens=observed.input_tokens,
        implied_output_tokens=observed.output_tokens,
    )


def _lengths(
    observed: ObservedMix,
    described: str,
    declared_input: TokenPercentiles,
    declared_output: TokenPercentiles,
    held: bool,
) -> Drift | None:
    length_on = LENGTH_RATIO_OFF if held else LENGTH_RATIO_ON
    off = _length_mismatch(observed, declared_input, declared_output, length_on)
    if off is None:
        return None
    return Drift(
        True,
        REASON_LENGTHS_MISMATCH,
        f"{off}; {described}",
        observed,
        implied_input_tokens=observed.input_tokens,
        implied_output_tokens=observed.output_tokens,
    )


def _length_mismatch(
    observed: ObservedMix, declared_in: TokenPercentiles, declared_out: TokenPercentiles, ratio_on: float
) -> str | None:
    """The first median or p95 that is `ratio_on` times off the declared one, in words."""
    pairs = (
        ("prompt p50", observed.input_tokens.p50, declared_in.p50),
        ("prompt p95", observed.input_tokens.p95, declared_in.p95),
        ("output p50", observed.output_tokens.p50, declared_out.p50),
        ("output p95", observed.output_tokens.p95, declared_out.p95),
    )
    for label, seen, declared in pairs:
        ratio = seen / declared
        if max(ratio, 1.0 / ratio) >= ratio_on:
            direction = "longer" if ratio > 1.0 else "shorter"
            factor = ratio if ratio > 1.0 else 1.0 / ratio
            return (
                f"the {label} is {factor:.1f}x {direction} than declared "
                f"({seen:,} tokens, declared {declared:,})"
            )
    return None


def describe_plans(current: Sequence[TierPlan], implied: Sequence[TierPlan]) -> str:
    """What re-planning for the observed workload would change, tier by tier."""
    before = {tier.name: tier for tier in current}
    parts: list[str] = []
    for tier in implied:
        old = before.get(tier.name)
        if not tier.feasible:
            parts.append(f"{tier.name}: infeasible for the observed workload ({tier.reasons[0]})")
            continue
        changes = [
            f"{label} {fmt(getattr(tier, attr))}"
            + (
                f" (now {fmt(getattr(old, attr))})"
                if old is not None and getattr(old, attr) != getattr(tier, attr)
                else ""
            )
            for label, attr, fmt in _PLAN_FIELDS
        ]
        parts.append(f"{tier.name}: " + ", ".join(changes))
    return "; ".join(parts)


def _int(value: object) -> str:
    return f"{int(value):,}" if isinstance(value, int | float) and math.isfinite(float(value)) else str(value)


def _rps(value: object) -> str:
    return f"{float(value):.2f} req/s" if isinstance(value, int | float) else str(value)


_PLAN_FIELDS = (
    ("TP", "tensor_parallel_size", _int),
    ("max-model-len", "max_model_len", _int),
    ("max-num-seqs", "max_num_seqs", _int),
    ("usable", "usable_rps", _rps),
    ("replicas for peak", "replicas_for_peak", _int),
)
