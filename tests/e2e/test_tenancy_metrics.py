"""Another namespace cannot steer a victim's autoscaler through Prometheus: the real
operator, the real API server, and a real Prometheus configured from every PodMonitor the
way prometheus-operator would configure it, with the namespace label enforced (what the
docs ask of the platform's Prometheus: docs/concepts/live-autoscaler.md).

The attacker owns a namespace: a pod there exports the victim's labels (`namespace`,
`job`, `pod`, `inferfleet_*`) with a queue of 1000 and a full KV cache, and the
attacker's PodMonitors scrape it every way a monitor can: plainly, with `honorLabels`,
and with relabelings and metricRelabelings that write the victim's namespace and the
operator's job. The victim's idle service must stay at its one replica.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.prometheus.testkit import EmulatedPod, PrometheusSettings
from tests.e2e.conftest import Operators
from tests.e2e.harness import NAMESPACE_LABEL, Cluster, conditions, eventually, holds
from tests.e2e.observability import ADDRESS_ANNOTATION, PodMonitorPrometheus, StandinBridge
from tests.e2e.spec import gpu_service

NAME = "chat"
TIER = {
    "name": "l4",
    "gpu": "L4",
    "gpusPerNode": 1,
    "minReplicas": 1,
    "maxReplicas": 4,
    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    "overrides": {"maxNumSeqs": 2},
}
FORGER = {"app": "forger"}


class Forger:
    """A loopback /metrics that claims to be the victim's tier, waiting 1000 deep."""

    def __init__(self, claims: dict[str, str]) -> None:
        self.pod = EmulatedPod("forger", "attacker", "x", "x", exported_labels=claims, num_gpu_blocks=1)
        self.pod.set(now_s=time.time(), waiting=1000, running=1000, kv_cache_usage=1.0, rps=40.0)
        forger = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = ("\n".join(forger.pod.exposition(time.time())) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Forger:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker(cluster: Cluster) -> Iterator[str]:
    name = f"e2e-attacker-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, f"{NAMESPACE_LABEL}=true")
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def prometheus(
    cluster: Cluster, namespace: str, attacker: str, tmp_path: Path
) -> Iterator[PodMonitorPrometheus]:
    """The platform's Prometheus, enforcing the namespace label on every monitor."""
    server = PodMonitorPrometheus(
        cluster,
        tmp_path / "prometheus",
        namespaces=[namespace, attacker],
        settings=PrometheusSettings(enforced_namespace_label="namespace"),
    ).start()
    yield server
    server.close()


def forger_pod(namespace: str, address: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "forger",
            "namespace": namespace,
            "labels": FORGER,
            "annotations": {ADDRESS_ANNOTATION: address},
        },
        "spec": {
            # Never scheduled: Prometheus scrapes the address above, as the pod network would.
            "nodeSelector": {"e2e.inferfleet.dev/nowhere": "true"},
            "containers": [
                {"name": "forger", "image": "forger:1", "ports": [{"name": "http", "containerPort": 8000}]}
            ],
        },
    }


def attacker_monitor(namespace: str, name: str, **endpoint: Any) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": FORGER},
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "2s", **endpoint}],
        },
    }


def replicas(cluster: Cluster, namespace: str) -> int:
    return int(cluster.apps().read_namespaced_deployment(f"{NAME}-l4", namespace).spec.replicas)


def test_another_namespaces_pods_and_monitors_never_scale_the_victim(
    cluster: Cluster,
    namespace: str,
    attacker: str,
    operators: Operators,
    prometheus: PodMonitorPrometheus,
) -> None:
    operator = operators.start(namespace, prometheus_url=prometheus.url, namespaces=(namespace, attacker))
    cluster.apply([gpu_service(NAME, namespace, [TIER], cache={"mode": "none"})])
    bridge: StandinBridge = operators.observability.bridge

    def deciding() -> str:
        live = cluster.service(namespace, NAME)
        pods = cluster.list("v1/pods", namespace, "inferfleet.dev/component=vllm")
        assert len(pods) == 1 and bridge.address_of(namespace, pods[0]["metadata"]["name"]), pods
        found = conditions(live)
        assert found.get("ScalingActive", {}).get("status") == "True", found.get("ScalingActive")
        return str(pods[0]["metadata"]["name"])

    victim_pod = eventually(deciding, 150, what="the victim's replica scraped and decided from")
    assert replicas(cluster, namespace) == 1

    write = [
        {"targetLabel": "namespace", "replacement": namespace, "action": "replace"},
        {"targetLabel": "job", "replacement": labels.SCRAPE_JOB_SERVER, "action": "replace"},
    ]
    claims = {
        "namespace": namespace,
        "job": labels.SCRAPE_JOB_SERVER,
        "pod": victim_pod,
        "inferfleet_namespace": namespace,
        "inferfleet_service": NAME,
        "inferfleet_tier": "l4",
    }
    with Forger(claims) as forger:
        cluster.apply(
            [
                forger_pod(attacker, forger.address),
                attacker_monitor(attacker, "plain"),
                attacker_monitor(attacker, "honoured", honorLabels=True),
                attacker_monitor(attacker, "relabelled", relabelings=write),
                attacker_monitor(attacker, "metric-relabelled", metricRelabelings=write),
            ],
            manager="attacker",
        )

        # The attack is live: Prometheus holds the forged series, renamed (plain) or
        # moved back into the attacker's namespace by the enforcement (the others).
        def forged() -> None:
            renamed = prometheus.query(f'vllm:num_requests_waiting{{exported_namespace="{namespace}"}}')
            assert renamed, f"no forged series yet; errors: {prometheus.errors[-1:]}"
            moved = prometheus.query(
                f'vllm:num_requests_waiting{{job="{labels.SCRAPE_JOB_SERVER}", namespace="{attacker}"}}'
            )
            assert len(moved) >= 2, moved

        eventually(forged, 60, what="the attacker's series in Prometheus")

        def one_replica() -> None:
            count = replicas(cluster, namespace)
            decision = (cluster.service(namespace, NAME).get("status") or {}).get("lastScalingDecision")
            assert count == 1, f"the attacker moved the victim to {count} replicas; decision: {decision}"

        # Six autoscaler periods (5 s): at 6e505f6 the first one took the victim to 4.
        holds(one_replica, duration_s=30, interval_s=1)
        active = conditions(cluster.service(namespace, NAME)).get("ScalingActive", {})
        assert active.get("status") == "True", active
    assert operator.alive(), operator.tail()
