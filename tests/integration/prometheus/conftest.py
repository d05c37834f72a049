"""A real Prometheus scraping our vLLM metrics emulator on loopback, through the scrape
configs prometheus-operator generates for the operator's own PodMonitors.

One Prometheus and one emulator serve every test in this package (starting Prometheus
and waiting for its first scrapes costs several seconds). The emulated pods are
declared up front because Prometheus reads its targets from a generated config; each
test drives the pods it owns. Skipped, with the reason, when the `prometheus` binary is
missing (`hack/setup.sh` installs Debian's package when it runs as root).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.prometheus.testkit import EmulatedPod, PrometheusServer, VllmEmulator
from inferfleet.autoscaling.promql.queries import QueryConfig

SCRAPE_INTERVAL_S = 1.0
# Short windows so a test's load change shows within seconds; four scrapes per window.
QUERY_CONFIG = QueryConfig(
    rate_window_s=4,
    max_sample_age_s=5,
    history_step_s=1,
    history_rate_window_s=3,
    mix_window_s=4,
    mix_refresh_s=0,
)

T = TypeVar("T")


def _pods() -> list[EmulatedPod]:
    return [
        # Signal tests: fixed load, one pod in the escaped `vllm_` form with the old KV name.
        EmulatedPod("chat-h100-0", "sig", "chat", "h100", num_gpu_blocks=30000),
        EmulatedPod(
            "chat-h100-1",
            "sig",
            "chat",
            "h100",
            name_style="underscore",
            legacy_kv=True,
            num_gpu_blocks=29500,
        ),
        EmulatedPod("chat-l4-0", "sig", "chat", "l4"),
        EmulatedPod("batch-a100-0", "sig", "batch", "a100"),
        EmulatedPod("batch-a100-1", "sig", "batch", "a100"),
        # Autoscaler tests: one service, two tiers, driven by the scripted ramp.
        EmulatedPod("ramp-l4-0", "ramp", "chat", "l4"),
        EmulatedPod("ramp-h100-0", "ramp", "chat", "h100"),
    ]


def _signal_load(emulator: VllmEmulator) -> None:
    now = time.time()
    # p99 TTFT: 90% of requests at 50 ms, 10% at 1.5 s, so the 99th percentile lies in
    # the (1.0, 2.5] bucket: 1.0 + 1.5 * (0.99 - 0.9) / 0.1 = 2.35 s.
    mix = [(0.05, 0.9), (1.5, 0.1)]
    pods = emulator.pods
    # Prompt tokens: 4 req/s x 1000 + 2 req/s x 500 = 5000 tokens/s over the two H100 pods.
    pods["chat-h100-0"].set(
        now_s=now, waiting=3, running=5, kv_cache_usage=0.5, rps=4, ttft_mix=mix, prompt_tokens=1000
    )
    pods["chat-h100-1"].set(
        now_s=now, waiting=2, running=1, kv_cache_usage=0.7, rps=2, ttft_mix=mix, prompt_tokens=500
    )
    pods["chat-l4-0"].set(now_s=now, waiting=0, running=0, kv_cache_usage=0.1, rps=0)
    # The batch service's engines: 600-token outputs, and 0.5 req/s answered 400 each.
    pods["batch-a100-0"].set(
        now_s=now, waiting=1, running=2, kv_cache_usage=0.2, rps=1, output_tokens=600, rejected_rps=0.5
    )
    pods["batch-a100-1"].set(
        now_s=now, waiting=1, running=2, kv_cache_usage=0.2, rps=1, output_tokens=600, rejected_rps=0.5
    )
    for name in ("ramp-l4-0", "ramp-h100-0"):
        pods[name].set(now_s=now, waiting=0, running=1, kv_cache_usage=0.1, rps=1)


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("prometheus binary not installed (hack/setup.sh installs Debian's package as root)")
    return found


@pytest.fixture(scope="package")
def emulator() -> Iterator[VllmEmulator]:
    with VllmEmulator() as running:
        for pod in _pods():
            running.add_pod(pod)
        _signal_load(running)
        yield running


@pytest.fixture(scope="package")
def prometheus(prometheus_binary: str, emulator: VllmEmulator) -> Iterator[PrometheusServer]:
    server = PrometheusServer(
        emulator.operator_scrape_configs(scrape_interval_s=SCRAPE_INTERVAL_S),
        binary=prometheus_binary,
        scrape_interval_s=SCRAPE_INTERVAL_S,
    )
    with server:
        server.wait_for_targets(len(emulator.pods))
        # A rate over a window the series does not yet fill reads low: wait until every
        # pod has two windows of scrapes behind it.
        span_s = 2 * QUERY_CONFIG.rate_window_s
        server.wait_for(
            f'min(count_over_time({{__name__=~"vllm.num_requests_running"}}[{span_s}s]))',
            lambda result: bool(result) and float(result[0]["value"][1]) >= span_s - 1,
        )
        yield server


@pytest.fixture
def reader(prometheus: PrometheusServer) -> Iterator[SignalReader]:
    signal_reader = SignalReader(
        PrometheusClient(PrometheusConfig(prometheus.url, timeout_s=5)), QUERY_CONFIG, history_retention_s=30
    )
    yield signal_reader
    signal_reader.close()


def eventually(probe: Callable[[], T], timeout_s: float = 20.0, interval_s: float = 0.25) -> T:
    """Call `probe` until it stops raising AssertionError; Prometheus catches up within seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return probe()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(interval_s)
