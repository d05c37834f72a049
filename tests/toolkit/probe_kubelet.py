"""The kubelet of the config.json probe's pods, for a cluster whose nodes are KWOK's.

KWOK runs no containers, so the suite does what a kubelet would for each probe pod the
Job controller creates (label `inferfleet.dev/component=model-probe`): once the pod is
Running on its node, it runs the pod's own command (`inferfleet cache probe` with the
pod's arguments) as a local process, with the pod's Secret volume as files (read from
the API server as the admin, written where the arguments point) and the pod's env, then
reports how the container ended in the pod's status: `terminated` with the exit code and
the termination message (at most 4,096 bytes, as the kubelet keeps), phase Succeeded or
Failed. Sources are reached on loopback: `environment(namespace, pod)` adds what points
the probe at a fake (HF_ENDPOINT, STORAGE_EMULATOR_HOST).

Each run is measured: its wall time (interpreter start included) and the probe's own
peak RSS, as its log states it (VmHWM: since exec; getrusage of a child would count the
forking parent's pages too).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROBE_SELECTOR = "inferfleet.dev/component=model-probe"
CREDENTIALS_MOUNT = "/var/run/secrets/inferfleet/source"
TERMINATION_MESSAGE_BYTES = 4096
_PEAK = re.compile(r"peak RSS ([\d.]+) MiB")
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@dataclass(frozen=True)
class ProbeRun:
    namespace: str
    pod: str
    exit_code: int
    message: str
    wall_s: float
    peak_rss_mib: float


@dataclass
class ProbeKubelet:
    """`with ProbeKubelet(cluster.kubectl, namespaces, environment):` runs every probe pod
    in `namespaces` once (concurrently, one thread per pod) until the block ends."""

    kubectl: Kubectl
    namespaces: tuple[str, ...]
    environment: Callable[[str, Mapping[str, Any]], dict[str, str]]
    poll_s: float = 0.5
    runs: list[ProbeRun] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ProbeKubelet:
        self._thread = threading.Thread(target=self._loop, name="probe-kubelet", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            for process in self._processes:
                if process.poll() is None:
                    process.kill()  # our own child, by its handle

    def run_of(self, namespace: str) -> list[ProbeRun]:
        with self._lock:
            return [run for run in self.runs if run.namespace == namespace]

    def _loop(self) -> None:
        while not self._stop.is_set():
            for namespace in self.namespaces:
                try:
                    listed = self.kubectl(
                        "get", "pods", "-n", namespace, "-l", PROBE_SELECTOR, "-o", "json", check=False
                    )
                    pods = json.loads(listed.stdout or "{}").get("items") or []
                except ValueError:
                    continue
                for pod in pods:
                    key = (namespace, pod["metadata"]["name"])
                    status = pod.get("status") or {}
                    # Started on its node (KWOK's pod-start stage gives it an IP), not yet ended.
                    if key in self._seen or status.get("phase") != "Running" or not status.get("podIP"):
                        continue
                    self._seen.add(key)
                    threading.Thread(target=self._run, args=(pod,), daemon=True).start()
            self._stop.wait(self.poll_s)

    def _run(self, pod: Mapping[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            self._run_pod(pod)
        except Exception as error:  # reported, never swallowed: the test reads `errors`
            with self._lock:
                self.errors.append(f"{namespace}/{name}: {type(error).__name__}: {error}")

    def _secret_files(self, pod: Mapping[str, Any], scratch: Path) -> Path:
        """The pod's Secret volume as the kubelet mounts it: one file per key."""
        target = scratch / "secret"
        target.mkdir()
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes") or []:
            secret = volume.get("secret")
            if not secret:
                continue
            found = self.kubectl(
                "get", "secret", secret["secretName"], "-n", namespace, "-o", "json", check=False
            )
            if found.returncode != 0:
                raise RuntimeError(f"Secret {secret['secretName']} not found: the pod would not start")
            for key, value in (json.loads(found.stdout).get("data") or {}).items():
                (target / key).write_bytes(base64.b64decode(value))
        return target

    def _run_pod(self, pod: Mapping[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        (container,) = pod["spec"]["containers"]
        with tempfile.TemporaryDirectory(prefix="probe-kubelet-") as raw:
            scratch = Path(raw)
            secret = self._secret_files(pod, scratch)
            (scratch / "tmp").mkdir()
            log = scratch / "termination-log"

            def local(value: str) -> str:
                """A path inside the pod, as the same file here."""
                if value.startswith(CREDENTIALS_MOUNT):
                    return str(secret) + value[len(CREDENTIALS_MOUNT) :]
                if value == "/tmp" or value.startswith("/tmp/"):
                    return str(scratch / "tmp") + value[len("/tmp") :]
                return value

            env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HF_", "GOOGLE_"))}
            env.update({item["name"]: local(item.get("value", "")) for item in container.get("env") or []})
            env.update(self.environment(namespace, pod))
            binary = str(Path(sys.executable).with_name(container["command"][0]))
            args = [
                binary,
                *container["command"][1:],
                *map(local, container["args"]),
                "--termination-log",
                str(log),
            ]
            started = time.monotonic()
            started_at = _now()
            with (scratch / "stderr").open("wb") as stderr:
                process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
            with self._lock:
                self._processes.append(process)
            code = process.wait()
            wall_s = time.monotonic() - started
            found = _PEAK.search((scratch / "stderr").read_text(errors="replace"))
            peak_rss_mib = float(found.group(1)) if found else float("nan")
            message = (
                log.read_bytes()[:TERMINATION_MESSAGE_BYTES].decode("utf-8", "replace")
                if log.exists()
                else ""
            )
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started_at,
            "finishedAt": _now(),
        }
        if message:
            terminated["message"] = message
        patch = {
            "status": {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": _now(),
                    },
                    {"type": "ContainersReady", "status": "False", "reason": "PodCompleted"},
                ],
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "ready": False,
                        "started": False,
                        "restartCount": 0,
                        "state": {"terminated": terminated},
                    }
                ],
            }
        }
        self.kubectl(
            "patch",
            "pod",
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )
        with self._lock:
            self.runs.append(ProbeRun(namespace, name, code, message, wall_s, peak_rss_mib))


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
