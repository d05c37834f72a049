"""Metrics for the fake pods: vLLM stand-ins on loopback and a real Prometheus.

KWOK's pods run nothing. `StandinBridge` plays the kubelet's part for the vLLM pods on
fake nodes: once such a pod is Ready it starts the vLLM stand-in
(hack/vllm-standin/server.py) with the pod's own container arguments on a free loopback
port, and writes that address into the pod's annotation `e2e.inferfleet.dev/address`
(the pod network standing in). When the pod goes, so does the process.

`PodMonitorPrometheus` is Debian's Prometheus, configured the way prometheus-operator
would configure it from the PodMonitors the operator created: the PodMonitor's selector
and port, its own relabelings, then `__address__` from the annotation above. Debian
builds Prometheus without Kubernetes service discovery, so pod discovery is done here:
the live Pod objects are listed from the API server and written as file_sd targets
carrying the `__meta_kubernetes_pod_*` labels kubernetes_sd (role pod) would give them.
So the series carry exactly the labels the operator's queries expect only if the
operator's PodMonitor is right.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import threading
import urllib.error
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfleet.autoscaling.prometheus import testkit
from inferfleet.autoscaling.prometheus.testkit import PrometheusServer
from tests.conftest import REPO_ROOT
from tests.e2e.harness import Cluster, controlplane, ready

logger = logging.getLogger(__name__)

STANDIN = REPO_ROOT / "hack" / "vllm-standin" / "server.py"
ADDRESS_ANNOTATION = "e2e.inferfleet.dev/address"
VLLM_SELECTOR = "inferfleet.dev/component=vllm"
FAKE_NODE_PREFIX = "e2e-"
# Seconds per generated token in the stand-ins; a request's max_tokens sets how long it
# holds one of the pod's --max-num-seqs slots.
SECONDS_PER_TOKEN = 0.01
# Scrape at most this often apart (a PodMonitor's 15 s would slow every test down).
MAX_SCRAPE_INTERVAL_S = 2


def sanitize(label: str) -> str:
    """Kubernetes label name -> Prometheus's meta label suffix."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


@dataclass
class Standin:
    uid: str
    namespace: str
    pod: str
    address: str
    process: subprocess.Popen[bytes]


class StandinBridge:
    """One stand-in process per Ready vLLM pod on a fake node (see the module docstring)."""

    def __init__(self, cluster: Cluster, workdir: Path, interval_s: float = 1.0) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.interval_s = interval_s
        self.standins: dict[str, Standin] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="standin-bridge", daemon=True)
        self.errors: list[str] = []

    def start(self) -> StandinBridge:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for standin in list(self.standins.values()):
            self._retire(standin)

    def address_of(self, namespace: str, pod: str) -> str | None:
        for standin in self.standins.values():
            if standin.namespace == namespace and standin.pod == pod:
                return standin.address
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as error:  # keep the bridge alive; tests see missing metrics
                self.errors.append(repr(error))
                logger.warning("stand-in bridge: %r", error)
            self._stop.wait(self.interval_s)

    def sync(self) -> None:
        pods = self.cluster.list("v1/pods", None, VLLM_SELECTOR)
        wanted = {
            pod["metadata"]["uid"]: pod
            for pod in pods
            if str(pod["spec"].get("nodeName", "")).startswith(FAKE_NODE_PREFIX)
            and ready(pod)
            and not pod["metadata"].get("deletionTimestamp")
        }
        for uid in list(self.standins):
            if uid not in wanted or self.standins[uid].process.poll() is not None:
                self._retire(self.standins.pop(uid))
        for uid, pod in wanted.items():
            standin = self.standins.get(uid)
            if standin is None:
                standin = self.standins[uid] = self._start(pod)
            if (pod["metadata"].get("annotations") or {}).get(ADDRESS_ANNOTATION) != standin.address:
                self.cluster.core().patch_namespaced_pod(
                    standin.pod,
                    standin.namespace,
                    {"metadata": {"annotations": {ADDRESS_ANNOTATION: standin.address}}},
                )

    def _start(self, pod: Mapping[str, Any]) -> Standin:
        container = next(c for c in pod["spec"]["containers"] if c["name"] == "vllm")
        port = controlplane.free_port()
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        log = self.workdir / "standins" / f"{namespace}.{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        args = [*(container.get("args") or []), "--host", "127.0.0.1", "--port", str(port)]
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, str(STANDIN), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={"STANDIN_SECONDS_PER_TOKEN": str(SECONDS_PER_TOKEN), "PATH": "/usr/bin:/bin"},
            )
        return Standin(pod["metadata"]["uid"], namespace, name, f"127.0.0.1:{port}", process)

    @staticmethod
    def _retire(standin: Standin) -> None:
        if standin.process.poll() is None:
            standin.process.terminate()
            try:
                standin.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                standin.process.kill()
                standin.process.wait()


# --- Prometheus configured from PodMonitors ---------------------------------------------------


def pod_targets(pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """file_sd target groups with kubernetes_sd's role=pod meta labels: one per container port."""
    return testkit.pod_targets(pods)


def scrape_jobs(
    pod_monitor: Mapping[str, Any],
    targets_files: Sequence[Path],
    settings: testkit.PrometheusSettings | None = None,
) -> list[dict[str, Any]]:
    """What prometheus-operator generates for one PodMonitor (`testkit`), the pods it may
    discover listed in `targets_files`. The suite's pod network: only pods with a
    running stand-in (or another server a test names in the annotation), at that address."""
    annotation = f"__meta_kubernetes_pod_annotation_{sanitize(ADDRESS_ANNOTATION)}"
    files = [str(path) for path in targets_files]
    return testkit.pod_monitor_scrape_configs(
        pod_monitor,
        {"file_sd_configs": [{"files": files, "refresh_interval": "1s"}]},
        prometheus=settings,
        discovery_relabelings=[
            {"action": "keep", "source_labels": [annotation], "regex": ".+"},
            {"source_labels": [annotation], "target_label": "__address__"},
        ],
        max_interval_s=MAX_SCRAPE_INTERVAL_S,
    )


class PodMonitorPrometheus:
    """A Prometheus whose scrape jobs follow the PodMonitors in `namespaces` (None: all)."""

    def __init__(
        self,
        cluster: Cluster,
        workdir: Path,
        namespaces: Iterable[str] | None = None,
        interval_s: float = 1.0,
        settings: testkit.PrometheusSettings | None = None,
    ) -> None:
        self.cluster = cluster
        # The Prometheus CR's fields that change the generated config (namespace enforcement).
        self.settings = settings
        self.namespaces = None if namespaces is None else tuple(namespaces)
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.interval_s = interval_s
        self.server = PrometheusServer([], scrape_interval_s=1.0, workdir=workdir)
        self._jobs: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podmonitor-prometheus", daemon=True)
        self.errors: list[str] = []

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> PodMonitorPrometheus:
        self.server.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop Prometheus (its data stays for a restart) and the config follower."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.server.stop()

    def close(self) -> None:
        self.stop()
        self.server.close()

    def _pod_monitors(self) -> list[dict[str, Any]]:
        if self.namespaces is None:
            return self.cluster.list("monitoring.coreos.com/v1/podmonitors")
        out: list[dict[str, Any]] = []
        for namespace in self.namespaces:
            out += self.cluster.list("monitoring.coreos.com/v1/podmonitors", namespace)
        return out

    def sync(self) -> None:
        jobs: list[dict[str, Any]] = []
        monitors = sorted(
            self._pod_monitors(), key=lambda m: (m["metadata"]["namespace"], m["metadata"]["name"])
        )
        # Each monitor's own namespace, and the ones its namespaceSelector names.
        seen = {m["metadata"]["namespace"] for m in monitors}
        for monitor in monitors:
            seen.update((monitor["spec"].get("namespaceSelector") or {}).get("matchNames") or [])
        for namespace in sorted(seen):
            targets = pod_targets(self.cluster.list("v1/pods", namespace))
            path = self.workdir / f"targets-{namespace}.json"
            text = json.dumps(targets, sort_keys=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                scratch = path.with_suffix(".tmp")
                scratch.write_text(text, encoding="utf-8")
                scratch.replace(path)  # Prometheus never reads half a file
        for monitor in monitors:
            selected = (monitor["spec"].get("namespaceSelector") or {}).get("matchNames") or []
            namespaces = sorted({monitor["metadata"]["namespace"], *selected})
            files = [self.workdir / f"targets-{namespace}.json" for namespace in namespaces]
            jobs += scrape_jobs(monitor, files, self.settings)
        if jobs != self._jobs:
            self.server.reload(jobs)
            self._jobs = jobs

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except (ValueError, OSError, urllib.error.URLError) as error:
                self.errors.append(repr(error))
            except Exception as error:  # the API server briefly unavailable, ...
                self.errors.append(repr(error))
            self._stop.wait(self.interval_s)

    def query(self, promql: str) -> list[Any]:
        result: list[Any] = self.server.api("/api/v1/query", query=promql)["data"]["result"]
        return result

    def targets_up(self) -> list[dict[str, Any]]:
        targets = self.server.api("/api/v1/targets", state="active")["data"]["activeTargets"]
        return [t for t in targets if t.get("health") == "up"]
