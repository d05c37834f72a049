"""One tenant's garbage metrics against a real Prometheus never delay another tenant's scale-up.

A private Prometheus scrapes a private emulator (so the shared one's series stay clean):
the attacker's pod reports `num_requests_waiting = +Inf` and `num_requests_running = NaN`,
the victim's a queue of 40. The attacker is named to come first in every listing.
"""

from __future__ import annotations

import math
import time

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.prometheus.testkit import EmulatedPod, PrometheusServer, VllmEmulator
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.autoscaling.step.step import FIRST_SCRAPE_GRACE_S
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import ObjectRef
from tests.integration.prometheus.conftest import SCRAPE_INTERVAL_S
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit import reconciled as tk

pytestmark = pytest.mark.integration

NS, ATTACKER, VICTIM = "iso", "aaa-attacker", "victim"
QUERIES = QueryConfig(rate_window_s=4, max_sample_age_s=5)
SETTINGS = OperatorSettings(sync_period_s=5, queue_depth_per_replica=4.0, predictive_enabled=False)


def test_garbage_metrics_of_one_tenant_never_delay_another(prometheus_binary: str) -> None:
    cluster = InMemoryCluster()
    for name in (ATTACKER, VICTIM):
        tiers = [{"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 8}]
        tk.install(
            cluster,
            a_scaled_service(name, NS).tiers(*tiers),
            plans=[a_small_tier_plan("l4").capacity(usable_rps=2.0)],
        )
    with VllmEmulator() as emulator:
        attacker = emulator.add_pod(EmulatedPod("attacker-l4-0", NS, ATTACKER, "l4"))
        victim = emulator.add_pod(EmulatedPod("victim-l4-0", NS, VICTIM, "l4"))
        now = time.time()
        attacker.set(now_s=now, waiting=math.inf, running=math.nan, kv_cache_usage=-1.0, rps=1.0)
        victim.set(now_s=now, waiting=40, running=8, rps=3.0)
        with PrometheusServer(
            emulator.operator_scrape_configs(scrape_interval_s=SCRAPE_INTERVAL_S),
            binary=prometheus_binary,
            scrape_interval_s=SCRAPE_INTERVAL_S,
        ) as prometheus:
            prometheus.wait_for_targets(2)
            prometheus.wait_for(
                f'vllm:num_requests_waiting{{inferfleet_service="{ATTACKER}"}}',
                lambda result: bool(result) and result[0]["value"][1] == "+Inf",
            )
            prometheus.wait_for(
                f'rate(vllm:request_success_total{{inferfleet_service="{VICTIM}"}}[{QUERIES.rate_window_s}s])',
                lambda result: bool(result) and abs(float(result[0]["value"][1]) - 3.0) <= 0.3,
            )
            reader = SignalReader(
                PrometheusClient(PrometheusConfig(prometheus.url, timeout_s=2)),
                QUERIES,
                history_retention_s=3600,
            )
            autoscaler = Autoscaler(cluster, reader, SETTINGS)
            try:
                report = autoscaler.run_once(force=True)
                assert report.errors == [] and not report.metrics_unavailable
                # The victim scales on the first tick; the attacker's garbage is "no data",
                # held, and within the first-scrape grace not reported yet ...
                assert tk.replicas(cluster, NS, VICTIM, "l4") > 1
                assert tk.replicas(cluster, NS, ATTACKER, "l4") == 1
                assert tk.status(cluster, NS, ATTACKER)["lastScalingDecision"]["signal"] == "hold"
                active = tk.condition(cluster, NS, ATTACKER, labels.CONDITION_SCALING_ACTIVE)
                assert active is not None and active["status"] == "True"
                # ... but once the silence outlasts the grace (the state status keeps, aged).
                attacker_ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, ATTACKER)
                state = tk.status(cluster, NS, ATTACKER)["autoscalerState"]
                since_s = state["tiers"]["l4"]["metricsMissingSinceS"]
                state["tiers"]["l4"]["metricsMissingSinceS"] = since_s - FIRST_SCRAPE_GRACE_S
                cluster.patch_status(attacker_ref, {"autoscalerState": state})
                autoscaler.run_once(force=True)
                inactive = tk.condition(cluster, NS, ATTACKER, labels.CONDITION_SCALING_ACTIVE)
                assert inactive is not None and inactive["status"] == "False"
                assert "no metrics for tier(s)" in inactive["message"]
                assert tk.replicas(cluster, NS, ATTACKER, "l4") == 1

                # A lowered maxReplicas applies on the next tick.
                ref = ObjectRef(labels.API_VERSION, labels.KIND, NS, VICTIM)
                cluster.update(
                    ref, lambda obj: obj["spec"]["tiers"][0].__setitem__("maxReplicas", 2), "kubectl"
                )
                autoscaler.run_once(force=True)
                assert tk.replicas(cluster, NS, VICTIM, "l4") == 2
            finally:
                autoscaler.close()
