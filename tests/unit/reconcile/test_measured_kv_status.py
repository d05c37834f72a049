"""The engines' allocated KV cache joins status.plan without touching the workloads."""

from __future__ import annotations

from collections.abc import Mapping

from inferfleet.autoscaling.promql.parse import KvCapacityReading
from inferfleet.controller.reconciler import Reconciler
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, FakeClock, example


class FakeKvSource:
    def __init__(self) -> None:
        self.readings: dict[tuple[str, str], dict[str, KvCapacityReading]] = {}
        self.asked: list[tuple[str, str]] = []

    def tiers_of(self, namespace: str, service: str) -> Mapping[str, KvCapacityReading]:
        self.asked.append((namespace, service))
        return self.readings.get((namespace, service), {})


class MeasuringControl(Control):
    def __init__(self) -> None:
        self.kv = FakeKvSource()
        super().__init__()

    def new_reconciler(self) -> Reconciler:
        return Reconciler(self.cluster, self.settings, FakeClock(), kv_capacity=self.kv)


def test_measured_kv_replaces_the_estimate_in_status_only() -> None:
    control = MeasuringControl()
    control.submit(example())
    control.reconcile()
    estimated = {tier["name"]: tier for tier in control.status()["plan"]}
    assert "measuredKv" not in estimated["l4"]
    applied = len(control.applied_workloads())

    blocks = estimated["l4"]["numGpuBlocks"] // 2
    control.kv.readings[(NAMESPACE, NAME)] = {"l4": KvCapacityReading(blocks, 16, 2)}
    control.reconcile()
    measured = {tier["name"]: tier for tier in control.status()["plan"]}
    l4 = measured["l4"]
    assert l4["measuredKv"] == {
        "numGpuBlocks": blocks,
        "blockSize": 16,
        "kvCacheTokens": blocks * 16,
        "pods": 2,
        "estimatedKvCacheTokens": estimated["l4"]["kvCacheTokens"],
        "estimatedReplicasForPeak": estimated["l4"]["replicasForPeak"],
    }
    assert l4["kvCacheTokens"] == blocks * 16 and l4["replicasForPeak"] >= estimated["l4"]["replicasForPeak"]
    assert "measuredKv" not in measured["a100-burst"]
    # the pods' flags come from the estimate: a measurement never rolls the workloads
    assert len(control.applied_workloads()) == applied
    assert (NAMESPACE, NAME) in control.kv.asked


def test_plan_changed_is_said_once_per_change_not_per_measurement() -> None:
    """An edit used to raise PlanChanged two or three times with identical text: once for
    the edit, again as the new pods' KV capacity and cold starts were folded into the plan."""
    control = MeasuringControl()
    control.submit(example())
    control.reconcile()
    estimated = {tier["name"]: tier for tier in control.status()["plan"]}

    def plan_events() -> list[str]:
        return [e["message"] for e in control.cluster.events if e["reason"] == "PlanChanged"]

    assert [m.split(":")[0] for m in plan_events()] == ["planned"]
    # The engines report their KV cache, then report it again with more pods: no news.
    blocks = estimated["l4"]["numGpuBlocks"] // 2
    control.kv.readings[(NAMESPACE, NAME)] = {"l4": KvCapacityReading(blocks, 16, 1)}
    control.reconcile()
    control.kv.readings[(NAMESPACE, NAME)] = {"l4": KvCapacityReading(blocks, 16, 2)}
    control.reconcile()
    assert len(plan_events()) == 1, plan_events()
    # An edit that changes what the pods run: one event, saying what changed.
    control.edit(lambda body: body["spec"]["tiers"][0].setdefault("overrides", {}).update(maxModelLen=2048))
    for _ in range(3):
        control.reconcile()
    control.kv.readings[(NAMESPACE, NAME)] = {"l4": KvCapacityReading(blocks * 2, 16, 2)}
    control.reconcile()
    changed = plan_events()[1:]
    assert len(changed) == 1, changed
    assert changed[0].startswith(f"plan changed: l4: max-model-len {estimated['l4']['maxModelLen']} -> 2048")
