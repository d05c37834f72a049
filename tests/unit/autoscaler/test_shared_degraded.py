"""Degraded is shared by the reconciler and the autoscaler: neither undoes the other.

Both orders run the real reconcile pass and the real autoscaler on one in-memory
cluster while Prometheus is down. Before the fix, every reconcile pass reset Degraded to
False and the next autoscaler decision raised it again, an event each time.
"""

from __future__ import annotations

from typing import Any

from inferfleet.api import labels
from inferfleet.autoscaler.runner import Autoscaler
from inferfleet.config import OperatorSettings
from tests.unit.autoscaler.conftest import ScriptedReader
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

T0 = 1_800_000_000.0


def degraded_events(control: Control) -> list[tuple[str, str]]:
    return [
        (e["type"], e["reason"])
        for e in control.cluster.events
        if e["reason"] in {labels.REASON_METRICS_UNAVAILABLE, "MetricsAvailable", "AsPlanned"}
    ]


def setup() -> tuple[Control, Autoscaler, ScriptedReader]:
    control = Control()
    control.submit(example())
    control.reconcile()
    control.mark_ready()
    reader = ScriptedReader()
    reader.down = True
    autoscaler = Autoscaler(control.cluster, reader, OperatorSettings(predictive_enabled=False))
    return control, autoscaler, reader


def assert_autoscalers_degraded(control: Control) -> dict[str, Any]:
    degraded = control.condition(labels.CONDITION_DEGRADED)
    assert (degraded["status"], degraded["reason"]) == ("True", labels.REASON_METRICS_UNAVAILABLE)
    assert degraded["message"].startswith(labels.AUTOSCALER_MESSAGE_PREFIX)
    return degraded


def test_autoscaler_then_reconciler_keeps_degraded() -> None:
    control, autoscaler, reader = setup()
    autoscaler.run_once(T0)
    first = assert_autoscalers_degraded(control)
    for _ in range(3):
        control.reconcile()
        assert assert_autoscalers_degraded(control) == first
    assert degraded_events(control) == [("Warning", labels.REASON_METRICS_UNAVAILABLE)]
    reader.close()


def test_reconciler_then_autoscaler_alternating_does_not_flap() -> None:
    control, autoscaler, reader = setup()
    assert control.condition(labels.CONDITION_DEGRADED)["status"] == "False"
    for tick in range(4):
        autoscaler.run_once(T0 + tick * 60)
        control.reconcile()
        assert_autoscalers_degraded(control)
    assert degraded_events(control) == [("Warning", labels.REASON_METRICS_UNAVAILABLE)]

    # Metrics back: the autoscaler clears its own condition and the reconciler agrees.
    reader.down = False
    for tier in ("l4", "a100-burst"):
        reader.set(NAMESPACE, NAME, tier, waiting=0.0, running=1.0, request_rate_rps=0.5, ready_replicas=1)
    autoscaler.run_once(T0 + 600)
    control.reconcile()
    assert control.condition(labels.CONDITION_DEGRADED)["status"] == "False"
    reader.close()
