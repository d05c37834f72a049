#!/usr/bin/env python3
"""Hostile model sources in one namespace; another namespace's new service still plans.

The real operator (`inferfleet run`, a child process) against the real control plane
from hack/controlplane (kube-apiserver, etcd, controller manager with its Job controller,
scheduler, KWOK nodes). One tenant's namespace holds services whose sources are hostile,
all at once:

- `--slow` services (default 8, the issue's count) naming a hub that sends one byte
  every 5 s;
- one naming a hub that answers with a 300 MB error body;
- one naming an S3 endpoint (in its Secret) whose listing never ends.

Once every one of their probe pods is reading, another tenant's namespace gets a new
service for a private hub model the catalog lacks (its token in its own Secret). The
benchmark acts as the probe pods' kubelet (tests/toolkit/probe_kubelet.py: KWOK runs no
containers): it runs the real `inferfleet cache probe` per pod against loopback fakes
and posts its termination message into the pod's status.

It prints one JSON document: how long the other tenant's service took from create to
planned (target 10 s), the operator's RSS (sampled every 0.5 s; peak against the chart's
memory limit), each probe's own wall time, peak RSS and verdict, and the hostile
services' verdicts in status.

    python hack/bench/tenant_sources.py               # 8 slow + 1 huge + 1 endless listing
    python hack/bench/tenant_sources.py --slow 20 --probe-deadline-s 30
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.integration.fetcher.hub_server import FakeRepo, HubServer  # noqa: E402
from tests.toolkit.model_sources import (  # noqa: E402
    UNCATALOGUED_MODEL,
    HostileServer,
    HostileState,
    uncatalogued_model_files,
)
from tests.toolkit.probe_kubelet import ProbeKubelet  # noqa: E402

TARGET_PLANNED_S = 10.0
HOSTILE, OTHER = "tenant-hostile", "tenant-other"
OPERATOR_USER = "inferfleet-bench"


def chart_memory_limit_mib() -> float:
    values = yaml.safe_load((REPO / "charts" / "inferfleet" / "values.yaml").read_text())
    limit = str(values["resources"]["limits"]["memory"])
    units = {"Gi": 1024.0, "Mi": 1.0}
    return float(limit[:-2]) * units[limit[-2:]]


def _load_controlplane() -> Any:
    import importlib.util

    name = "inferfleet_bench_controlplane"
    spec = importlib.util.spec_from_file_location(name, REPO / "hack" / "controlplane" / "controlplane.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def service(name: str, namespace: str, model: str, source: str | None = None) -> dict[str, Any]:
    spec_model: dict[str, Any] = {"name": model, "credentialsSecretRef": {"name": "source", "key": "token"}}
    if source is not None:
        spec_model["source"] = source
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": spec_model,
            "workload": {
                "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
                "outputTokens": {"p50": 200, "p95": 400, "p99": 800},
                "peakRequestsPerSecond": 2,
            },
            "tiers": [{"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 2}],
            "cache": {"mode": "none"},
        },
    }


def secret(namespace: str, values: dict[str, str]) -> dict[str, Any]:
    data = {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "source", "namespace": namespace},
        "data": data,
    }


class RssSampler:
    """The operator's RSS every `period_s` (VmRSS), and its high-water mark (VmHWM)."""

    def __init__(self, pid: int, period_s: float = 0.5) -> None:
        self.pid = pid
        self.period_s = period_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self, key: str) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == key:
                return int(value.split()[0]) / 1024
        return 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self._read("VmRSS"))
            except OSError:
                return
            self._stop.wait(self.period_s)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        peak = self._read("VmHWM")
        self._stop.set()
        self._thread.join(5)
        return {
            "rssMiBLast": round(self.samples[-1], 1),
            "rssMiBMaxSampled": round(max(self.samples), 1),
            "peakRssMiB": round(peak, 1),
        }


def wait_for(what: str, check: Any, timeout_s: float, poll_s: float = 0.25) -> float:
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)


def verdict(plane: Any, namespace: str, name: str) -> dict[str, Any]:
    done = plane.kubectl("get", "ifs", name, "-n", namespace, "-o", "json", check=False)
    if done.returncode != 0:
        return {}
    status = json.loads(done.stdout).get("status") or {}
    return {"modelSource": status.get("modelSource") or {}, "plan": status.get("plan") or []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=8, help="services whose source sends 1 byte every 5 s")
    parser.add_argument("--probe-deadline-s", type=int, default=60, help="INFERFLEET_MODEL_PROBE_DEADLINE_S")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cp = _load_controlplane()
    from inferfleet.autoscaling.prometheus.testkit import PrometheusServer

    report: dict[str, Any] = {"benchmark": "tenant-sources", "slowServices": args.slow}
    slow_state = HostileState("slow", interval_s=5.0)
    huge_state = HostileState("huge", size_bytes=300 * 1024 * 1024, status=500)
    endless_state = HostileState("endless-s3", page_keys=1000)
    with (
        cp.ControlPlane(cp.binaries(), options=cp.Options(audit=False)) as plane,
        PrometheusServer([]) as prometheus,
        HubServer() as hub,
        HostileServer(slow_state) as slow,
        HostileServer(huge_state) as huge,
        HostileServer(endless_state) as endless,
    ):
        hub.add_repo(FakeRepo(UNCATALOGUED_MODEL, token="hf_other")).add_commit(uncatalogued_model_files())
        for namespace in (HOSTILE, OTHER):
            plane.kubectl("create", "namespace", namespace)
            plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
        hostile_secret = {
            "token": "hf_hostile",
            "AWS_ACCESS_KEY_ID": "AKIAHOSTILE",
            "AWS_SECRET_ACCESS_KEY": "hostile",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": endless.endpoint,
        }
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(secret(HOSTILE, hostile_secret)))
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(secret(OTHER, {"token": "hf_other"})))

        def environment(namespace: str, pod: Any) -> dict[str, str]:
            source = pod["spec"]["containers"][0]["args"][1]
            if source.startswith("hf://acme/slow-"):
                return {"HF_ENDPOINT": slow.endpoint}
            if source.startswith("hf://acme/huge-"):
                return {"HF_ENDPOINT": huge.endpoint}
            return {"HF_ENDPOINT": hub.endpoint}

        assert plane.pki is not None
        identity = plane.pki.issue("bench", common_name=OPERATOR_USER, groups=["system:masters"])
        kubeconfig = cp.write_kubeconfig(
            plane.workdir / "bench.kubeconfig",
            plane.server,
            plane.pki.ca,
            client=identity,
            user=OPERATOR_USER,
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("INFERFLEET_")},
            "KUBECONFIG": str(kubeconfig),
            "INFERFLEET_LOG_FORMAT": "text",
            "INFERFLEET_LIVENESS_PORT": str(cp.free_port()),
            "INFERFLEET_METRICS_PORT": str(cp.free_port()),
            "INFERFLEET_PROMETHEUS_URL": prometheus.url,
            "INFERFLEET_MODEL_PROBE_DEADLINE_S": str(args.probe_deadline_s),
        }
        log = Path(tempfile.mkdtemp(prefix="inferfleet-bench-")) / "operator.log"
        operator_bin = str(Path(sys.executable).with_name("inferfleet"))
        with log.open("wb") as out:
            process = subprocess.Popen(
                [operator_bin, "run", "--standalone", "--all-namespaces", "--bind-address", "127.0.0.1"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        sampler = RssSampler(process.pid).start()
        try:
            with ProbeKubelet(plane.kubectl, (HOSTILE, OTHER), environment) as kubelet:
                hostile = [service(f"slow-{i}", HOSTILE, f"acme/slow-{i}") for i in range(args.slow)]
                hostile.append(service("huge-0", HOSTILE, "acme/huge-0"))
                hostile.append(service("endless-0", HOSTILE, "acme/endless", source="s3://weights/m"))
                plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(hostile))

                def all_reading() -> bool:
                    """Every hostile source is being read by its probe (not just started:
                    this one host plays every node, and interpreters starting compete for
                    its CPU as pods on separate nodes would not)."""
                    if process.poll() is not None:
                        raise RuntimeError(f"the operator exited: {log.read_text()[-2000:]}")
                    return (
                        slow_state.requests >= args.slow
                        and huge_state.requests >= 1
                        and endless_state.pages >= 1
                    )

                report["hostileProbesStartedS"] = round(wait_for("the hostile probes", all_reading, 180), 1)

                plane.kubectl(
                    "apply", "-f", "-", stdin=json.dumps(service("chat", OTHER, UNCATALOGUED_MODEL))
                )

                def planned() -> bool:
                    found = verdict(plane, OTHER, "chat")
                    return found.get("modelSource", {}).get("state") == "Resolved" and bool(
                        found["plan"] and found["plan"][0].get("feasible")
                    )

                planned_s = wait_for("the other tenant's service to be planned", planned, 300, poll_s=0.5)
                states_then = sorted(
                    verdict(plane, HOSTILE, body["metadata"]["name"]).get("modelSource", {}).get("state", "?")
                    for body in hostile
                )
                (own,) = kubelet.run_of(OTHER)
                report["otherTenant"] = {
                    "plannedS": round(planned_s, 1),
                    # Its probe pod's own run (interpreter start included), which a real
                    # cluster spends on a node of its own; the rest is the operator's.
                    "probeWallS": round(own.wall_s, 1),
                    "operatorS": round(planned_s - own.wall_s, 1),
                    "targetS": TARGET_PLANNED_S,
                    "hostileStatesWhenPlanned": {
                        state: states_then.count(state) for state in set(states_then)
                    },
                }

                def settled() -> bool:
                    return all(
                        verdict(plane, HOSTILE, body["metadata"]["name"]).get("modelSource", {}).get("state")
                        == "Failed"
                        for body in hostile
                    )

                report["hostileSettledS"] = round(
                    wait_for("the hostile verdicts", settled, args.probe_deadline_s + 240, poll_s=2.0), 1
                )
                verdicts = {}
                for body in hostile:
                    source = verdict(plane, HOSTILE, body["metadata"]["name"])["modelSource"]
                    verdicts[body["metadata"]["name"]] = {
                        "reason": source.get("reason"),
                        "message": str(source.get("message", ""))[:160],
                    }
                report["hostileVerdicts"] = verdicts
                report["probes"] = [
                    {
                        "pod": f"{run.namespace}/{run.pod}",
                        "exitCode": run.exit_code,
                        "reason": json.loads(run.message).get("reason") if run.message else None,
                        "wallS": round(run.wall_s, 2),
                        "peakRssMiB": round(run.peak_rss_mib, 1),
                    }
                    for run in sorted(kubelet.runs, key=lambda r: r.pod)
                ]
                report["kubeletErrors"] = kubelet.errors
            report["sources"] = {
                "slowBytesSent": slow_state.bytes_sent,
                "hugeBytesSent": huge_state.bytes_sent,
                "endlessPagesServed": endless_state.pages,
            }
        finally:
            report["operator"] = {**sampler.stop(), "limitMiB": chart_memory_limit_mib()}
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    probes = report.get("probes") or []
    report["meetsTargets"] = bool(
        report.get("otherTenant", {}).get("plannedS", 1e9) <= TARGET_PLANNED_S
        and report["operator"]["peakRssMiB"] < report["operator"]["limitMiB"]
        and all(p["peakRssMiB"] < 512 for p in probes)
    )
    report["host"] = {"cpus": os.cpu_count(), "loadAverage": [round(x, 2) for x in os.getloadavg()]}
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
