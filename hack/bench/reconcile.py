#!/usr/bin/env python3
"""Reconcile benchmark: 1,000 InferenceServices through plan + render + in-memory apply.

Each service is a variant of one of the example CRs (its own name, namespace, peak
rate and replica bounds), submitted to the in-memory cluster and reconciled once by
the production `Reconciler` (get, plan, render, list, diff, server-side apply,
status, events); then every service is reconciled a second time, the steady state
the drift timer sees. Prints one JSON document with per-CR times and the process's
peak RSS against the targets (<= 5 ms per CR, <= 200 MB). The target is judged on
process CPU time per CR: on a shared host, wall time also counts other processes'
turns on the CPU, so both are reported.

    python hack/bench/reconcile.py              # 1,000 services
    python hack/bench/reconcile.py --count 200

`--api-server` runs the real operator (`inferfleet run`, a child process) against a real
kube-apiserver + etcd from hack/controlplane (no controller manager, scheduler or KWOK:
the figures are the operator's and the API server's alone, not pods'), with an empty
but reachable Prometheus. It creates the services first, then starts the operator and
reports:
- the cold pass: wall time until every service reports its generation observed with a
  plan, and the operator's API calls in that time (the API server's audit log, by verb
  and resource), reads and writes;
- the steady pass: one full resync period (every service re-listed and reconciled once
  more) once everything has settled: the writes it made (the goal is zero), by resource;
- the operator process's RSS (current and peak);
- its health during the cold pass: /healthz polled every second (latency, the longest
  stretch without an answer within the probe timeout), and the chart's liveness probe
  played as the kubelet plays it (its period, timeout and failure threshold from the
  chart's values): whether it would have restarted the operator.

The operator runs as the chart runs it: with leader election (`--peering`), here one
replica, which takes the Lease at once.

    python hack/bench/reconcile.py --api-server             # 1,000 services
    python hack/bench/reconcile.py --api-server --cold-only # no steady window

`--failover` runs two replicas (leader election, as the chart does); once the leader has
planned every service it is killed (SIGKILL) and one service, the last the new leader
lists, is edited at once: the report gives the seconds until that edit was handled
(`status.observedGeneration`) and until the other replica held the Lease.

    python hack/bench/reconcile.py --api-server --failover --count 300
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TARGET_MS_PER_CR = 5.0
TARGET_PEAK_RSS_MB = 200.0


def variants(count: int) -> list[dict[str, Any]]:
    """`count` distinct services cycling through the examples."""
    paths = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
    examples = [yaml.safe_load(path.read_text()) for path in paths]
    out = []
    for index in range(count):
        body = copy.deepcopy(examples[index % len(examples)])
        body["metadata"]["name"] = f"{body['metadata']['name'][:50]}-{index:04d}"
        body["metadata"]["namespace"] = f"team-{index % 50:02d}"
        workload = body["spec"]["workload"]
        scale = 0.5 + (index % 7) / 4
        workload["peakRequestsPerSecond"] = round(workload["peakRequestsPerSecond"] * scale, 2)
        for tier in body["spec"]["tiers"]:
            tier["maxReplicas"] = tier.get("maxReplicas", 4) + index % 3
        out.append(body)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_pass(reconcile: Any, keys: list[tuple[str, str]]) -> tuple[list[float], float]:
    """Wall milliseconds per service, and the pass's mean CPU milliseconds per service."""
    gc.collect()  # each pass pays for its own garbage, not for what came before it
    times_ms = []
    cpu_start = time.process_time()
    for namespace, name in keys:
        start = time.perf_counter()
        reconcile(namespace, name)
        times_ms.append((time.perf_counter() - start) * 1000)
    return times_ms, (time.process_time() - cpu_start) * 1000 / len(keys)


def main() -> int:
    parser = argparse.ArgumentParser(description="Reconcile benchmark (plan + render + in-memory apply).")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument(
        "--api-server", action="store_true", help="the real operator against a real API server"
    )
    parser.add_argument(
        "--resync-s", type=float, default=60.0, help="steady window: one resync period (+ margin)"
    )
    parser.add_argument("--cold-only", action="store_true", help="stop after the cold pass")
    parser.add_argument("--failover", action="store_true", help="two replicas; kill the leader, edit")
    args = parser.parse_args()
    if args.api_server and args.failover:
        return failover_benchmark(args.count)
    if args.api_server:
        return api_server_benchmark(args.count, args.resync_s, cold_only=args.cold_only)

    from inferfleet.cluster import InMemoryCluster
    from inferfleet.config import OperatorSettings
    from inferfleet.controller.reconciler import Reconciler
    from inferfleet.kubedata import ObjectRef

    settings = OperatorSettings()
    cluster = InMemoryCluster()
    reconciler = Reconciler(cluster, settings)
    keys = []
    for body in variants(args.count):
        namespace = body["metadata"]["namespace"]
        if cluster.get(ObjectRef("v1", "Namespace", None, namespace)) is None:
            cluster.add_namespace(namespace)
        cluster.user_apply(body)
        keys.append((body["metadata"]["namespace"], body["metadata"]["name"]))
    # The cluster holds its own copy; the benchmark keeps only the names, so the peak
    # RSS is the operator's (and the in-memory API server's), not the inputs'.

    first_ms, first_cpu_ms = timed_pass(reconciler.reconcile, keys)
    steady_ms, steady_cpu_ms = timed_pass(reconciler.reconcile, keys)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    report = {
        "benchmark": "reconcile",
        "services": args.count,
        "ownedObjects": len(cluster.objects) - args.count,
        "firstPass": {
            "cpuMsPerCR": round(first_cpu_ms, 3),
            "wallMsPerCR": round(statistics.fmean(first_ms), 3),
            "p50Ms": round(percentile(first_ms, 0.5), 3),
            "p99Ms": round(percentile(first_ms, 0.99), 3),
            "totalS": round(sum(first_ms) / 1000, 3),
        },
        "steadyPass": {
            "cpuMsPerCR": round(steady_cpu_ms, 3),
            "wallMsPerCR": round(statistics.fmean(steady_ms), 3),
            "p99Ms": round(percentile(steady_ms, 0.99), 3),
        },
        "peakRssMB": round(peak_rss_mb, 1),
        "targets": {"msPerCR": TARGET_MS_PER_CR, "peakRssMB": TARGET_PEAK_RSS_MB},
        "meetsTargets": max(first_cpu_ms, steady_cpu_ms) <= TARGET_MS_PER_CR
        and peak_rss_mb <= TARGET_PEAK_RSS_MB,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


# --- against a real API server ------------------------------------------------------------

OPERATOR_USER = "inferfleet-bench"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def _load_controlplane() -> Any:
    import importlib.util

    name = "inferfleet_bench_controlplane"
    spec = importlib.util.spec_from_file_location(name, REPO / "hack" / "controlplane" / "controlplane.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _audit(path: Path, since: int, until: int | None = None) -> list[dict[str, Any]]:
    """The operator's completed requests between two offsets of the audit log."""
    out = []
    with path.open("rb") as handle:
        handle.seek(since)
        data = handle.read() if until is None else handle.read(max(0, until - since))
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") == "ResponseComplete" and event["user"]["username"] == OPERATOR_USER:
            out.append(event)
    return out


def _object_name(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    return f"{ref.get('namespace')}/{ref.get('name')}"


def _call(event: dict[str, Any]) -> str:
    """'VERB resource[/subresource]', the key the report counts calls by."""
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", event.get("requestURI", "?"))
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return f"{event['verb']} {resource}"


def _by_count(keys: list[str]) -> dict[str, int]:
    return dict(sorted(Counter(keys).items(), key=lambda item: -item[1]))


def _tally(events: list[dict[str, Any]]) -> dict[str, Any]:
    writes = sum(1 for e in events if e["verb"] in WRITE_VERBS)
    # Who wrote status: the autoscaler's patches carry its decision, the reconciler's do not.
    status = [
        e
        for e in events
        if (e.get("objectRef") or {}).get("subresource") == "status" and e["verb"] == "patch"
    ]
    by_reconciler = [
        e for e in status if "lastScalingDecision" not in json.dumps(e.get("requestObject") or {})
    ]
    by_autoscaler = len(status) - len(by_reconciler)
    return {
        # What the reconciler's status writes changed, a few of them: in a steady state each
        # one is a write that should not have happened.
        "reconcilerStatusSamples": [
            {"object": _object_name(e), "patch": e.get("requestObject")} for e in by_reconciler[:3]
        ],
        "calls": len(events),
        "reads": len(events) - writes,
        "writes": writes,
        # 409s: a write that lost a race (two passes of one service, or a pass and the
        # autoscaler) and must be redone.
        "conflicts": _by_count(
            [_call(e) for e in events if (e.get("responseStatus") or {}).get("code") == 409]
        ),
        "statusWrites": {"autoscaler": by_autoscaler, "reconciler": len(by_reconciler)},
        "byCall": _by_count([_call(e) for e in events]),
    }


def _rss_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rssMB": fields.get("VmRSS", 0.0), "peakRssMB": fields.get("VmHWM", 0.0)}


class HealthWatch:
    """/healthz during the cold pass: a 1 s poller (latency, longest unanswered stretch)
    and the chart's liveness probe as the kubelet runs it (consecutive failures)."""

    def __init__(self, url: str) -> None:
        import threading

        values = yaml.safe_load((REPO / "charts" / "inferfleet" / "values.yaml").read_text())
        self.probe = dict(values["livenessProbe"])
        self.url = url
        self.stop = threading.Event()
        self.latencies_s: list[float] = []
        self.failures = 0
        self.longest_unanswered_s = 0.0
        self.kubelet_failures = 0
        self.kubelet_worst_streak = 0
        self._threads = [
            threading.Thread(target=self._poll, daemon=True),
            threading.Thread(target=self._kubelet, daemon=True),
        ]

    def _ask(self, timeout_s: float) -> float | None:
        import urllib.request

        started = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=timeout_s) as answer:
                answer.read()
                return time.monotonic() - started if answer.status == 200 else None
        except OSError:
            return None

    def _poll(self) -> None:
        last_answer = time.monotonic()
        while not self.stop.wait(1.0):
            latency = self._ask(float(self.probe["timeoutSeconds"]))
            now = time.monotonic()
            if latency is None:
                self.failures += 1
                self.longest_unanswered_s = max(self.longest_unanswered_s, now - last_answer)
            else:
                self.latencies_s.append(latency)
                last_answer = now

    def _kubelet(self) -> None:
        streak = 0
        while not self.stop.wait(float(self.probe["periodSeconds"])):
            if self._ask(float(self.probe["timeoutSeconds"])) is None:
                streak += 1
                self.kubelet_failures += 1
                self.kubelet_worst_streak = max(self.kubelet_worst_streak, streak)
            else:
                streak = 0

    def __enter__(self) -> HealthWatch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(30)

    def report(self) -> dict[str, Any]:
        latencies = self.latencies_s or [0.0]
        threshold = int(self.probe["failureThreshold"])
        return {
            "polls": len(self.latencies_s) + self.failures,
            "unanswered": self.failures,
            "latencyP50S": round(percentile(latencies, 0.5), 3),
            "latencyP99S": round(percentile(latencies, 0.99), 3),
            "latencyMaxS": round(max(latencies), 3),
            "longestUnansweredS": round(self.longest_unanswered_s, 1),
            "livenessProbe": {
                **self.probe,
                "failed": self.kubelet_failures,
                "worstConsecutiveFailures": self.kubelet_worst_streak,
                "wouldRestart": self.kubelet_worst_streak >= threshold,
            },
        }


def api_server_benchmark(count: int, resync_s: float, *, cold_only: bool = False) -> int:
    import os
    import signal
    import subprocess
    import tempfile

    from inferfleet.autoscaling.prometheus.testkit import PrometheusServer

    # A plain `kill` still stops every process this run started (the context managers).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cp = _load_controlplane()
    # Status patches are logged with their bodies: a steady write is then attributed to
    # the autoscaler's decision heartbeat or to the reconciler.
    options = cp.Options(
        controllers=False,
        kwok=False,
        crds=True,
        audit=True,
        audit_bodies=(("inferfleet.dev", "inferenceservices/status"),),
    )
    report: dict[str, Any] = {"benchmark": "reconcile", "mode": "api-server", "services": count}
    started_s = time.monotonic()
    with cp.ControlPlane(cp.binaries(), options=options) as plane, PrometheusServer([]) as prometheus:
        report["controlPlaneStartS"] = round(time.monotonic() - started_s, 1)
        bodies = variants(count)
        for namespace in sorted({b["metadata"]["namespace"] for b in bodies}):
            plane.kubectl("create", "namespace", namespace)
        for start in range(0, len(bodies), 100):
            chunk = yaml.safe_dump_all(bodies[start : start + 100], sort_keys=False)
            plane.kubectl("apply", "--server-side", "--field-manager=bench", "-f", "-", stdin=chunk)
        assert plane.pki is not None
        identity = plane.pki.issue("bench", common_name=OPERATOR_USER, groups=["system:masters"])
        kubeconfig = cp.write_kubeconfig(
            plane.workdir / "bench.kubeconfig",
            plane.server,
            plane.pki.ca,
            client=identity,
            user=OPERATOR_USER,
        )
        liveness_port = cp.free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "INFERFLEET_LOG_FORMAT": "text",
            "INFERFLEET_LIVENESS_PORT": str(liveness_port),
            "INFERFLEET_METRICS_PORT": str(cp.free_port()),
            "INFERFLEET_PROMETHEUS_URL": prometheus.url,
        }
        env.pop("INFERFLEET_NAMESPACES", None)
        log = Path(tempfile.mkdtemp(prefix="inferfleet-bench-")) / "operator.log"
        mark = plane.audit_log.stat().st_size
        operator_bin = str(Path(sys.executable).with_name("inferfleet"))
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    operator_bin,
                    "run",
                    "--peering=inferfleet-bench",
                    "--all-namespaces",
                    "--bind-address",
                    "127.0.0.1",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        health = HealthWatch(f"http://127.0.0.1:{liveness_port}/healthz")
        try:
            cold_started = time.monotonic()
            # Watched from its first answer on (the chart's probe waits initialDelaySeconds).
            while health._ask(1.0) is None:
                if process.poll() is not None or time.monotonic() - cold_started > 120:
                    raise RuntimeError(f"no /healthz: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            report["healthFirstAnswerS"] = round(time.monotonic() - cold_started, 1)
            health.__enter__()
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the operator exited: {log.read_text()[-2000:]}")
                listed = plane.kubectl_json("get", "ifs", "-A")["items"]
                done = sum(
                    1
                    for item in listed
                    if (item.get("status") or {}).get("observedGeneration") == item["metadata"]["generation"]
                    and (item.get("status") or {}).get("planHash")
                )
                if done == count:
                    break
                print(
                    f"cold pass: {done}/{count} after {time.monotonic() - cold_started:.0f}s", file=sys.stderr
                )
                time.sleep(5)
            cold_wall_s = time.monotonic() - cold_started
            health.__exit__()
            report["health"] = health.report()
            cold_end = plane.audit_log.stat().st_size
            cold = _tally(_audit(plane.audit_log, mark, cold_end))
            report["coldPass"] = {
                "wallS": round(cold_wall_s, 1),
                "msPerService": round(cold_wall_s * 1000 / count, 1),
                **cold,
            }
            if cold_only:
                report["operator"] = _rss_mb(process.pid)
                return _print(report)
            # Settle: the autoscaler's first decision for every service (one status write each).
            while True:
                listed = plane.kubectl_json("get", "ifs", "-A")["items"]
                if all((item.get("status") or {}).get("lastScalingDecision") for item in listed):
                    break
                time.sleep(2)
            time.sleep(5)
            steady_mark = plane.audit_log.stat().st_size
            time.sleep(resync_s + 10)
            steady = _tally(_audit(plane.audit_log, steady_mark))
            resynced = steady["byCall"].get("get inferenceservices", 0)
            report["steadyPass"] = {"windowS": resync_s + 10, "servicesReReconciled": resynced, **steady}
            report["operator"] = _rss_mb(process.pid)
        finally:
            health.stop.set()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    return _print(report)


def _planned(plane: Any) -> tuple[int, list[dict[str, Any]]]:
    listed: list[dict[str, Any]] = plane.kubectl_json("get", "ifs", "-A")["items"]
    done = sum(
        1
        for item in listed
        if (item.get("status") or {}).get("observedGeneration") == item["metadata"]["generation"]
        and (item.get("status") or {}).get("planHash")
    )
    return done, listed


def failover_benchmark(count: int) -> int:
    import os
    import subprocess
    import tempfile

    from inferfleet.autoscaling.prometheus.testkit import PrometheusServer

    run_args = [str(Path(sys.executable).with_name("inferfleet")), "run", "--peering=inferfleet-bench"]
    signal_module = __import__("signal")
    signal_module.signal(signal_module.SIGTERM, lambda *_: sys.exit(143))
    cp = _load_controlplane()
    options = cp.Options(controllers=False, kwok=False, crds=True, audit=False)
    report: dict[str, Any] = {"benchmark": "reconcile", "mode": "failover", "services": count}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    with cp.ControlPlane(cp.binaries(), options=options) as plane, PrometheusServer([]) as prometheus:
        bodies = variants(count)
        for namespace in sorted({b["metadata"]["namespace"] for b in bodies}):
            plane.kubectl("create", "namespace", namespace)
        for start in range(0, len(bodies), 100):
            chunk = yaml.safe_dump_all(bodies[start : start + 100], sort_keys=False)
            plane.kubectl("apply", "--server-side", "--field-manager=bench", "-f", "-", stdin=chunk)
        assert plane.pki is not None
        identity = plane.pki.issue("bench", common_name=OPERATOR_USER, groups=["system:masters"])
        kubeconfig = cp.write_kubeconfig(
            plane.workdir / "bench.kubeconfig",
            plane.server,
            plane.pki.ca,
            client=identity,
            user=OPERATOR_USER,
        )
        logs = Path(tempfile.mkdtemp(prefix="inferfleet-bench-"))
        try:
            for name in ("replica-a", "replica-b"):
                env = {
                    **os.environ,
                    "KUBECONFIG": str(kubeconfig),
                    "INFERFLEET_LOG_FORMAT": "text",
                    "INFERFLEET_LIVENESS_PORT": str(cp.free_port()),
                    "INFERFLEET_METRICS_PORT": str(cp.free_port()),
                    "INFERFLEET_PROMETHEUS_URL": prometheus.url,
                    "POD_NAME": name,
                    "POD_NAMESPACE": "default",
                }
                env.pop("INFERFLEET_NAMESPACES", None)
                with (logs / f"{name}.log").open("wb") as out:
                    processes[name] = subprocess.Popen(
                        [*run_args, "--all-namespaces", "--bind-address", "127.0.0.1"],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
            started = time.monotonic()
            while (done := _planned(plane)[0]) < count:
                print(f"cold pass: {done}/{count} after {time.monotonic() - started:.0f}s", file=sys.stderr)
                time.sleep(5)
            report["coldPassS"] = round(time.monotonic() - started, 1)
            time.sleep(10)  # settled: the autoscaler's first decisions written

            def holder() -> str:
                lease = plane.kubectl_json("get", "lease", "inferfleet-bench", "-n", "default")
                return str(lease["spec"].get("holderIdentity") or "")

            leader = holder()
            other = next(name for name in processes if name != leader)
            # The service the new leader lists last (kopf lists by namespace, then name).
            last = max(bodies, key=lambda b: (b["metadata"]["namespace"], b["metadata"]["name"]))
            namespace, name = last["metadata"]["namespace"], last["metadata"]["name"]
            replicas = int(last["spec"]["tiers"][0].get("maxReplicas", 4)) + 1
            edit = f'[{{"op": "replace", "path": "/spec/tiers/0/maxReplicas", "value": {replicas}}}]'
            processes[leader].kill()
            killed = time.monotonic()
            plane.kubectl("patch", "ifs", name, "-n", namespace, "--type=json", "-p", edit)
            took_over_s: float | None = None
            while True:
                now = time.monotonic() - killed
                if took_over_s is None and holder() == other:
                    took_over_s = now
                body = plane.kubectl_json("get", "ifs", name, "-n", namespace)
                if (body.get("status") or {}).get("observedGeneration") == body["metadata"]["generation"]:
                    break
                if now > 300:
                    raise RuntimeError("the edit was not handled within 300 s")
                time.sleep(0.2)
            report["failover"] = {
                "leaseTakenOverS": round(took_over_s or now, 1),
                "editHandledS": round(now, 1),
                "edited": f"{namespace}/{name}",
            }
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            for process in processes.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    return _print(report)


def _print(report: dict[str, Any]) -> int:
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
