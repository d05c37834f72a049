"""The request mix the engines report, and what it does to a replica's capacity (pure).

The plan sizes a replica for the *declared* workload: its usable RPS is a roofline
figure at the declared mean prompt and output. Platform teams declare workloads from
guesses, and the real mix drifts; what vLLM reports is the truth. Its counters give the
mean prompt (`vllm:prompt_tokens_total` over requests) and the mean output
(`vllm:generation_tokens_total` over requests); its `request_prompt_tokens` and
`request_generation_tokens` histograms give the percentiles.

Each tick, `observe` folds the tier's signals into its state (averages over a few
minutes, and how many requests they rest on). `mix_factor` then rescales the plan's
usable RPS with the plan's own roofline: a request costs `output / decode tokens per
second + prompt / prefill tokens per second` of a replica at its batch, so the factor
is the declared cost over the observed one. The declared workload is only the prior:
the observed means replace it in proportion to the evidence (all of it after
`MIX_FULL_REQUESTS` requests). The factor falls at once (a fleet sized for prompts ten
times shorter than the real ones drowns within minutes) and rises over `MIX_RISE_S`
(a quiet spell of short prompts should not shrink a fleet that still gets long ones).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inferfleet.autoscaling.policy.types import TierFigures, TierSignals, TierState

# Token counters and request rates are averaged over this window: one scrape's ratio of
# two rates is noise, a few minutes of requests is a mix.
MIX_AVG_S = 180.0
# Requests after which the observed means fully replace the declared ones.
MIX_FULL_REQUESTS = 300.0
# The capacity the mix implies falls and rises with these time constants: fast enough
# down that a fleet sized for prompts ten times too short is corrected in a couple of
# minutes, slow enough that one noisy reading (the averages start from the first one)
# does not set it.
MIX_FALL_S = 60.0
MIX_RISE_S = 600.0
MIX_FACTOR_MIN = 0.02
MIX_FACTOR_MAX = 4.0


def average(previous: float | None, sample: float, weight: float) -> float:
    return sample if previous is None else previous + weight * (sample - previous)


def observe(state: TierState, signals: TierSignals, dt_s: float) -> None:
    """Fold one tick's rates and histograms into the tier's averages."""
    rate = signals.request_rate_rps
    if rate is None:
        return
    weight = min(1.0, dt_s / MIX_AVG_S)
    state.rate_avg = average(state.rate_avg, rate, weight)
    if signals.prompt_tokens_rps is not None:
        state.prompt_tokens_avg = average(state.prompt_tokens_avg, signals.prompt_tokens_rps, weight)
    if signals.generation_tokens_rps is not None:
        state.generation_tokens_avg = average(
            state.generation_tokens_avg, signals.generation_tokens_rps, weight
        )
    if signals.rejected_rps is not None:
        state.rejected_avg = average(state.rejected_avg, signals.rejected_rps, weight)
    state.mix_requests = min(1e9, state.mix_requests + rate * dt_s)
    if signals.prompt_tokens is not None:
        state.prompt_quantiles = signals.prompt_tokens.as_list()
    if signals.generation_tokens is not None:
        state.output_quantiles = signals.generation_tokens.as_list()


def _observed_mean(tokens_avg: float | None, rate_avg: float | None) -> float | None:
    if tokens_avg is None or rate_avg is None or rate_avg <= 1e-9:
        return None
    return tokens_avg / rate_avg


def evidence(state: TierState) -> float:
    """0 (nothing observed) to 1 (enough requests to trust the observed mix alone)."""
    return _evidence(state.mix_requests)


def _evidence(requests: float) -> float:
    return min(1.0, requests / MIX_FULL_REQUESTS)


@dataclass(frozen=True, slots=True)
class ServiceMix:
    """The mix every tier of the service reports together: the prior of a tier that has
    seen few requests of its own (a spot tier that has just started, say). The tiers of
    one service get the same traffic unless routing splits it, and whatever splits it,
    what the service's engines serve is a better guess than the declaration."""

    prompt_tokens: float | None  # mean prompt over the requests of every tier
    output_tokens: float | None
    requests: float


NO_SERVICE_MIX = ServiceMix(None, None, 0.0)


def service_mix(states: Iterable[TierState]) -> ServiceMix:
    """Pool the tiers' averages: total tokens/s over total requests/s."""
    rate = prompt = output = requests = 0.0
    has_prompt = has_output = False
    for state in states:
        if state.rate_avg is None or state.rate_avg <= 1e-9:
            continue
        rate += state.rate_avg
        requests += state.mix_requests
        if state.prompt_tokens_avg is not None:
            prompt += state.prompt_tokens_avg
            has_prompt = True
        if state.generation_tokens_avg is not None:
            output += state.generation_tokens_avg
            has_output = True
    if rate <= 1e-9:
        return NO_SERVICE_MIX
    return ServiceMix(prompt / rate if has_prompt else None, output / rate if has_output else None, requests)


def mean_prompt_tokens(
    state: TierState, figures: TierFigures, service: ServiceMix = NO_SERVICE_MIX
) -> float | None:
    """The mean prompt: observed, blended with the prior (the service's observed mix,
    itself blended with the declared one) while the tier's own evidence is thin."""
    prior = _blend(service.prompt_tokens, figures.mean_input_tokens, _evidence(service.requests))
    return _blend(_observed_mean(state.prompt_tokens_avg, state.rate_avg), prior, evidence(state))


def mean_output_tokens(
    state: TierState, figures: TierFigures, service: ServiceMix = NO_SERVICE_MIX
) -> float | None:
    """The mean output: observed, blended with the prior while evidence is thin."""
    prior = _blend(service.output_tokens, figures.mean_output_tokens, _evidence(service.requests))
    return _blend(_observed_mean(state.generation_tokens_avg, state.rate_avg), prior, evidence(state))


def _blend(observed: float | None, declared: float | None, share: float) -> float | None:
    if observed is None:
        return declared
    if declared is None:
        return observed
    return share * observed + (1.0 - share) * declared


def request_cost_s(figures: TierFigures, prompt_tokens: float, output_tokens: float) -> float | None:
    """Replica-seconds one request takes at the plan's batch (the planner's roofline:
    decode at `slots / step` tokens per second, prefill at its own rate); None without
    performance figures."""
    batch = max(1.0, figures.max_concurrency)
    step_ms = figures.decode_step_base_ms + figures.decode_step_per_seq_ms * batch
    if step_ms <= 0.0 or figures.prefill_tokens_per_s <= 0.0:
        return None
    decode_tokens_per_s = batch / (step_ms / 1000.0)
    return (
        max(0.0, output_tokens) / decode_tokens_per_s + max(0.0, prompt_tokens) / figures.prefill_tokens_per_s
    )


def mix_goal(state: TierState, figures: TierFigures, service: ServiceMix = NO_SERVICE_MIX) -> float | None:
    """The plan's usable RPS, rescaled to the observed mix (as a factor); None when the
    declared or the observed mix is unknown."""
    if figures.mean_input_tokens is None or figures.mean_output_tokens is None:
        return None
    prompt = mean_prompt_tokens(state, figures, service)
    output = mean_output_tokens(state, figures, service)
    if prompt is None or output is None:
        return None
    declared = request_cost_s(figures, figures.mean_input_tokens, figures.mean_output_tokens)
    observed = request_cost_s(figures, prompt, output)
    if declared is None or observed is None or observed <= 0.0:
        return None
    return min(MIX_FACTOR_MAX, max(MIX_FACTOR_MIN, declared / observed))


# The mix factor is still falling towards what the observed mix implies while it sits
# this far above it.
MIX_SETTLED_RATIO = 1.1


def settling(state: TierState, figures: TierFigures, service: ServiceMix = NO_SERVICE_MIX) -> bool:
    """Whether the capacity the mix implies is still falling: the factor is still on its
    way down to the observed mix's goal."""
    goal = mix_goal(state, figures, service)
    return goal is not None and state.mix_factor > goal * MIX_SETTLED_RATIO


def update_mix_factor(
    state: TierState, figures: TierFigures, dt_s: float, service: ServiceMix = NO_SERVICE_MIX
) -> float:
    """Move the tier's mix factor towards what the observed mix implies; returns it."""
    goal = mix_goal(state, figures, service)
    if goal is not None:
        pace_s = MIX_FALL_S if goal < state.mix_factor else MIX_RISE_S
        state.mix_factor += (goal - state.mix_factor) * min(1.0, dt_s / pace_s)
    return state.mix_factor
