"""The autoscaler's one loop: leader-gated ticks, fewer status writes, kopf wiring."""

from __future__ import annotations

import logging

import kopf
import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop import kopf_handlers as handlers
from inferfleet.autoscaling.loop.loop import AutoscalerLoop
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.cluster import InMemoryCluster, TransientApiError
from inferfleet.config import OperatorSettings
from inferfleet.controller.leader import LeaderElector, LeaseConfig
from inferfleet.kubedata import ObjectRef
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk
from tests.unit.autoscaler.conftest import ScriptedReader

NS = "team"
LOGGER = logging.getLogger("tests")
T0 = 1_800_000_000.0


def steady(cluster: InMemoryCluster, reader: ScriptedReader, count: int = 1) -> None:
    for index in range(count):
        name = f"svc-{index}"
        tk.install(cluster, a_scaled_service(name, NS), replicas={"l4": 2})
        # Idle slots at a steady 2 req/s: the decision never changes.
        reader.set(NS, name, "l4", waiting=0.0, running=0.0, request_rate_rps=2.0, ready_replicas=2)


def test_one_read_per_tick_for_all_objects(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader, count=5)
    report = AutoscalerLoop(autoscaler, tick_s=5).tick(T0)
    assert report is not None and report.decided == 5
    assert reader.reads == 1


def test_standby_reads_nothing_and_the_leader_acts(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader)
    leading = {"now": False}
    loop = AutoscalerLoop(autoscaler, tick_s=5, is_leader=lambda: leading["now"])
    assert loop.tick(T0) is None
    assert reader.reads == 0 and "lastScalingDecision" not in tk.status(cluster, NS, "svc-0")
    leading["now"] = True
    report = loop.tick(T0 + 15)
    assert report is not None and report.decided == 1 and reader.reads == 1


def test_an_unreachable_api_server_skips_the_tick(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader)
    cluster.inject("list", TransientApiError("503", 503), kind=labels.KIND)
    loop = AutoscalerLoop(autoscaler, tick_s=5)
    assert loop.tick(T0) is None
    assert loop.tick(T0 + 15) is not None


def test_loop_lists_only_the_watched_namespaces(cluster: InMemoryCluster, reader: ScriptedReader) -> None:
    steady(cluster, reader)
    tk.install(cluster, a_scaled_service("elsewhere", "other"))
    autoscaler = Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False), namespaces=(NS,))
    report = autoscaler.run_once(T0)
    assert [(r.namespace, r.name) for r in report.services] == [(NS, "svc-0")]
    # Listed namespace by namespace: a namespaced Role forbids cluster-wide lists.
    assert all(ref.namespace == NS for op, ref in cluster.calls if op == "list")


# --- status writes ---------------------------------------------------------------------


def decision_time(cluster: InMemoryCluster) -> str:
    return str(tk.status(cluster, NS, "svc-0")["lastScalingDecision"]["time"])


def test_an_unchanged_decision_is_written_only_with_the_heartbeat(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader)
    first = autoscaler.run_once(T0)
    assert first.decided == 1 and first.status_writes == 1
    written = decision_time(cluster)
    writes = [autoscaler.run_once(T0 + 15 * tick).status_writes for tick in range(1, 20)]
    assert writes == [0] * 19  # 285 s of the same decision: no PATCH
    assert decision_time(cluster) == written
    assert autoscaler.run_once(T0 + 300).status_writes == 1  # the heartbeat
    assert decision_time(cluster) == "2027-01-15T08:05:00Z"


def test_a_changed_decision_or_condition_is_written_at_once(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader)
    autoscaler.run_once(T0)
    autoscaler.run_once(T0 + 15)
    reader.set(NS, "svc-0", "l4", waiting=40.0, running=16.0, request_rate_rps=8.0, ready_replicas=2)
    report = autoscaler.run_once(T0 + 30)
    assert report.scaled == 1 and report.status_writes == 1
    assert decision_time(cluster) == "2027-01-15T08:00:30Z"
    reader.down = True
    report = autoscaler.run_once(T0 + 45)
    assert report.status_writes == 1
    active = tk.condition(cluster, NS, "svc-0", labels.CONDITION_SCALING_ACTIVE)
    assert active is not None and active["status"] == "False"


def test_unwritten_state_carries_the_scale_down_window(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    """Decisions kept in memory count towards stabilization exactly as written ones did."""
    tk.install(cluster, a_scaled_service("svc-0", NS), replicas={"l4": 4})
    reader.set(NS, "svc-0", "l4", waiting=0.0, running=0.0, request_rate_rps=0.0, ready_replicas=4)
    replicas = []
    for tick in range(6):
        autoscaler.run_once(T0 + 15 * tick)
        replicas.append(tk.replicas(cluster, NS, "svc-0", "l4"))
    # The conftest's 60 s window: held until T0 + 60, then (nothing runs on the four:
    # the surplus is idle) down to the warm minimum in one step.
    assert replicas == [4, 4, 4, 4, 1, 1]


def test_a_state_written_by_someone_else_replaces_the_one_in_memory(
    cluster: InMemoryCluster, reader: ScriptedReader, autoscaler: Autoscaler
) -> None:
    steady(cluster, reader)
    autoscaler.run_once(T0)
    autoscaler.run_once(T0 + 15)  # kept in memory, not written
    ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, "svc-0")
    # Another replica led for a while and wrote its own state, decided at T0 + 20.
    state = tk.status(cluster, NS, "svc-0")["autoscalerState"]
    cluster.patch_status(ref, {"autoscalerState": {**state, "lastDecisionS": T0 + 20}})
    # From the stored state the next decision is due at T0 + 35 (the 15 s period).
    assert autoscaler.run_once(T0 + 30).decided == 0
    assert autoscaler.run_once(T0 + 35).decided == 1


# --- kopf wiring ---------------------------------------------------------------------------


def test_startup_starts_one_gated_loop_and_cleanup_stops_it_and_releases(
    cluster: InMemoryCluster, reader: ScriptedReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handlers, "_metrics_served", True)
    settings = OperatorSettings(predictive_enabled=False)
    memo = kopf.Memo(
        settings=settings,
        cluster=cluster,
        autoscaler=Autoscaler(cluster, reader, settings),
        leader_election=LeaseConfig("ops", "inferfleet", "replica-a"),
    )
    handlers.start_autoscaler(memo=memo, logger=LOGGER)
    loop = memo["autoscaler_loop"]
    elector: LeaderElector = memo["leader"]
    try:
        assert loop.is_leader == elector.is_leader
        handlers.start_autoscaler(memo=memo, logger=LOGGER)
        assert memo["autoscaler_loop"] is loop
    finally:
        handlers.stop_autoscaler(memo=memo)
    assert not loop.running and not elector.is_leader()
    stored = cluster.get(elector.ref)
    assert stored is not None and stored["spec"]["holderIdentity"] == ""
