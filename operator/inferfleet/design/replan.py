"""Which workload to plan for: the declared one, or the one the engines report (pure).

With `spec.scaling.replan: auto` (or the operator's `replan` setting), a WorkloadDrift
verdict of the autoscaler (status.observedWorkload with `drift: true`) makes the
reconciler plan for the observed workload instead of the declared one, and record it in
status.plannedWorkload, so every later pass keeps planning for it (and the autoscaler
compares the engines' mix with it rather than with the spec). It is kept while the
spec's generation is the one it was planned at: editing the spec returns to the
declared workload. A new re-plan waits `MIN_INTERVAL_S` after the last one, long enough
for the re-planned pods to roll out and report their own mix, so the fleet is never
rolled again on readings taken before the last re-plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from inferfleet.api.spec import InferenceServiceSpec, TokenPercentiles
from inferfleet.kubedata import parse_kube_time

MIN_INTERVAL_S = 1800.0


def _tokens(raw: object) -> TokenPercentiles | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return TokenPercentiles.model_validate(raw)
    except ValidationError:
        return None


def planned_workload(
    spec: InferenceServiceSpec,
    status: Mapping[str, Any],
    *,
    generation: int | None,
    replan: str,
    now: str,
) -> tuple[InferenceServiceSpec, dict[str, Any] | None]:
    """The spec to plan with and the status.plannedWorkload to write (None: the declared
    workload is planned and the field goes)."""
    if replan != "auto" or generation is None:
        return spec, None
    current: dict[str, Any] | None = None
    previous = status.get("plannedWorkload")
    if (
        isinstance(previous, Mapping)
        and previous.get("generation") == generation
        and _tokens(previous.get("inputTokens"))
        and _tokens(previous.get("outputTokens"))
    ):
        current = dict(previous)
    observed = status.get("observedWorkload")
    if isinstance(observed, Mapping) and observed.get("drift") is True:
        implied_in = _tokens(observed.get("impliedInputTokens"))
        implied_out = _tokens(observed.get("impliedOutputTokens"))
        seen_s = parse_kube_time(observed.get("time"))
        last_s = None if current is None else parse_kube_time(current.get("time"))
        due = last_s is None or (seen_s is not None and seen_s >= last_s + MIN_INTERVAL_S)
        if implied_in is not None and implied_out is not None and due:
            current = {
                "source": "observed",
                "time": now,
                "generation": generation,
                "inputTokens": implied_in.to_wire(),
                "outputTokens": implied_out.to_wire(),
            }
    if current is None:
        return spec, None
    input_tokens = _tokens(current["inputTokens"])
    output_tokens = _tokens(current["outputTokens"])
    assert input_tokens is not None and output_tokens is not None  # validated above
    return with_workload(spec, input_tokens, output_tokens), current


def announce(previous: Mapping[str, Any], planned: Mapping[str, Any] | None) -> str | None:
    """The message of the event for a new re-plan, None when nothing changed."""
    if planned is None or previous.get("plannedWorkload") == planned:
        return None
    tokens_in, tokens_out = planned["inputTokens"], planned["outputTokens"]
    return (
        "re-planned for the observed workload (spec.scaling.replan: auto): prompts p50/p95/p99 "
        f"{tokens_in['p50']}/{tokens_in['p95']}/{tokens_in['p99']}, outputs "
        f"{tokens_out['p50']}/{tokens_out['p95']}/{tokens_out['p99']} tokens"
    )


def planned_percentiles(
    spec: InferenceServiceSpec, status: Mapping[str, Any], generation: int | None
) -> tuple[TokenPercentiles, TokenPercentiles, bool]:
    """The token percentiles the current plan was made for: the declared ones, or the
    observed ones the operator re-planned with (status.plannedWorkload, kept while the
    spec's generation is the one they were planned at). The flag says which."""
    planned = status.get("plannedWorkload")
    if isinstance(planned, Mapping) and generation is not None and planned.get("generation") == generation:
        try:
            return (
                TokenPercentiles.model_validate(planned.get("inputTokens")),
                TokenPercentiles.model_validate(planned.get("outputTokens")),
                True,
            )
        except ValidationError:
            pass  # a hand-edited status: fall back to the declared workload
    return spec.workload.input_tokens, spec.workload.output_tokens, False


def with_workload(
    spec: InferenceServiceSpec, input_tokens: TokenPercentiles, output_tokens: TokenPercentiles
) -> InferenceServiceSpec:
    """The spec with its token percentiles replaced (what `inferfleet plan
    --observed-workload` and re-planning plan with); everything else as declared."""
    workload = spec.workload.model_copy(update={"input_tokens": input_tokens, "output_tokens": output_tokens})
    return spec.model_copy(update={"workload": workload})
