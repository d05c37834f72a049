"""One tenant's bad metric, spec or API error never stops or delays another's scaling.

Tick by tick against the in-memory cluster. The attacker is named to come first in
every listing, so a failure that ended the tick would starve the victim behind it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop import runner as runner_module
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.policy.readings import TierReadings
from inferfleet.autoscaling.promql.parse import TierKey
from inferfleet.autoscaling.promql.queries import Signal
from inferfleet.autoscaling.promql.signals import assemble
from inferfleet.autoscaling.step.step import REASON_AUTOSCALING_FAILED, deletion_costs
from inferfleet.cluster import InMemoryCluster, PermanentApiError
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import ObjectRef
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk
from tests.toolkit.prometheus import a_vector
from tests.unit.autoscaler.conftest import ScriptedReader

NS = "team"
T0 = 1_800_000_000.0
ATTACKER, VICTIM = "aaa-attacker", "victim"
IDLE = {"waiting": 0.0, "running": 1.0, "request_rate_rps": 0.5, "ready_replicas": 1}
BAD_VALUES = [math.inf, -math.inf, math.nan, -5.0]


def two_services(cluster: InMemoryCluster, reader: ScriptedReader) -> None:
    for name in (ATTACKER, VICTIM):
        tk.install(cluster, a_scaled_service(name, NS))
        reader.set(NS, name, "l4", **IDLE)
    reader.set(NS, VICTIM, "l4", waiting=60.0, running=8.0, request_rate_rps=3.0, ready_replicas=1)


def run_ticks(autoscaler: Autoscaler, ticks: int) -> list[int]:
    """The victim's replicas after each tick."""
    seen = []
    for tick in range(ticks):
        report = autoscaler.run_once(T0 + tick * 15)
        assert {r.name for r in report.services if r.due} >= {VICTIM}
        seen.append(tk.replicas(autoscaler.cluster, NS, VICTIM, "l4"))  # type: ignore[arg-type]
    return seen


def alone(settings: OperatorSettings) -> list[int]:
    """The victim's replicas, tick by tick, with no attacker at all."""
    cluster, reader = InMemoryCluster(), ScriptedReader()
    tk.install(cluster, a_scaled_service(VICTIM, NS))
    reader.set(NS, VICTIM, "l4", waiting=60.0, running=8.0, request_rate_rps=3.0, ready_replicas=1)
    try:
        return run_ticks(Autoscaler(cluster, reader, settings), 4)
    finally:
        reader.close()


@pytest.mark.parametrize("value", BAD_VALUES, ids=str)
@pytest.mark.parametrize(
    "field", ["waiting", "running", "request_rate_rps", "ttft_p99_s", "prompt_tokens_rps"]
)
def test_a_bad_metric_value_never_delays_another_service(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings, field: str, value: float
) -> None:
    two_services(cluster, reader)
    reader.set(NS, ATTACKER, "l4", **{**IDLE, field: value})
    autoscaler = Autoscaler(cluster, reader, settings)
    assert run_ticks(autoscaler, 4) == alone(settings)
    # The attacker is decided too, its bad value read as missing: held within its bounds.
    assert 1 <= tk.replicas(cluster, NS, ATTACKER, "l4") <= 10
    assert "lastScalingDecision" in tk.status(cluster, NS, ATTACKER)


@pytest.mark.parametrize("value", BAD_VALUES, ids=str)
def test_non_finite_and_negative_values_are_missing_never_demand(value: float) -> None:
    key = TierKey(NS, VICTIM, "l4")
    vectors = {signal: a_vector({key: value}) for signal in Signal}
    signals = assemble(T0, vectors).tiers[key]
    assert signals == TierReadings()  # every field None: no data, not zero, not infinite demand
    assert not signals.has_load_data


def test_a_failing_decision_degrades_only_that_service(
    cluster: InMemoryCluster,
    reader: ScriptedReader,
    settings: OperatorSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    two_services(cluster, reader)
    real_step = runner_module.step

    def step(service: Any, *args: Any, **kwargs: Any) -> Any:
        if service.name == ATTACKER:
            raise OverflowError("cannot convert float infinity to integer")
        return real_step(service, *args, **kwargs)

    monkeypatch.setattr(runner_module, "step", step)
    autoscaler = Autoscaler(cluster, reader, settings)
    assert run_ticks(autoscaler, 4) == alone(settings)
    inactive = tk.condition(cluster, NS, ATTACKER, labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None
    assert (inactive["status"], inactive["reason"]) == ("False", REASON_AUTOSCALING_FAILED)
    assert "OverflowError" in inactive["message"]
    victim = tk.condition(cluster, NS, VICTIM, labels.CONDITION_SCALING_ACTIVE)
    assert victim is not None and victim["status"] == "True"

    monkeypatch.setattr(runner_module, "step", real_step)  # fixed: the condition clears
    autoscaler.run_once(T0 + 100)
    inactive = tk.condition(cluster, NS, ATTACKER, labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None and inactive["status"] == "True"


def test_an_api_error_on_one_service_never_stops_the_next(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    two_services(cluster, reader)
    reader.set(NS, ATTACKER, "l4", waiting=60.0, running=8.0, request_rate_rps=3.0, ready_replicas=1)
    cluster.inject("scale", PermanentApiError("admission webhook denied", 403), kind="Deployment")
    report = Autoscaler(cluster, reader, settings).run_once(T0)
    errors = {r.name: r.error for r in report.services}
    assert errors[ATTACKER] is not None and errors[VICTIM] is None
    assert tk.replicas(cluster, NS, VICTIM, "l4") > 1


def test_a_stored_spec_with_a_bad_schedule_is_skipped_and_the_rest_decided(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    """Admitted before validation existed (or with the webhook off): skipped, not fatal."""
    bad = {
        "prewarm": [
            {"schedule": "99 99 99 99 99", "durationMinutes": 5, "replicas": 2, "timeZone": "Mars/Olympus"}
        ]
    }
    tk.install(cluster, a_scaled_service(ATTACKER, NS).with_spec(scaling=bad))
    tk.install(cluster, a_scaled_service(VICTIM, NS))
    reader.set(NS, VICTIM, "l4", waiting=60.0, running=8.0, request_rate_rps=3.0, ready_replicas=1)
    report = Autoscaler(cluster, reader, settings).run_once(T0)
    skipped = {r.name: r.skipped for r in report.services}
    assert skipped[ATTACKER] is not None and "schedule" in skipped[ATTACKER]
    assert tk.replicas(cluster, NS, VICTIM, "l4") > 1


@pytest.mark.parametrize(("running", "lowered"), [(12, 4), (20, 6)])
@pytest.mark.parametrize("metrics", ["available", "down"])
def test_a_lowered_max_replicas_applies_on_the_next_tick(
    cluster: InMemoryCluster,
    reader: ScriptedReader,
    settings: OperatorSettings,
    *,
    running: int,
    lowered: int,
    metrics: str,
) -> None:
    victim = a_scaled_service(VICTIM, NS).only_tier("l4", "L4", min_replicas=1, max_replicas=running)
    tk.install(cluster, victim, replicas={"l4": running})
    reader.set(NS, VICTIM, "l4", waiting=30.0, running=64.0, request_rate_rps=20.0, ready_replicas=running)
    autoscaler = Autoscaler(cluster, reader, settings)
    autoscaler.run_once(T0)
    assert tk.replicas(cluster, NS, VICTIM, "l4") == running
    ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, VICTIM)
    cluster.update(ref, lambda obj: obj["spec"]["tiers"][0].__setitem__("maxReplicas", lowered), "kubectl")
    reader.down = metrics == "down"
    autoscaler.run_once(T0 + 15)
    assert tk.replicas(cluster, NS, VICTIM, "l4") == lowered
    for tick in range(2, 10):
        autoscaler.run_once(T0 + tick * 15)
        assert 1 <= tk.replicas(cluster, NS, VICTIM, "l4") <= lowered


def test_a_raised_min_replicas_applies_on_the_next_tick_without_metrics(
    cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings
) -> None:
    tk.install(cluster, a_scaled_service(VICTIM, NS), replicas={"l4": 1})
    reader.down = True
    autoscaler = Autoscaler(cluster, reader, settings)
    autoscaler.run_once(T0)
    ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, VICTIM)
    cluster.update(ref, lambda obj: obj["spec"]["tiers"][0].__setitem__("minReplicas", 3), "kubectl")
    autoscaler.run_once(T0 + 15)
    assert tk.replicas(cluster, NS, VICTIM, "l4") == 3


@pytest.mark.parametrize("value", BAD_VALUES, ids=str)
def test_pod_deletion_cost_ignores_bad_readings(value: float) -> None:
    pods = [{"metadata": {"name": "p0"}}, {"metadata": {"name": "p1"}}]
    assert deletion_costs(pods, {"p0": value, "p1": 3.0}) == {"p0": "0", "p1": "3"}
