"""The pure step: no cluster, no Prometheus."""

from __future__ import annotations

from inferfleet.api import TierPlan, labels, parse
from inferfleet.autoscaler import testkit as tk
from inferfleet.autoscaler.step import Observation, ServiceInput, Workload, deletion_costs, is_due, step
from inferfleet.config import OperatorSettings
from inferfleet.metrics.signals import TierSignals

T0 = 1_800_000_000.0


def service_input(replicas: int, ready: int, status: dict[str, object] | None = None) -> ServiceInput:
    body = tk.service_body(
        "chat", "ns", tiers=[{"name": "l4", "gpu": "L4", "minReplicas": 2, "maxReplicas": 6}]
    )
    return ServiceInput(
        namespace="ns",
        name="chat",
        spec=parse(body).spec,
        plan=[TierPlan.model_validate(tk.tier_plan("l4"))],
        status=status or {},
        workloads={"l4": Workload(tk.workload_ref("ns", "chat", "l4"), replicas, ready)},
    )


def test_unavailable_metrics_still_restore_the_warm_minimum() -> None:
    result = step(service_input(0, 0), Observation({}, unavailable="down"), OperatorSettings(), T0)
    assert [(s.tier, s.to_replicas) for s in result.scales] == [("l4", 2)]
    degraded = [c for c in result.conditions if c.type == labels.CONDITION_DEGRADED]
    assert degraded and degraded[0].reason == labels.REASON_METRICS_UNAVAILABLE


def test_idle_tier_without_ready_replicas_is_not_a_metrics_fault() -> None:
    result = step(service_input(2, 0), Observation({}), OperatorSettings(), T0)
    assert not [c for c in result.conditions if c.type == labels.CONDITION_DEGRADED]
    scaling = [c for c in result.conditions if c.type == labels.CONDITION_SCALING]
    assert scaling[0].status == "True"  # 0/2 ready: cold start in progress


def test_decision_carries_the_signals() -> None:
    observed = TierSignals(waiting=3.0, running=4.0, ttft_p99_s=0.8, request_rate_rps=1.0, ready_replicas=2)
    result = step(service_input(2, 2), Observation({"l4": observed}), OperatorSettings(), T0)
    decision = result.status["lastScalingDecision"]
    assert decision["queueDepth"] == 3.0
    assert decision["ttftP99Ms"] == 800.0
    assert decision["time"] == "2027-01-15T08:00:00Z"
    assert result.status["ttftP99Ms"] == 800.0


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
        "import inferfleet.autoscaler.step, inferfleet.metrics.queries, inferfleet.metrics.parse\n"
        "import inferfleet.metrics.signals, inferfleet.metrics.history\n"
        "bad = [m for m in ('kopf', 'kubernetes', 'prometheus_api_client', 'requests') if m in sys.modules]\n"
        "print(', '.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"pure modules pulled in: {result.stdout}"
