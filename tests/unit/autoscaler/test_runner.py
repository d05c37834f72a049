"""The autoscaler loop against the in-memory cluster and scripted signals."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.promql.parse import TierKey
from inferfleet.autoscaling.promql.queries import Signal
from inferfleet.autoscaling.step.step import EVENT_SCALED_DOWN, EVENT_SCALED_UP, EVENT_SCALING_ADVISED
from inferfleet.cluster import Conflict, InMemoryCluster, PermanentApiError
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import LEADER_WORKER_SET, ObjectRef
from inferfleet.metrics.operator_metrics import OperatorMetrics
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit import reconciled as tk
from tests.unit.autoscaler.conftest import ScriptedReader

NS = "team"
T0 = 1_800_000_000.0


def two_tier(cluster: InMemoryCluster, name: str = "chat", *, scaling: dict[str, Any] | None = None) -> None:
    service = a_scaled_service(name, NS).tiers(
        {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 8},
        {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 4},
    )
    tk.install(cluster, service if scaling is None else service.with_spec(scaling=scaling))


def idle(reader: ScriptedReader, name: str = "chat") -> None:
    for tier in ("l4", "h100"):
        reader.set(NS, name, tier, waiting=0.0, running=1.0, request_rate_rps=0.5, ready_replicas=1)


def queue_on_l4(reader: ScriptedReader) -> None:
    """A queue of 40 on one Ready l4 replica: more than it may hold, so l4 must grow."""
    reader.set(NS, "chat", "l4", waiting=40.0, running=8.0, request_rate_rps=3.0, ready_replicas=1)


def test_queue_scales_up_writes_status_event_and_scaling_condition(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    two_tier(cluster)
    idle(reader)
    queue_on_l4(reader)
    report = autoscaler.run_once(T0)
    assert report.errors == []
    assert report.scaled >= 1
    assert tk.replicas(cluster, NS, "chat", "l4") > 1
    status = tk.status(cluster, NS, "chat")
    decision = status["lastScalingDecision"]
    assert decision["replicas"]["l4"] == tk.replicas(cluster, NS, "chat", "l4")
    assert decision["signal"] == "reactive"
    assert decision["queueDepth"] == 40.0
    assert decision["applied"] is True
    assert status["autoscalerState"]["tiers"]["l4"]["lastScaleUpS"] == T0
    scaling = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING)
    assert scaling is not None and scaling["status"] == "True"
    assert "l4: 1/" in scaling["message"]
    assert [e["reason"] for e in cluster.events] == [EVENT_SCALED_UP]
    # The scale went through the scale subresource's manager, not the reconciler's.
    ref = tk.workload_ref(NS, "chat", "l4")
    assert cluster.owners_of(ref, ("spec", "replicas")) == {("inferfleet-operator-scale", "Update")}

    # Replicas come up: the Scaling condition clears.
    tk.set_ready(cluster, NS, "chat", "l4", tk.replicas(cluster, NS, "chat", "l4"))
    reader.set(NS, "chat", "l4", waiting=0.0, running=8.0, request_rate_rps=3.0, ready_replicas=3)
    autoscaler.run_once(T0 + 15)
    scaling = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING)
    assert scaling is not None and scaling["status"] == "False"


def test_advisory_mode_reports_without_scaling(cluster: InMemoryCluster, reader: ScriptedReader) -> None:
    two_tier(cluster, scaling={"mode": "advisory"})
    idle(reader)
    queue_on_l4(reader)
    registry = CollectorRegistry()
    autoscaler = Autoscaler(
        cluster, reader, OperatorSettings(predictive_enabled=False), metrics=OperatorMetrics(registry)
    )
    report = autoscaler.run_once(T0)
    assert report.scaled == 0
    assert tk.replicas(cluster, NS, "chat", "l4") == 1
    decision = tk.status(cluster, NS, "chat")["lastScalingDecision"]
    assert decision["applied"] is False and decision["replicas"]["l4"] > 1
    assert [e["reason"] for e in cluster.events] == [EVENT_SCALING_ADVISED]
    assert not any(call[0] == "scale" for call in cluster.calls)
    desired = registry.get_sample_value(
        "inferfleet_autoscaler_desired_replicas", {"namespace": NS, "service": "chat", "tier": "l4"}
    )
    assert desired == decision["replicas"]["l4"]
    up = registry.get_sample_value(
        "inferfleet_autoscaler_decisions_total", {"signal": "reactive", "direction": "up", "mode": "advisory"}
    )
    assert up == 1.0


def test_prometheus_down_holds_and_turns_scaling_inactive_then_active(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    two_tier(cluster)
    cluster.scale(tk.workload_ref(NS, "chat", "l4"), 5)
    tk.set_ready(cluster, NS, "chat", "l4", 5)
    reader.down = True
    for tick in range(10):  # far beyond the scale-down stabilization window
        autoscaler.run_once(T0 + tick * 15)
    assert tk.replicas(cluster, NS, "chat", "l4") == 5  # never scaled down on missing data
    assert tk.replicas(cluster, NS, "chat", "h100") == 1  # never below the warm minimum
    active = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert active is not None
    assert (active["status"], active["reason"]) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    assert tk.status(cluster, NS, "chat")["lastScalingDecision"]["signal"] == "hold"
    warnings = [e for e in cluster.events if e["type"] == "Warning"]
    assert len(warnings) == 1  # on the transition, not every tick

    reader.down = False
    idle(reader)
    autoscaler.run_once(T0 + 200)
    active = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert active is not None and active["status"] == "True"
    assert tk.condition(cluster, NS, "chat", labels.CONDITION_DEGRADED) is None  # the reconciler's


def test_reconciler_degraded_is_left_alone(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    two_tier(cluster)
    ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, "chat")
    theirs = {"type": "Degraded", "status": "True", "reason": "ApplyFailed", "message": "apply failed"}
    cluster.patch_status(ref, {"conditions": [theirs]})
    reader.down = True
    autoscaler.run_once(T0)
    assert tk.condition(cluster, NS, "chat", labels.CONDITION_DEGRADED) == theirs
    active = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert active is not None and active["status"] == "False"


def test_partial_data_holds_only_the_tier_without_data(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    two_tier(cluster)
    cluster.scale(tk.workload_ref(NS, "chat", "h100"), 3)
    tk.set_ready(cluster, NS, "chat", "h100", 3)
    queue_on_l4(reader)
    for tick in range(8):
        autoscaler.run_once(T0 + tick * 15)
    assert tk.replicas(cluster, NS, "chat", "l4") > 1
    assert tk.replicas(cluster, NS, "chat", "h100") == 3
    active = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert active is not None and active["status"] == "False" and "h100" in active["message"]


def test_scale_down_marks_idle_pods_cheapest(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 3})
    for index, in_flight in enumerate((5.0, 0.0, 2.0)):
        cluster.user_apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"chat-l4-{index}",
                    "namespace": NS,
                    "labels": {labels.LABEL_SERVICE: "chat", labels.LABEL_TIER: "l4"},
                },
            }
        )
        reader.pod_load.setdefault(TierKey(NS, "chat", "l4"), {})[f"chat-l4-{index}"] = in_flight
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=3)
    # Off by default (it needs `patch pods` in every watched namespace): on here.
    autoscaler = Autoscaler(cluster, reader, settings.model_copy(update={"pod_deletion_cost": True}))
    for tick in range(12):
        autoscaler.run_once(T0 + tick * 15)
    assert tk.replicas(cluster, NS, "chat", "l4") < 3
    costs = {
        pod["metadata"]["name"]: pod["metadata"]["annotations"][labels.ANNOTATION_POD_DELETION_COST]
        for pod in cluster.kinds("Pod")
    }
    assert costs == {"chat-l4-0": "5", "chat-l4-1": "0", "chat-l4-2": "2"}
    assert EVENT_SCALED_DOWN in [e["reason"] for e in cluster.events]


def test_restart_resumes_from_status(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 4})
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=4)
    first = Autoscaler(cluster, reader, settings)
    first.run_once(T0)
    first.run_once(T0 + 15)
    state = tk.status(cluster, NS, "chat")["autoscalerState"]
    assert state["tiers"]["l4"]["observedSinceS"] == T0
    # A new operator process: no memory but what status holds. The stabilization window
    # started at T0, so the first scale-down comes at T0 + 60, not 60 s after the restart.
    second = Autoscaler(cluster, reader, settings)
    second.run_once(T0 + 45)
    assert tk.replicas(cluster, NS, "chat", "l4") == 4
    second.run_once(T0 + 60)
    assert tk.replicas(cluster, NS, "chat", "l4") == 1  # nothing runs: the idle surplus at once


def test_not_due_before_its_sync_period(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    tk.install(cluster, a_scaled_service("chat", NS).with_spec(scaling={"syncPeriodSeconds": 60}))
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=1)
    assert autoscaler.run_once(T0).decided == 1
    assert autoscaler.run_once(T0 + 15).decided == 0
    assert autoscaler.run_once(T0 + 60).decided == 1


def test_skips_unplanned_invalid_and_workload_less_services(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    cluster.user_apply(a_scaled_service("unplanned", NS).body())
    tk.install(cluster, a_scaled_service("gone", NS))
    cluster.delete(tk.workload_ref(NS, "gone", "l4"))
    report = autoscaler.run_once(T0)
    skipped = {r.name: r.skipped for r in report.services}
    assert skipped["unplanned"] == "not planned yet"
    assert {r.name: r.due for r in report.services}["gone"] is False
    assert report.errors == []


def test_status_conflict_is_retried_with_fresh_conditions(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    tk.install(cluster, a_scaled_service("chat", NS))
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=1)
    cluster.inject("patch_status", Conflict("changed", 409))
    report = autoscaler.run_once(T0)
    assert report.errors == []
    assert "lastScalingDecision" in tk.status(cluster, NS, "chat")


def test_query_count_is_independent_of_object_count(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    counts = []
    for batch in range(3):
        for index in range(10 * (batch + 1)):
            name = f"svc-{batch}-{index}"
            tk.install(cluster, a_scaled_service(name, NS))
            reader.set(NS, name, "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=1)
        report = autoscaler.run_once(T0 + batch * 100)
        counts.append((report.queries, report.decided))
    assert [queries for queries, _ in counts] == [len(Signal)] * 3
    assert [decided for _, decided in counts] == [10, 30, 60]


@pytest.mark.parametrize("mode", ["active", "advisory"])
def test_decision_records_mode(cluster: InMemoryCluster, reader: ScriptedReader, mode: str) -> None:
    tk.install(cluster, a_scaled_service("chat", NS).with_spec(scaling={"mode": mode}))
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=1)
    Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False)).run_once(T0)
    assert tk.status(cluster, NS, "chat")["lastScalingDecision"]["applied"] is (mode == "active")


def test_pods_are_not_patched_unless_pod_deletion_cost_is_on(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    """The default install grants no `patch pods`: the autoscaler makes no such call."""
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 3})
    cluster.user_apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "chat-l4-0", "namespace": NS, "labels": {labels.LABEL_SERVICE: "chat"}},
        }
    )
    reader.set(NS, "chat", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=3)
    autoscaler = Autoscaler(cluster, reader, settings)
    for tick in range(12):
        autoscaler.run_once(T0 + tick * 15)
    assert tk.replicas(cluster, NS, "chat", "l4") < 3
    assert not [call for call in cluster.calls if call[0] == "annotate" and call[1].kind == "Pod"]


@pytest.mark.parametrize("history_failed", [None, "range query timed out"])
def test_a_new_service_without_history_scales_down_unless_the_history_read_failed(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings, history_failed: str | None
) -> None:
    # Predictive on. A service created a minute ago has no request-rate history yet: that
    # is no gap (nothing to forecast from), so a first fleet larger than its light load
    # shrinks once the stabilization window (60 s here) has been observed. When the
    # history query failed, the history is unknown and nothing is taken away.
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 4})
    reader.set(NS, "chat", "l4", waiting=0.0, running=1.0, request_rate_rps=0.2, ready_replicas=4)
    reader.history_failed = history_failed
    autoscaler = Autoscaler(cluster, reader, settings.model_copy(update={"predictive_enabled": True}))
    seen = []
    for tick in range(12):
        autoscaler.run_once(T0 + tick * 15)
        seen.append(tk.replicas(cluster, NS, "chat", "l4"))
    if history_failed is None:
        assert seen[:4] == [4] * 4  # the first 60 s: the window is not observed yet
        assert seen[-1] < 4, (seen, tk.status(cluster, NS, "chat")["lastScalingDecision"]["reason"])
    else:
        assert seen == [4] * 12


def test_a_refused_event_does_not_undo_the_tick(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    # The scale and the status are written; the Event that tells of them is refused (a
    # namespace being deleted): the tick reports no error and the decision is recorded.
    two_tier(cluster)
    idle(reader)
    queue_on_l4(reader)
    cluster.inject("create", PermanentApiError("namespace is being terminated", 403), kind="Event")
    report = autoscaler.run_once(T0)
    assert report.errors == []
    assert tk.replicas(cluster, NS, "chat", "l4") > 1
    assert tk.status(cluster, NS, "chat")["lastScalingDecision"]["applied"] is True
    assert cluster.events == []


@pytest.mark.parametrize("to_multi_node", [True, False])
def test_a_tier_changing_kind_scales_its_new_workload_and_leaves_the_old_one_serving(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler, to_multi_node: bool
) -> None:
    """Mid-switch (reconcile.kindswitch) a tier has its old workload, serving, and one of
    the kind the plan now renders: only the latter is the autoscaler's."""
    service = a_scaled_service("chat", NS).tiers(
        {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 8},
        {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 4},
    )
    l4 = a_small_tier_plan("l4").layout(1, 2, nodes=2) if to_multi_node else a_small_tier_plan("l4")
    owner = tk.install(cluster, service, plans=[l4, a_small_tier_plan("h100")], ready={"l4": 0})
    deployment = tk.workload_ref(NS, "chat", "l4")
    lws = ObjectRef(*LEADER_WORKER_SET, NS, deployment.name)
    cluster.user_apply({**tk.deployment(owner, "l4", 1), "apiVersion": lws.api_version, "kind": lws.kind})
    new, old = (lws, deployment) if to_multi_node else (deployment, lws)
    cluster.set_status(new, {"replicas": 1, "readyReplicas": 0})
    cluster.set_status(old, {"replicas": 1, "readyReplicas": 1})
    idle(reader)
    queue_on_l4(reader)
    autoscaler.run_once(T0)
    assert cluster.objects[new]["spec"]["replicas"] > 1
    assert cluster.objects[old]["spec"]["replicas"] == 1
