"""Probes and shutdown: when a vLLM pod counts as started, ready, alive and drained.

vLLM binds its port only after the engine is built, so `/health` answering 200 means
the weights are loaded. Readiness goes one step further and checks that `/v1/models`
lists the served model name: a pod whose server is up with the wrong (or no) model
must never receive traffic. That check is an exec probe running a few lines of Python
with the interpreter every vLLM image ships, because an httpGet probe can only look at
the status code, not the body. It costs one short process every period, which is small
next to a GPU server.
"""

from __future__ import annotations

import math
from typing import Any

from inferfleet.api import InferenceService, TierPlan

HEALTH_PATH = "/health"
PROBE_PERIOD_S = 10
PROBE_TIMEOUT_S = 5
# A startup budget below this is unrealistic even for a tiny model on a warm node.
STARTUP_MIN_S = 120
# Cold-start estimates miss slow image pulls and cold caches; allow twice the estimate.
STARTUP_SAFETY_FACTOR = 2.0
# Bounds on the time given to in-flight requests when a pod is stopped.
DRAIN_MIN_S = 30
DRAIN_MAX_S = 900
# Time for endpoint controllers and proxies to stop sending new requests.
ENDPOINT_PROPAGATION_S = 5
# After the drain, vLLM itself needs a moment to exit on SIGTERM.
SHUTDOWN_MARGIN_S = 30

# With an API key (VLLM_API_KEY from a Secret, spec.serving.env), vLLM guards every path
# under /v1 and leaves /health and /metrics open (AuthenticationMiddleware; vLLM reads
# --api-key or VLLM_API_KEY: vllm/entrypoints/openai/api_server.py). The probe runs inside
# the container, so it has the same variable and sends it as vLLM expects (Authorization:
# Bearer); without one it sends none.
READINESS_SCRIPT = """\
import json, os, sys, urllib.request as r
base = "http://127.0.0.1:%s" % sys.argv[1]
r.urlopen(base + "/health", timeout=3).read()
key = os.environ.get("VLLM_API_KEY")
headers = {"Authorization": "Bearer " + key} if key else {}
models = json.load(r.urlopen(r.Request(base + "/v1/models", headers=headers), timeout=3))
sys.exit(0 if any(m.get("id") == sys.argv[2] for m in models.get("data", [])) else 1)
"""

# Wait until vLLM reports no running or waiting requests (or the budget runs out),
# then let the kubelet send SIGTERM.
DRAIN_SCRIPT = """\
import sys, time, urllib.request as r
port, budget, settle = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
time.sleep(settle)
deadline = time.monotonic() + budget
while time.monotonic() < deadline:
    try:
        text = r.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=3).read().decode()
    except Exception:
        break
    busy = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting{")))
    if busy == 0:
        break
    time.sleep(1)
"""


def startup_budget_s(tier: TierPlan) -> int:
    """Seconds the startup probe tolerates, from the tier's cold-start estimate."""
    return max(STARTUP_MIN_S, math.ceil(tier.cold_start_seconds * STARTUP_SAFETY_FACTOR))


def drain_budget_s(service: InferenceService) -> int:
    """Longest a request can still run: TTFT SLO plus p99 output at the ITL SLO."""
    workload = service.spec.workload
    longest_s = (workload.slo.ttft_p99_ms + workload.output_tokens.p99 * workload.slo.itl_p99_ms) / 1000
    return min(DRAIN_MAX_S, max(DRAIN_MIN_S, math.ceil(longest_s)))


def termination_grace_s(service: InferenceService) -> int:
    return ENDPOINT_PROPAGATION_S + drain_budget_s(service) + SHUTDOWN_MARGIN_S


def startup_probe(tier: TierPlan, port_name: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port_name},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": math.ceil(startup_budget_s(tier) / PROBE_PERIOD_S),
    }


def readiness_probe(port: int, served_name: str) -> dict[str, Any]:
    return {
        "exec": {"command": ["python3", "-c", READINESS_SCRIPT, str(port), served_name]},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": 3,
        "successThreshold": 1,
    }


def liveness_probe(port_name: str) -> dict[str, Any]:
    # Only an engine that died (503) or a hung server fails this; a busy server answers.
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port_name},
        "periodSeconds": 15,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": 4,
    }


# A LeaderWorkerSet worker runs only a Ray node (`ray start --block`). It is alive while
# its raylet process is; it is ready once the leader's Ray head (GCS) answers, which is
# when the leader can place this node's vLLM workers.
RAYLET_ALIVE_SCRIPT = """\
import os, sys
def cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""
sys.exit(0 if any(b"raylet" in cmdline(p) for p in os.listdir("/proc") if p.isdigit()) else 1)
"""
RAY_HEAD_READY = 'exec ray health-check --address "${LWS_LEADER_ADDRESS}:6379"'
RAY_PROBE_TIMEOUT_S = 15
# Ray starts in seconds once the image is there; a few minutes covers a slow node.
WORKER_STARTUP_BUDGET_S = 300


def worker_startup_probe() -> dict[str, Any]:
    return {
        "exec": {"command": ["python3", "-c", RAYLET_ALIVE_SCRIPT]},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": WORKER_STARTUP_BUDGET_S // PROBE_PERIOD_S,
    }


def worker_liveness_probe() -> dict[str, Any]:
    return {
        "exec": {"command": ["python3", "-c", RAYLET_ALIVE_SCRIPT]},
        "periodSeconds": 15,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": 4,
    }


def worker_readiness_probe() -> dict[str, Any]:
    return {
        "exec": {"command": ["bash", "-c", RAY_HEAD_READY]},
        "periodSeconds": PROBE_PERIOD_S,
        "timeoutSeconds": RAY_PROBE_TIMEOUT_S,
        "failureThreshold": 3,
        "successThreshold": 1,
    }


def pre_stop(service: InferenceService, port: int) -> dict[str, Any]:
    command = [
        "python3",
        "-c",
        DRAIN_SCRIPT,
        str(port),
        str(drain_budget_s(service)),
        str(ENDPOINT_PROPAGATION_S),
    ]
    return {"exec": {"command": command}}
