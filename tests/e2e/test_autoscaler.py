"""The live autoscaler: a real Prometheus scraping vLLM stand-ins through the operator's
own PodMonitor, load that queues, a scale-up through the scale subresource, and a hold
at (never below) the replicas it has when Prometheus goes away; a drifted request mix
that turns WorkloadDrift True and, with `replan: auto`, re-plans the fleet."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferfleet.api.status import worst_condition
from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, conditions, eventually, holds
from tests.e2e.observability import PodMonitorPrometheus, StandinBridge
from tests.e2e.spec import gpu_service

NAME = "chat"
# The operator's own scrape job, in the service's namespace (what its queries select).
SERIES = 'job="inferfleet-vllm",namespace="{namespace}"'
SCALE_MANAGER = "inferfleet-operator-scale"
TIER = {
    "name": "l4",
    "gpu": "L4",
    "gpusPerNode": 1,
    "minReplicas": 1,
    "maxReplicas": 4,
    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    # Two requests at once per replica, so a few concurrent clients make a queue.
    "overrides": {"maxNumSeqs": 2},
}


class Load:
    """`clients` threads sending completions to one stand-in until stopped: prompts of
    `prompt_words` words in turn (one token per word in the stand-in), `pause_s` apart."""

    def __init__(
        self,
        address: str,
        model: str,
        clients: int,
        max_tokens: int,
        *,
        prompt_words: tuple[int, ...] = (50,),
        pause_s: float = 0.0,
    ) -> None:
        self.url = f"http://{address}/v1/completions"
        self.bodies = [
            json.dumps({"model": model, "prompt": "hello " * words, "max_tokens": max_tokens}).encode()
            for words in prompt_words
        ]
        self.pause_s = pause_s
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(clients)]
        self.completed = 0
        self.refused = 0  # answered 4xx

    def _client(self) -> None:
        sent = 0
        while not self._stop.is_set():
            body = self.bodies[sent % len(self.bodies)]
            sent += 1
            request = urllib.request.Request(
                self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
                self.completed += 1
            except urllib.error.HTTPError as error:
                error.read()
                self.refused += 1
            except OSError:
                time.sleep(0.5)
            self._stop.wait(self.pause_s)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


@pytest.fixture
def prometheus(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[PodMonitorPrometheus]:
    """This test's own Prometheus (it stops it), following the PodMonitors of its namespace."""
    server = PodMonitorPrometheus(cluster, tmp_path / "prometheus", namespaces=[namespace]).start()
    yield server
    server.close()


def replicas(cluster: Cluster, namespace: str) -> int:
    return int(cluster.apps().read_namespaced_deployment(f"{NAME}-l4", namespace).spec.replicas)


def test_autoscaler_scales_through_the_scale_subresource_and_holds_without_prometheus(
    cluster: Cluster, namespace: str, operators: Operators, prometheus: PodMonitorPrometheus
) -> None:

    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    mark = audit.mark() if audit else 0
    operator = operators.start(namespace, prometheus_url=prometheus.url)
    body = gpu_service(NAME, namespace, [TIER], cache={"mode": "none"})
    cluster.apply([body])
    bridge: StandinBridge = operators.observability.bridge

    def serving() -> str:
        live = cluster.service(namespace, NAME)
        assert conditions(live).get("Ready", {}).get("status") == "True", conditions(live).get("Ready")
        pods = cluster.list("v1/pods", namespace, "inferfleet.dev/component=vllm")
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        address = bridge.address_of(namespace, pods[0]["metadata"]["name"])
        assert address, "no stand-in for the pod yet"
        return address

    address = eventually(serving, 120, what="one Ready replica with its stand-in")

    # Prometheus found the pod through the operator's PodMonitor, and the relabelling gives
    # the series exactly the labels the autoscaler's queries group by.
    def scraped() -> list[dict[str, Any]]:
        found = prometheus.query(f"vllm:num_requests_running{{{SERIES.format(namespace=namespace)}}}")
        assert found, (
            f"no series yet; targets up: {len(prometheus.targets_up())}; errors: {prometheus.errors[-1:]}"
        )
        return found

    (series,) = eventually(scraped, 60, what="Prometheus to scrape the stand-in")
    labels = series["metric"]
    assert (labels["inferfleet_service"], labels["inferfleet_tier"]) == (NAME, "l4"), labels
    assert labels["pod"].startswith(f"{NAME}-l4-"), labels

    # The autoscaler reads it: ScalingActive, a decision recorded.
    def deciding() -> dict[str, Any]:
        live = cluster.service(namespace, NAME)
        assert (live.get("status") or {}).get("lastScalingDecision"), live.get("status")
        found = conditions(live)
        assert found.get("ScalingActive", {}).get("status") == "True", found.get("ScalingActive")
        assert found.get("Degraded", {}).get("status") != "True", found.get("Degraded")
        return live

    eventually(deciding, 60, what="the autoscaler's first decision")
    assert replicas(cluster, namespace) == 1

    # Load that queues: 12 clients, 2 slots, 15 s per request.
    with Load(address, "meta-llama/Llama-3.1-8B-Instruct", clients=12, max_tokens=1500):

        def queued() -> None:
            selector = SERIES.format(namespace=namespace)
            found = prometheus.query(f"sum(vllm:num_requests_waiting{{{selector}}})")
            assert found and float(found[0]["value"][1]) >= 8, found

        eventually(queued, 60, what="the queue to show in Prometheus")

        def scaled_up() -> int:
            count = replicas(cluster, namespace)
            assert count >= 2, f"still {count} replica(s); decision: {_decision(cluster, namespace)}"
            return count

        scaled = eventually(scaled_up, 90, what="the autoscaler to scale up")
    assert scaled <= TIER["maxReplicas"]
    deployment = cluster.kubectl_json(
        "get", "deployment", f"{NAME}-l4", "-n", namespace, "--show-managed-fields"
    )
    managers = {
        (entry["manager"], entry.get("subresource", ""))
        for entry in deployment["metadata"]["managedFields"]
        if "f:replicas" in json.dumps(entry.get("fieldsV1", {}).get("f:spec", {}))
    }
    assert (SCALE_MANAGER, "scale") in managers, managers
    if audit is not None:
        scale_writes = [
            e for e in audit.events(mark) if e.resource == "deployments/scale" and e.verb == "patch"
        ]
        assert scale_writes and all(e.code == 200 for e in scale_writes), scale_writes
        assert {e.user for e in scale_writes} == {f"system:serviceaccount:{namespace}:inferfleet-operator"}

    # Prometheus goes away: the autoscaler says so and holds what it has.
    held = replicas(cluster, namespace)
    prometheus.stop()

    def scaling_inactive() -> None:
        found = conditions(cluster.service(namespace, NAME)).get("ScalingActive", {})
        assert (found.get("status"), found.get("reason")) == ("False", "MetricsUnavailable"), found

    eventually(scaling_inactive, 60, what="ScalingActive=False MetricsUnavailable")

    def never_below() -> None:
        count = replicas(cluster, namespace)
        assert count >= held >= TIER["minReplicas"], f"scaled down to {count} without metrics (had {held})"

    holds(never_below, duration_s=30, interval_s=1)
    assert operator.alive(), operator.tail()


def _decision(cluster: Cluster, namespace: str) -> Any:
    return (cluster.service(namespace, NAME).get("status") or {}).get("lastScalingDecision")


DRIFTED = "drifted"
# Declared short: the planner sizes max-model-len for P99 input + P99 output, 610 -> 1,024.
SHORT_WORKLOAD = {
    "inputTokens": {"p50": 300, "p95": 500, "p99": 600},
    "outputTokens": {"p50": 10, "p95": 10, "p99": 10},
    "peakRequestsPerSecond": 4,
}
PLANNED_LEN, REPLANNED_LEN = 1024, 3072


def _max_model_len(pod_or_template: dict[str, Any]) -> int | None:
    spec = pod_or_template["spec"]
    container = next(c for c in spec["containers"] if c["name"] == "vllm")
    args = [*(container.get("command") or []), *(container.get("args") or [])]
    for index, arg in enumerate(args):
        key, _, inline = str(arg).partition("=")
        if key == "--max-model-len":
            return int(inline or args[index + 1])
    return None


def test_a_drifted_mix_turns_workload_drift_true_and_replan_auto_rolls_the_fleet(
    cluster: Cluster, namespace: str, operators: Operators, prometheus: PodMonitorPrometheus
) -> None:
    """Live, end to end: a quarter of the prompts are longer than the max-model-len the
    declared workload was planned with, so the stand-in (as vLLM) answers them 400 while
    the prompts it serves reach towards the limit. The autoscaler reads the mix from
    Prometheus, WorkloadDrift turns True (PromptsRejected) with the observed percentiles
    (`kubectl get` shows the worst condition as STATUS, not Ready's), and with
    `replan: auto` the reconciler plans for the observed workload: the pods roll to the
    new --max-model-len and serve the prompts that were refused."""
    operator = operators.start(namespace, prometheus_url=prometheus.url)
    tier = {**TIER, "maxReplicas": 1, "overrides": {}}
    body = gpu_service(DRIFTED, namespace, [tier], cache={"mode": "none"}, scaling={"replan": "auto"})
    body["spec"]["workload"] = SHORT_WORKLOAD
    cluster.apply([body])
    bridge: StandinBridge = operators.observability.bridge

    def serving(length: int) -> str:
        pods = [
            p
            for p in cluster.list("v1/pods", namespace, "inferfleet.dev/component=vllm")
            if not p["metadata"].get("deletionTimestamp")
        ]
        assert [_max_model_len(p) for p in pods] == [length], [p["metadata"]["name"] for p in pods]
        address = bridge.address_of(namespace, pods[0]["metadata"]["name"])
        assert address, "no stand-in for the pod yet"
        return address

    address = eventually(lambda: serving(PLANNED_LEN), 120, what="one replica at max-model-len 1,024")
    model = "meta-llama/Llama-3.1-8B-Instruct"
    # Three prompts of 700 words (served: their p99 reaches towards the limit), then one
    # of 1,500 (beyond it: 400), 10 output tokens each.
    with Load(
        address, model, clients=2, max_tokens=10, prompt_words=(700, 700, 700, 1500), pause_s=0.05
    ) as load:

        def drifted() -> dict[str, Any]:
            live = cluster.service(namespace, DRIFTED)
            found = conditions(live).get("WorkloadDrift", {})
            assert (found.get("status"), found.get("reason")) == ("True", "PromptsRejected"), (
                found,
                (live.get("status") or {}).get("observedWorkload"),
                f"served {load.completed}, refused {load.refused}",
            )
            return live

        live = eventually(drifted, 300, interval_s=2, what="WorkloadDrift=True PromptsRejected")
    message = conditions(live)["WorkloadDrift"]["message"]

    # kubectl get's STATUS shows the worst condition (here SloAtRisk's or the drift's),
    # never Ready's reason while WorkloadDrift is True.
    def status_column() -> None:
        found = conditions(cluster.service(namespace, DRIFTED))
        lines = cluster.kubectl("get", "inferenceservices", DRIFTED, "-n", namespace).stdout.splitlines()
        header, row = lines[0].split(), lines[1].split()
        shown = row[header.index("STATUS")]
        assert shown == worst_condition(list(found.values())), (lines, found)
        assert shown in {"SloUnreachable", "PromptsRejected"}, (lines, found)

    eventually(status_column, 30, what="STATUS: the worst condition")
    assert "of max-model-len 1,024 tokens" in message, message
    assert "(declared 300/500/600)" in message, message
    observed = live["status"]["observedWorkload"]
    # The served prompts (700 tokens) read from vLLM's 500-1000 bucket; a quarter of the
    # requests refused (the share of their 2-minute rates, the 4xx counter's starting
    # later than the engine's).
    assert 500 <= observed["inputTokens"]["p50"] <= 1000, observed
    assert observed["inputTokens"]["p99"] >= PLANNED_LEN / 2, observed
    assert 0.1 <= observed["rejectedShare"] <= 0.6, observed
    assert f"observed prompts p50/p95/p99 {observed['inputTokens']['p50']:,}/" in message, message
    assert observed["impliedInputTokens"]["p99"] == 2 * PLANNED_LEN, observed

    # replan: auto: the reconciler plans for the implied workload and the pods roll.
    def replanned() -> None:
        deployment = cluster.kubectl_json("get", "deployment", f"{DRIFTED}-l4", "-n", namespace)
        assert _max_model_len(deployment["spec"]["template"]) == REPLANNED_LEN, deployment["spec"]["template"]

    eventually(replanned, 180, interval_s=2, what="the Deployment re-planned to max-model-len 3,072")
    status = cluster.service(namespace, DRIFTED)["status"]
    assert status["plannedWorkload"]["inputTokens"]["p99"] == 2 * PLANNED_LEN, status
    assert [t["maxModelLen"] for t in status["plan"]] == [REPLANNED_LEN]
    address = eventually(lambda: serving(REPLANNED_LEN), 180, what="the rolled pod at max-model-len 3,072")
    refused_before = json.dumps({"model": model, "prompt": "hello " * 1500, "max_tokens": 10}).encode()
    request = urllib.request.Request(
        f"http://{address}/v1/completions",
        data=refused_before,
        method="POST",
        headers={"Content-Type": "application/json"},
    )

    # The stand-in of the rolled pod may still be starting when its address is known: a
    # refused connection is retried, a 400 (the old limit) is not.
    def answered() -> None:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.status == 200
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError as error:
            raise AssertionError(f"the rolled pod's stand-in does not answer yet: {error}") from error

    eventually(answered, 60, what="the rolled pod to serve a prompt refused before")
    reasons = [
        e["reason"]
        for e in cluster.list("v1/events", namespace)
        if e["involvedObject"].get("name") == DRIFTED
    ]
    assert "WorkloadDrift" in reasons and "ReplannedForObservedWorkload" in reasons, reasons
    assert operator.alive(), operator.tail()
