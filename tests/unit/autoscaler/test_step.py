"""The pure step: no cluster, no Prometheus."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import InferenceServiceSpec, TierPlan, labels
from inferfleet.api.status import ObservedWorkload
from inferfleet.autoscaling.policy import Recommendation, ScalingContext, ScalingState, TokenQuantiles, decide
from inferfleet.autoscaling.policy.readings import TierReadings
from inferfleet.autoscaling.step import step as step_module
from inferfleet.autoscaling.step.drift_report import Replanner
from inferfleet.autoscaling.step.step import (
    ConditionUpdate,
    Observation,
    ServiceInput,
    StepResult,
    deletion_costs,
    is_due,
    material_state,
    should_write,
    step,
)
from inferfleet.kubedata import kube_time
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit.step import step_input

T0 = 1_800_000_000.0


CHAT = a_scaled_service("chat", "ns").only_tier("l4", "L4", min_replicas=2, max_replicas=6)


def service_input(replicas: int, ready: int, status: dict[str, object] | None = None) -> ServiceInput:
    return step_input(CHAT, [a_small_tier_plan("l4")], replicas=replicas, ready=ready, status=status)


def test_unavailable_metrics_still_restore_the_warm_minimum() -> None:
    result = step(service_input(0, 0), Observation({}, unavailable="down"), T0)
    assert [(s.tier, s.to_replicas) for s in result.scales] == [("l4", 2)]
    [active] = [c for c in result.conditions if c.type == labels.CONDITION_SCALING_ACTIVE]
    assert (active.status, active.reason) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    warnings = [e.reason for e in result.events if e.type == "Warning"]
    assert warnings == [labels.REASON_METRICS_UNAVAILABLE]


def test_idle_tier_without_ready_replicas_is_not_a_metrics_fault() -> None:
    result = step(service_input(2, 0), Observation({}), T0)
    [active] = [c for c in result.conditions if c.type == labels.CONDITION_SCALING_ACTIVE]
    assert active.status == "True"
    assert not [c for c in result.conditions if c.type == labels.CONDITION_DEGRADED]  # never the autoscaler's
    scaling = [c for c in result.conditions if c.type == labels.CONDITION_SCALING]
    assert scaling[0].status == "True"  # 0/2 ready: cold start in progress


def test_ready_replicas_not_yet_scraped_are_reported_only_after_the_first_scrape_grace() -> None:
    """Between a replica's Ready and Prometheus's first scrape of it the tier reports
    nothing; that is no fault until the silence outlasts the grace, even across a restart
    (the state status keeps) and whatever the ticks in between."""

    def active_after(status: dict[str, Any] | None, at_s: float) -> tuple[ConditionUpdate, dict[str, Any]]:
        result = step(service_input(2, 2, status=status), Observation({}), at_s, force=True)
        [active] = [c for c in result.conditions if c.type == labels.CONDITION_SCALING_ACTIVE]
        return active, {"autoscalerState": result.status["autoscalerState"]}

    first, status = active_after(None, T0)
    assert first.status == "True"
    within, status = active_after(status, T0 + step_module.FIRST_SCRAPE_GRACE_S - 1)
    assert within.status == "True"
    past, status = active_after(status, T0 + step_module.FIRST_SCRAPE_GRACE_S)
    assert (past.status, past.reason) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    assert "no metrics for tier(s) with ready replicas, holding them: l4" in past.message
    # Data again clears the memory: a later silence gets its own grace.
    observed = TierReadings(waiting=0.0, running=1.0, request_rate_rps=1.0, ready_replicas=2)
    result = step(
        service_input(2, 2, status=status),
        Observation({"l4": observed}),
        T0 + 60,
        force=True,
    )
    assert "metricsMissingSinceS" not in result.status["autoscalerState"]["tiers"]["l4"]
    again, _ = active_after({"autoscalerState": result.status["autoscalerState"]}, T0 + 75)
    assert again.status == "True"


def test_a_tier_no_node_can_take_is_not_called_cold_starting() -> None:
    """The reconciler counted no node for the tier's placement (status.cache nodesWanted):
    Scaling says so instead of "waiting for cold-starting replicas"."""
    wanted = "cloud.google.com/gke-accelerator=nvidia-l4"
    stranded = {"cache": [{"tier": "l4", "nodesReady": 0, "nodesEligible": 0, "nodesWanted": wanted}]}
    result = step(service_input(2, 0, status=stranded), Observation({}), T0)
    [scaling] = [c for c in result.conditions if c.type == labels.CONDITION_SCALING]
    assert (scaling.status, scaling.reason) == ("True", step_module.REASON_NO_ELIGIBLE_NODES)
    assert "l4: 0/2 ready, no node matches its placement" in scaling.message
    assert "cold-starting" not in scaling.message
    counted = {"cache": [{"tier": "l4", "nodesReady": 0, "nodesEligible": 3}]}
    result = step(service_input(2, 0, status=counted), Observation({}), T0)
    [scaling] = [c for c in result.conditions if c.type == labels.CONDITION_SCALING]
    assert scaling.reason == step_module.REASON_WAITING_FOR_REPLICAS


def test_decision_carries_the_signals() -> None:
    observed = TierReadings(waiting=3.0, running=4.0, ttft_p99_s=0.8, request_rate_rps=1.0, ready_replicas=2)
    result = step(service_input(2, 2), Observation({"l4": observed}), T0)
    decision = result.status["lastScalingDecision"]
    assert decision["queueDepth"] == 3.0
    assert decision["ttftP99Ms"] == 800.0
    assert decision["time"] == "2027-01-15T08:00:00Z"
    assert result.status["ttftP99Ms"] == 800.0


def _contexts(monkeypatch: pytest.MonkeyPatch) -> list[ScalingContext]:
    """Record every context step() hands to decide(), still deciding for real."""
    seen: list[ScalingContext] = []

    def recording(ctx: ScalingContext, state: ScalingState | None) -> tuple[Recommendation, ScalingState]:
        seen.append(ctx)
        return decide(ctx, state)

    monkeypatch.setattr(step_module, "decide", recording)
    return seen


def test_prompt_tokens_rate_reaches_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _contexts(monkeypatch)
    observed = TierReadings(
        waiting=0.0, running=4.0, request_rate_rps=2.0, prompt_tokens_rps=3072.0, ready_replicas=2
    )
    step(service_input(2, 2), Observation({"l4": observed}), T0)
    [ctx] = seen
    [tier] = ctx.tiers
    assert tier.signals.prompt_tokens_rps == 3072.0
    assert tier.signals.request_rate_rps == 2.0


def test_prompt_tokens_rate_unobserved_reaches_decide_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _contexts(monkeypatch)
    observed = TierReadings(waiting=0.0, running=4.0, request_rate_rps=2.0, ready_replicas=2)
    step(service_input(2, 2), Observation({"l4": observed}), T0)
    step(service_input(2, 2), Observation({}), T0 + 60)
    assert [ctx.tiers[0].signals.prompt_tokens_rps for ctx in seen] == [None, None]


def test_is_due() -> None:
    state = {"autoscalerState": {"version": 1, "tiers": {}, "lastDecisionS": T0}}
    assert is_due({}, 15, T0)
    assert not is_due(state, 15, T0 + 10)
    assert is_due(state, 15, T0 + 14)  # within the tick jitter allowance
    assert is_due(state, 15, T0 - 100)  # a clock that went backwards never blocks decisions


def test_deletion_costs_follow_in_flight_requests_and_skip_unchanged() -> None:
    def pod(name: str, cost: str | None = None, deleting: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"name": name}
        if cost is not None:
            meta["annotations"] = {labels.ANNOTATION_POD_DELETION_COST: cost}
        if deleting:
            meta["deletionTimestamp"] = "2027-01-01T00:00:00Z"
        return {"metadata": meta}

    pods = [pod("a"), pod("b", "3"), pod("c"), pod("d", deleting=True)]
    assert deletion_costs(pods, {"a": 7.4, "b": 3.0, "d": 1}) == {"a": "7", "c": "0"}


def test_pure_modules_import_no_io_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import inferfleet.autoscaling.step.step, inferfleet.autoscaling.promql.queries\n"
        "import inferfleet.autoscaling.promql.parse\n"
        "import inferfleet.autoscaling.promql.signals, inferfleet.autoscaling.promql.history\n"
        "bad = [m for m in ('kopf', 'kubernetes', 'prometheus_api_client', 'requests') if m in sys.modules]\n"
        "print(', '.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"pure modules pulled in: {result.stdout}"


# --- when a decision is worth a status write --------------------------------------------


def _written(time_s: float, *, replicas: int = 2, targets: list[list[float]] | None = None) -> dict[str, Any]:
    return {
        "lastScalingDecision": {
            "time": kube_time(time_s),
            "replicas": {"l4": replicas},
            "signal": "reactive",
            "reason": "queue 0.0 waiting",
            "applied": True,
        },
        "autoscalerState": {
            "version": 1,
            "lastDecisionS": time_s,
            "tiers": {"l4": {"recentTargets": targets or [[time_s, 2]], "lastWaiting": 0.0}},
        },
        "conditions": [
            {
                "type": "Scaling",
                "status": "False",
                "reason": "Stable",
                "message": "every tier has its replicas ready",
            }
        ],
    }


def _result(time_s: float, **kwargs: Any) -> StepResult:
    status = _written(time_s, **kwargs)
    status["lastScalingDecision"]["reason"] = "queue 0.4 waiting"  # measurements move
    status["autoscalerState"]["tiers"]["l4"]["lastWaiting"] = 0.4
    conditions = (ConditionUpdate("Scaling", "False", "Stable", "every tier has its replicas ready"),)
    return StepResult(
        due=True, status={k: v for k, v in status.items() if k != "conditions"}, conditions=conditions
    )


def test_only_changes_and_the_heartbeat_are_written() -> None:
    written = _written(T0)
    assert not should_write(written, _result(T0 + 15), T0 + 15)
    assert not should_write(written, _result(T0 + 299), T0 + 299)
    assert should_write(written, _result(T0 + 300), T0 + 300)  # heartbeat
    assert should_write(written, _result(T0 + 15, replicas=3), T0 + 15)  # the decision changed
    # A lower target entering the scale-down window is state a successor must see.
    assert should_write(written, _result(T0 + 15, targets=[[T0, 2], [T0 + 15, 1]]), T0 + 15)
    stale_clock = _result(T0 - 60)
    assert should_write(written, stale_clock, T0 - 60)  # the clock went back: write
    changed = _result(T0 + 15)
    changed = StepResult(
        due=True,
        status=changed.status,
        conditions=(ConditionUpdate("Scaling", "True", "WaitingForReplicas", "l4: 1/2"),),
    )
    assert should_write(written, changed, T0 + 15)
    assert not should_write(written, StepResult(due=False), T0 + 600)


def test_material_state_ignores_what_moves_every_decision() -> None:
    one = _written(T0)["autoscalerState"]
    two = {
        **one,
        "lastDecisionS": T0 + 15,
        "tiers": {"l4": {"recentTargets": [[T0 + 15, 2]], "lastWaiting": 3.0}},
    }
    assert material_state(one) == material_state(two)
    assert material_state(None) is None


def _run_steps(
    observed: TierReadings,
    ticks: int,
    *,
    scaling: dict[str, object] | None = None,
    replan: Replanner | None = None,
) -> list[StepResult]:
    """Steps with the status carried from one to the next, as the runner writes it."""
    chat = CHAT if scaling is None else CHAT.with_spec(scaling=scaling)
    status: dict[str, Any] = {}
    results = []
    for tick in range(ticks):
        service = step_input(
            chat, [a_small_tier_plan("l4")], replicas=2, ready=2, status=status, generation=1, replan=replan
        )
        result = step(service, Observation({"l4": observed}), T0 + 15.0 * tick)
        results.append(result)
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        for update in result.conditions:
            conditions[update.type] = {
                "type": update.type,
                "status": update.status,
                "reason": update.reason,
                "message": update.message,
            }
        status = {**status, **result.status, "conditions": list(conditions.values())}
    return results


def rejecting_engines() -> TierReadings:
    """Engines that serve 2 req/s of prompts up to max-model-len 8,192 and answer 1 req/s 400."""
    return TierReadings(
        waiting=0.0, running=4.0, request_rate_rps=2.0, ready_replicas=2,
        prompt_tokens_rps=2.0 * 3000.0, generation_tokens_rps=2.0 * 250.0, rejected_rps=1.0,
        prompt_tokens=TokenQuantiles(2500.0, 7000.0, 8000.0),
        generation_tokens=TokenQuantiles(200.0, 600.0, 900.0),
    )  # fmt: skip


def test_prompts_rejected_beyond_max_model_len_raise_workload_drift_with_the_implied_plan() -> None:
    results = _run_steps(rejecting_engines(), 12)
    drifts = [[c for c in r.conditions if c.type == labels.CONDITION_WORKLOAD_DRIFT] for r in results]
    # No verdict on the first ticks (too few requests), then True with the reason.
    assert drifts[0] == []
    first = next(i for i, found in enumerate(drifts) if found)
    [condition] = drifts[first]
    assert (condition.status, condition.reason) == ("True", "PromptsRejected")
    assert "33.3% of requests are answered 4xx" in condition.message
    assert "declared 500/1,500/3,000" in condition.message
    assert "The observed workload implies: l4:" in condition.message and "max-model-len" in condition.message
    assert "inferfleet plan --observed-workload" in condition.message
    # One Warning event when it turns True, none after; the message stays put.
    warnings = [[e for e in r.events if e.reason == step_module.EVENT_WORKLOAD_DRIFT] for r in results]
    assert [len(w) for w in warnings[first:]] == [1] + [0] * (len(results) - first - 1)
    later = [c for c in results[-1].conditions if c.type == labels.CONDITION_WORKLOAD_DRIFT]
    assert later[0].message == condition.message
    observed = results[-1].status["observedWorkload"]
    assert observed["drift"] is True and observed["inputTokens"] == {"p50": 2500, "p95": 7000, "p99": 8000}
    # A third of the requests are refused: p95 and p99 lie beyond 8,192, p50 does not.
    assert observed["impliedInputTokens"] == {"p50": 2500, "p95": 16384, "p99": 16384}


def test_the_implied_plan_comes_from_the_operators_planner() -> None:
    # The runner hands the step the reconciler's planner (each tier's image, a fetched
    # model config); the condition quotes what it plans for the observed workload.
    asked: list[InferenceServiceSpec] = []

    def replan(spec: InferenceServiceSpec) -> list[TierPlan]:
        asked.append(spec)
        return [a_small_tier_plan("l4").with_(maxModelLen=20480, tensorParallelSize=2).build()]

    results = _run_steps(rejecting_engines(), 12, replan=replan)
    [condition] = [c for c in results[-1].conditions if c.type == labels.CONDITION_WORKLOAD_DRIFT]
    assert asked and asked[0].workload.input_tokens.p95 == 16384
    assert "max-model-len 20,480 (now 8,192)" in condition.message


def test_auto_replan_is_named_in_the_condition() -> None:
    results = _run_steps(rejecting_engines(), 12, scaling={"replan": "auto"})
    [condition] = [c for c in results[-1].conditions if c.type == labels.CONDITION_WORKLOAD_DRIFT]
    assert "the operator re-plans for it (spec.scaling.replan: auto)" in condition.message


def test_the_observed_mix_reaches_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _contexts(monkeypatch)
    step(service_input(2, 2), Observation({"l4": rejecting_engines()}), T0)
    [ctx] = seen
    [tier] = ctx.tiers
    assert tier.signals.rejected_rps == 1.0 and tier.signals.generation_tokens_rps == 500.0
    assert tier.signals.prompt_tokens == TokenQuantiles(2500.0, 7000.0, 8000.0)
    # The declared means are the prior: (2 x p50 + p95) / 3 of the spec's percentiles.
    assert tier.figures.mean_input_tokens == pytest.approx((2 * 500 + 1500) / 3)
    assert tier.figures.mean_output_tokens == pytest.approx((2 * 200 + 500) / 3)
    assert tier.figures.max_model_len == 8192


def test_observed_workload_is_valid_status() -> None:
    """What the step writes must pass the CRD's status schema (the pydantic model)."""
    results = _run_steps(rejecting_engines(), 12)
    written = {k: v for k, v in results[-1].status["observedWorkload"].items() if v is not None}
    model = ObservedWorkload.model_validate(written)
    assert model.drift is True and model.implied_input_tokens is not None
    assert model.to_wire() == written
