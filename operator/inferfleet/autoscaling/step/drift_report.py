"""The WorkloadDrift condition and status.observedWorkload for one service (pure).

After each decision the autoscaler knows the request mix the engines report
(autoscaling.policy.mix); `report` turns the verdict of autoscaling.policy.drift into what the user sees:
the condition (with the observed percentiles and, while drifted, the plan the observed
workload implies, from the same planner the reconciler runs), the observed workload in
status (refreshed with every status write; `inferfleet plan --observed-workload` and
`replan: auto` plan with it), and a Warning event when the verdict turns True.

The condition's message is kept while its status and reason stay the same, so a
drifting service does not rewrite its status every sync period; the numbers in
status.observedWorkload are the current ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from inferfleet.api import InferenceServiceSpec, TierPlan, labels
from inferfleet.autoscaling.policy import ScalingState, TierFigures, drift
from inferfleet.config import OperatorSettings
from inferfleet.design.policy_config import replan_mode
from inferfleet.design.replan import planned_percentiles, with_workload
from inferfleet.kubedata import kube_time

MESSAGE_MAX_CHARS = 1024
# The plans of the service designed with another spec, as the reconciler would (each
# tier's image, the model config its probe read).
Replanner = Callable[[InferenceServiceSpec], Sequence[TierPlan]]


@dataclass(frozen=True)
class DriftReport:
    condition: tuple[Literal["True", "False"], str, str] | None  # status, reason, message
    observed: Mapping[str, Any] | None
    warning: str | None  # message of the Warning event when the verdict turns True


def _previous(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == labels.CONDITION_WORKLOAD_DRIFT:
            return condition
    return None


def report(
    *,
    name: str,
    spec: InferenceServiceSpec,
    status: Mapping[str, Any],
    generation: int | None,
    plans: Sequence[TierPlan],
    figures: Mapping[str, TierFigures],
    state: ScalingState,
    settings: OperatorSettings,
    now_s: float,
    replan: Replanner,
) -> DriftReport:
    """The drift verdict for one service after a decision. `replan`: this service
    designed with another spec (design.design), for the plan the observed workload
    implies."""
    declared_in, declared_out, replanned = planned_percentiles(spec, status, generation)
    previous = _previous(status)
    was_drifted = previous is not None and previous.get("status") == "True"
    verdict = drift.assess(
        state,
        figures,
        declared_in,
        declared_out,
        previously=was_drifted,
        previous_reason=None if previous is None else str(previous.get("reason") or ""),
    )
    if verdict.drifted is None or verdict.observed is None:
        return DriftReport(None, None, None)
    value: Literal["True", "False"] = "True" if verdict.drifted else "False"
    observed: dict[str, Any] = {
        "time": kube_time(now_s),
        **verdict.observed.to_wire(),
        "drift": verdict.drifted,
    }
    if verdict.implied_input_tokens is not None and verdict.implied_output_tokens is not None:
        observed["impliedInputTokens"] = verdict.implied_input_tokens.to_wire()
        observed["impliedOutputTokens"] = verdict.implied_output_tokens.to_wire()
    if previous is not None and previous.get("status") == value and previous.get("reason") == verdict.reason:
        return DriftReport((value, verdict.reason, str(previous.get("message", ""))), observed, None)
    message = verdict.message
    if replanned:
        message += " (planned for the workload observed earlier, spec.scaling.replan: auto)"
    if (
        verdict.drifted
        and verdict.implied_input_tokens is not None
        and verdict.implied_output_tokens is not None
    ):
        implied_spec = with_workload(spec, verdict.implied_input_tokens, verdict.implied_output_tokens)
        implied = replan(implied_spec)
        action = (
            "the operator re-plans for it (spec.scaling.replan: auto)"
            if replan_mode(settings, spec) == "auto"
            else "re-plan with `inferfleet plan --observed-workload` (status.observedWorkload) "
            "or set spec.scaling.replan: auto"
        )
        message += f". The observed workload implies: {drift.describe_plans(plans, implied)}; {action}"
    message = message[:MESSAGE_MAX_CHARS]
    return DriftReport((value, verdict.reason, message), observed, message if verdict.drifted else None)
