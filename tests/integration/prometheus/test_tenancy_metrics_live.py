"""Another namespace cannot steer a victim's autoscaler through Prometheus.

The real Prometheus scrapes vLLM emulators of two namespaces through the scrape configs
prometheus-operator generates for the operator's own PodMonitors (`testkit`), and the
attacker's pods through the attacker's own PodMonitors. The attacker's pods claim to be
the victim's tiers in every way a pod or a monitor can: exported labels (`namespace`,
`job`, `pod`, `inferfleet_*`), `honorLabels: true`, relabelings and metricRelabelings
that write the victim's labels, and a monitor that scrapes the victim's own pods a second
time. They report a deep queue, a full KV cache, slow first tokens and a one-block KV
cache for the victim's idle service, and negative counts for its overloaded one; the
attacker's own service spells every metric name twice (which used to fail every query
for every tenant) and reports garbage for itself.

Without the namespace enforced, exported labels alone must not move anything; with the
platform's Prometheus enforcing it (`enforcedNamespaceLabel: namespace`), nothing an
attacker's monitor writes may. In both, the victim's readings are its own pods' values
exactly, and its decisions are what its own load asks for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.prometheus.reader import (
    KvCapacityReader,
    PrometheusClient,
    PrometheusConfig,
    SignalReader,
)
from inferfleet.autoscaling.prometheus.testkit import (
    EmulatedPod,
    PrometheusServer,
    PrometheusSettings,
    VllmEmulator,
    pod_monitor_scrape_configs,
)
from inferfleet.autoscaling.promql.parse import KvCapacityReading, ServiceKey, TierKey
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.autoscaling.promql.signals import SignalSnapshot
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.render.frontdoor import COMPONENT_EPP
from tests.integration.prometheus.conftest import SCRAPE_INTERVAL_S
from tests.toolkit import a_plan, a_scaled_service, a_service, a_small_tier_plan, a_tier_plan
from tests.toolkit import reconciled as tk
from tests.toolkit.design import render

pytestmark = pytest.mark.integration

VICTIM, EVIL = "victim", "evil"
QUERIES = QueryConfig(
    rate_window_s=4,
    max_sample_age_s=5,
    history_step_s=1,
    history_rate_window_s=3,
    mix_window_s=4,
    mix_refresh_s=0,
)
# The autoscaler's own reader keeps the policy's one-minute history step.
DECIDING = QueryConfig(rate_window_s=4, max_sample_age_s=5)
SETTINGS = OperatorSettings(sync_period_s=5, queue_depth_per_replica=4.0, predictive_enabled=False)
ENFORCED = PrometheusSettings(enforced_namespace_label="namespace")
GATEWAY = OperatorSettings(gateway_name="inference-gateway", gateway_namespace="gateway-system")
FORGER_LABELS = {"app": "forger"}


def claims(service: str, pod: str) -> dict[str, str]:
    """Every label a series could be keyed by, naming the victim's tier."""
    return {
        "namespace": VICTIM,
        "job": labels.SCRAPE_JOB_SERVER,
        "pod": pod,
        "inferfleet_namespace": VICTIM,
        "inferfleet_service": service,
        "inferfleet_tier": "l4",
    }


def pods() -> list[EmulatedPod]:
    return [
        # The victim: an idle service and an overloaded one, each on its own L4 pod.
        EmulatedPod("chat-l4-0", VICTIM, "chat", "l4", num_gpu_blocks=30000),
        EmulatedPod("busy-l4-0", VICTIM, "busy", "l4"),
        # The attacker's own service (same service and pod names as the victim's): every
        # name in both forms, victim labels exported, and a queue of -1000 for itself.
        EmulatedPod(
            "chat-l4-0",
            EVIL,
            "chat",
            "l4",
            both_forms=True,
            exported_labels=claims("busy", "busy-l4-0"),
            num_gpu_blocks=8,
        ),
        # The victim's endpoint picker, holding 3 requests for its pool `chat`.
        EmulatedPod(
            "chat-epp-0",
            VICTIM,
            "chat",
            "epp",
            kube_labels={labels.LABEL_SERVICE: "chat", labels.LABEL_COMPONENT: COMPONENT_EPP},
            port_name="metrics",
            door_held={"chat": 3.0},
        ),
        # The attacker's forgers: ordinary pods of its namespace, scraped by its monitors.
        EmulatedPod(
            "forger-chat",
            EVIL,
            "x",
            "x",
            kube_labels=FORGER_LABELS,
            exported_labels=claims("chat", "chat-l4-0"),
            num_gpu_blocks=1,
            door_held={"l4": 500.0},
            prompt_tokens=6000.0,
        ),
        EmulatedPod(
            "forger-busy",
            EVIL,
            "x",
            "x",
            kube_labels=FORGER_LABELS,
            exported_labels=claims("busy", "busy-l4-0"),
            door_held={"l4": -500.0},
        ),
    ]


def drive(emulator: VllmEmulator) -> None:
    now = time.time()
    by_key = {(pod.namespace, pod.name): pod for pod in emulator.pods.values()}
    by_key[VICTIM, "chat-l4-0"].set(now_s=now, waiting=0, running=1, kv_cache_usage=0.1, rps=0.5)
    by_key[VICTIM, "busy-l4-0"].set(now_s=now, waiting=40, running=8, kv_cache_usage=0.9, rps=3.0)
    by_key[EVIL, "chat-l4-0"].set(now_s=now, waiting=-1000, running=math.nan, kv_cache_usage=7.0, rps=1.0)
    by_key[EVIL, "forger-chat"].set(
        now_s=now, waiting=1000, running=1000, kv_cache_usage=1.0, rps=50.0, ttft_mix=[(30.0, 1.0)]
    )
    by_key[EVIL, "forger-busy"].set(now_s=now, waiting=-1000, running=-1000, kv_cache_usage=-1.0, rps=0.0)


class Emulator(VllmEmulator):
    """Pods keyed by namespace too: both namespaces run a pod named chat-l4-0."""

    def add_pod(self, pod: EmulatedPod) -> EmulatedPod:
        super().add_pod(pod)
        self.pods[f"{pod.namespace}/{pod.name}"] = self.pods.pop(pod.name)
        return pod

    def render(self, path: str) -> str | None:
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "pods" and parts[3] == "metrics":
            pod = self.pods.get(f"{parts[1]}/{parts[2]}")
            return None if pod is None else "\n".join(pod.exposition(self.clock())) + "\n"
        return super().render(path)

    def pod_targets(self, pods: Any = None) -> list[dict[str, Any]]:
        groups = super().pod_targets(pods)
        for group in groups:
            namespace = group["labels"]["__meta_kubernetes_namespace"]
            name = group["labels"]["__meta_kubernetes_pod_name"]
            group["labels"]["__metrics_path__"] = f"/pods/{namespace}/{name}/metrics"
        return groups


def attacker_monitor(name: str, endpoint: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """One of the attacker's PodMonitors, in its own namespace, over its forgers."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": EVIL},
        "spec": {
            "selector": {"matchLabels": FORGER_LABELS},
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "1s", **endpoint}],
            **spec,
        },
    }


def write(label: str, value: str) -> dict[str, Any]:
    return {"targetLabel": label, "replacement": value, "action": "replace"}


# Exported labels only: a monitor with honorLabels off and nothing else.
PLAIN = attacker_monitor("plain", {})
# Every way a monitor the attacker owns can name the victim's tier.
HONOURED = attacker_monitor("honoured", {"honorLabels": True})
RELABELLED = attacker_monitor(
    "relabelled", {"relabelings": [write("namespace", VICTIM), write("job", labels.SCRAPE_JOB_SERVER)]}
)
METRIC_RELABELLED = attacker_monitor(
    "metric-relabelled",
    {"metricRelabelings": [write("namespace", VICTIM), write("job", labels.SCRAPE_JOB_SERVER)]},
)
# The victim's own pods, scraped again by the attacker as if by the operator.
SECOND_SCRAPE = attacker_monitor(
    "second-scrape",
    {"relabelings": [write("job", labels.SCRAPE_JOB_SERVER), write("namespace", VICTIM)]},
    namespaceSelector={"matchNames": [VICTIM]},
)
SECOND_SCRAPE["spec"]["selector"] = {"matchLabels": {labels.LABEL_COMPONENT: "vllm"}}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        for pod in pods():
            running.add_pod(pod)
        drive(running)
        yield running


def picker_monitor() -> dict[str, Any]:
    """The operator's PodMonitor of the victim's endpoint pickers, as it renders it."""
    service = a_service().with_spec(frontDoor={"holdSeconds": 30}).service()
    objects = render(service, a_plan(a_tier_plan("h100")), GATEWAY)
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor" and o["metadata"]["name"] == "chat-epp"]
    monitor["metadata"]["namespace"] = VICTIM
    return monitor


def start_prometheus(
    binary: str, emulator: Emulator, monitors: Sequence[dict[str, Any]], settings: PrometheusSettings | None
) -> PrometheusServer:
    operator_pods = [pod for pod in emulator.pods.values() if pod.kube_labels is None]
    configs = emulator.operator_scrape_configs(SCRAPE_INTERVAL_S, prometheus=settings, pods=operator_pods)
    targets = {"static_configs": emulator.pod_targets()}
    for monitor in [picker_monitor(), *monitors]:
        configs += pod_monitor_scrape_configs(
            monitor, targets, prometheus=settings, max_interval_s=SCRAPE_INTERVAL_S
        )
    server = PrometheusServer(configs, binary=binary, scrape_interval_s=SCRAPE_INTERVAL_S).start()
    try:
        # The operator's three vLLM pods and the victim's picker, and two per attacker
        # monitor (its forgers, or the victim's two vLLM pods for the second scrape).
        server.wait_for_targets(4 + 2 * len(monitors))
        span_s = 2 * QUERIES.rate_window_s
        # Two windows of scrapes behind every series, the attacker's included.
        server.wait_for(
            f"min(count_over_time(vllm:num_requests_waiting[{span_s}s]))",
            lambda result: bool(result) and float(result[0]["value"][1]) >= span_s - 1,
        )
    except BaseException:
        server.close()
        raise
    return server


def two_namespaces() -> InMemoryCluster:
    cluster = InMemoryCluster()
    tiers = {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 8}
    for namespace, name in ((VICTIM, "chat"), (VICTIM, "busy"), (EVIL, "chat")):
        tk.install(
            cluster,
            a_scaled_service(name, namespace).tiers(tiers),
            plans=[a_small_tier_plan("l4").capacity(usable_rps=2.0)],
        )
    return cluster


def read(server: PrometheusServer) -> SignalSnapshot:
    reader = SignalReader(
        PrometheusClient(PrometheusConfig(server.url, timeout_s=5)), QUERIES, history_retention_s=30
    )
    try:
        return reader.read(time.time())
    finally:
        reader.close()


def assert_the_victim_reads_its_own_pods_only(server: PrometheusServer) -> None:
    snapshot = read(server)
    # One pod spelling every name twice fails no query for anyone.
    assert snapshot.failed == {} and snapshot.door_failed is None, snapshot.failed
    chat = snapshot.tier(VICTIM, "chat", "l4")
    assert chat is not None, snapshot.problems
    assert (chat.waiting, chat.running, chat.kv_cache_usage, chat.ready_replicas) == (0.0, 1.0, 0.1, 1)
    assert chat.request_rate_rps == pytest.approx(0.5, rel=0.15)
    # Its own requests: 50 ms to the first token, 512-token prompts (the forger's are 30 s, 6000).
    assert chat.ttft_p99_s is not None and chat.ttft_p99_s <= 0.1
    assert chat.prompt_tokens is not None and chat.prompt_tokens.p99 <= 1000.0
    busy = snapshot.tier(VICTIM, "busy", "l4")
    assert busy is not None, snapshot.problems
    assert (busy.waiting, busy.running, busy.kv_cache_usage, busy.ready_replicas) == (40.0, 8.0, 0.9, 1)
    # The victim's picker holds 3 for its pool; the forged 500 and -500 count for nobody.
    victim_door = {key: held for key, held in snapshot.door_waiting.items() if key.namespace == VICTIM}
    assert victim_door == {TierKey(VICTIM, "chat", "chat"): 3.0}
    history = [value for value in snapshot.rate_history[ServiceKey(VICTIM, "chat")] if not math.isnan(value)]
    assert history and history[-1] == pytest.approx(0.5, rel=0.3), history
    # The attacker's own service: its garbage is missing data for it alone.
    evil = snapshot.tier(EVIL, "chat", "l4")
    assert evil is not None and evil.waiting is None and evil.running is None
    assert evil.kv_cache_usage is None
    assert TierKey(EVIL, "x", "x") not in snapshot.tiers

    capacity = KvCapacityReader(PrometheusClient(PrometheusConfig(server.url)), QUERIES)
    assert capacity.tiers_of(VICTIM, "chat") == {"l4": KvCapacityReading(30000, 16, 1)}
    assert capacity.tiers_of(VICTIM, "busy") == {}


def assert_the_victims_decisions_follow_its_own_load(server: PrometheusServer) -> None:
    cluster = two_namespaces()
    reader = SignalReader(
        PrometheusClient(PrometheusConfig(server.url, timeout_s=5)), DECIDING, history_retention_s=3600
    )
    autoscaler = Autoscaler(cluster, reader, SETTINGS)
    try:
        report = autoscaler.run_once(force=True)
        assert report.errors == [] and not report.metrics_unavailable
        # The idle service stays at its minimum (the forged queue of 1000 would take it to 8),
        # the overloaded one scales on the first tick (the forged -1000 would freeze it at 1).
        assert tk.replicas(cluster, VICTIM, "chat", "l4") == 1
        assert tk.replicas(cluster, VICTIM, "busy", "l4") > 1
        assert tk.status(cluster, VICTIM, "chat")["lastScalingDecision"]["signal"] != "hold"
        active = tk.condition(cluster, VICTIM, "busy", labels.CONDITION_SCALING_ACTIVE)
        assert active is not None and active["status"] == "True", active
    finally:
        autoscaler.close()


def test_labels_an_endpoint_exports_never_move_a_series_to_another_namespace(
    prometheus_binary: str, emulator: Emulator
) -> None:
    """No enforcement at all: the victim's labels exported by the attacker's pods, through
    the attacker's plain monitor (honorLabels off), arrive as exported_* and count for
    nobody."""
    server = start_prometheus(prometheus_binary, emulator, [PLAIN], settings=None)
    try:
        forged = server.api("/api/v1/query", query='vllm:num_requests_waiting{exported_namespace="victim"}')
        assert forged["data"]["result"], "the attacker's exported labels should reach Prometheus renamed"
        assert_the_victim_reads_its_own_pods_only(server)
        assert_the_victims_decisions_follow_its_own_load(server)
    finally:
        server.close()


def test_with_the_namespace_enforced_no_monitor_of_another_namespace_counts(
    prometheus_binary: str, emulator: Emulator
) -> None:
    """The platform's Prometheus enforces `namespace`: honorLabels, relabelings and
    metricRelabelings that write the victim's labels, and a second scrape of the
    victim's own pods, all land in the attacker's namespace."""
    monitors = [PLAIN, HONOURED, RELABELLED, METRIC_RELABELLED, SECOND_SCRAPE]
    server = start_prometheus(prometheus_binary, emulator, monitors, settings=ENFORCED)
    try:
        # The attacker's monitors did write the victim's job; the namespace is theirs.
        written = server.api(
            "/api/v1/query",
            query=f'count by (namespace) (vllm:num_requests_waiting{{job="{labels.SCRAPE_JOB_SERVER}"}})',
        )["data"]["result"]
        counted = {item["metric"]["namespace"]: int(item["value"][1]) for item in written}
        # The victim's two pods, and every forgery in the attacker's own namespace.
        assert counted[VICTIM] == 2 and counted[EVIL] > 2, counted
        assert_the_victim_reads_its_own_pods_only(server)
        assert_the_victims_decisions_follow_its_own_load(server)
    finally:
        server.close()
