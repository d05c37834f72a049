"""The autoscaler loop reading a real Prometheus, scaling workloads in the in-memory cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.prometheus.testkit import PrometheusServer, VllmEmulator
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.autoscaling.step.step import EVENT_SCALED_UP
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from tests.integration.prometheus.conftest import SCRAPE_INTERVAL_S, eventually
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit import reconciled as tk

pytestmark = pytest.mark.integration

NS, SERVICE = "ramp", "chat"
# Short windows for a fast test; the history step stays at the policy's one minute.
LIVE_QUERIES = QueryConfig(rate_window_s=4, max_sample_age_s=5)
SETTINGS = OperatorSettings(sync_period_s=5, queue_depth_per_replica=4.0)


def make_autoscaler(cluster: InMemoryCluster, url: str) -> Autoscaler:
    reader = SignalReader(
        PrometheusClient(PrometheusConfig(url, timeout_s=2)), LIVE_QUERIES, history_retention_s=3600
    )
    return Autoscaler(cluster, reader, SETTINGS)


@pytest.fixture
def cluster() -> InMemoryCluster:
    cluster = InMemoryCluster()
    service = a_scaled_service(SERVICE, NS).tiers(
        {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 8},
        {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 4},
    )
    l4 = a_small_tier_plan("l4").capacity(usable_rps=2.0)
    tk.install(cluster, service, plans=[l4, a_small_tier_plan("h100").capacity(usable_rps=6.0)])
    return cluster


@pytest.fixture
def ramp_pods(emulator: VllmEmulator) -> Iterator[VllmEmulator]:
    yield emulator
    now = time.time()
    for name in ("ramp-l4-0", "ramp-h100-0"):
        emulator.pods[name].set(now_s=now, waiting=0, running=1, rps=1)


def drive(emulator: VllmEmulator, prometheus: PrometheusServer, *, waiting: float, rps: float) -> None:
    """Set the L4 pod's load and wait until Prometheus has scraped it."""
    emulator.pods["ramp-l4-0"].set(now_s=time.time(), waiting=waiting, running=8, rps=rps)
    selector = f'job="{labels.SCRAPE_JOB_SERVER}",namespace="{NS}",inferfleet_tier="l4"'
    prometheus.wait_for(
        f"vllm:num_requests_waiting{{{selector}}}",
        lambda result: bool(result) and float(result[0]["value"][1]) == waiting,
    )
    # The reactive target sizes for the arrival rate too: wait until the rate window
    # has moved past the change.
    prometheus.wait_for(
        f"rate(vllm:request_success_total{{{selector}}}[{LIVE_QUERIES.rate_window_s}s])",
        lambda result: bool(result) and abs(float(result[0]["value"][1]) - rps) <= 0.05 * rps,
    )


def test_load_ramp_scales_up_and_a_restart_keeps_the_state(
    cluster: InMemoryCluster, prometheus: PrometheusServer, ramp_pods: VllmEmulator
) -> None:
    first = make_autoscaler(cluster, prometheus.url)
    seen: list[int] = []
    # The ramp: an idle queue, then a growing backlog on the L4 tier, whose replicas
    # stay cold-starting (1 Ready) the whole time.
    for waiting, rps in ((0, 1.0), (6, 2.0)):
        drive(ramp_pods, prometheus, waiting=waiting, rps=rps)
        report = first.run_once(force=True)
        assert report.errors == [] and not report.metrics_unavailable
        seen.append(tk.replicas(cluster, NS, SERVICE, "l4"))
    first.close()
    assert seen[0] == 1  # no queue: the warm minimum
    assert seen[1] > 1  # 6 waiting against 4 per replica
    state_before = tk.status(cluster, NS, SERVICE)["autoscalerState"]
    scaling = tk.condition(cluster, NS, SERVICE, labels.CONDITION_SCALING)
    assert scaling is not None and scaling["status"] == "True"

    # The operator restarts mid-ramp: a fresh process with an empty cache.
    second = make_autoscaler(cluster, prometheus.url)
    drive(ramp_pods, prometheus, waiting=40, rps=6.0)
    second.run_once(force=True)
    second.close()
    after_restart = tk.replicas(cluster, NS, SERVICE, "l4")
    decision = tk.status(cluster, NS, SERVICE)["lastScalingDecision"]
    assert after_restart > seen[1], decision
    state_after = tk.status(cluster, NS, SERVICE)["autoscalerState"]
    l4_before, l4_after = state_before["tiers"]["l4"], state_after["tiers"]["l4"]
    assert l4_after["observedSinceS"] == l4_before["observedSinceS"]
    assert l4_after["lastScaleUpS"] > l4_before["lastScaleUpS"]
    decision = tk.status(cluster, NS, SERVICE)["lastScalingDecision"]
    assert decision["queueDepth"] == 40.0 and decision["signal"] == "reactive"
    assert [e["reason"] for e in cluster.events].count(EVENT_SCALED_UP) == 2
    assert tk.replicas(cluster, NS, SERVICE, "h100") == 1  # no queue there


def test_stopping_prometheus_holds_and_reports_metrics_unavailable(
    cluster: InMemoryCluster, prometheus_binary: str, emulator: VllmEmulator
) -> None:
    # A private Prometheus: stopping the shared one would starve the other tests.
    with PrometheusServer(
        emulator.operator_scrape_configs(scrape_interval_s=SCRAPE_INTERVAL_S),
        binary=prometheus_binary,
        scrape_interval_s=SCRAPE_INTERVAL_S,
    ) as private:
        private.wait_for_targets(len(emulator.pods))
        cluster.scale(tk.workload_ref(NS, SERVICE, "l4"), 4)
        tk.set_ready(cluster, NS, SERVICE, "l4", 4)
        autoscaler = make_autoscaler(cluster, private.url)

        def healthy() -> None:
            report = autoscaler.run_once(force=True)
            assert not report.metrics_unavailable
            state = tk.status(cluster, NS, SERVICE)["lastScalingDecision"]
            assert state["queueDepth"] is not None

        eventually(healthy)
        private.stop()
        report = autoscaler.run_once(force=True)
        autoscaler.close()
    assert report.metrics_unavailable
    assert tk.replicas(cluster, NS, SERVICE, "l4") == 4  # held, not scaled down
    assert tk.replicas(cluster, NS, SERVICE, "h100") == 1  # warm minimum kept
    inactive = tk.condition(cluster, NS, SERVICE, labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None
    assert (inactive["status"], inactive["reason"]) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    assert tk.status(cluster, NS, SERVICE)["lastScalingDecision"]["signal"] == "hold"
    assert any(e["type"] == "Warning" for e in cluster.events)
