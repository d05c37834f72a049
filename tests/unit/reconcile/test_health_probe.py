"""The operator's /healthz answers while every worker thread is busy with reconcile passes.

During a cold start of 1,000 services every worker is in a pass for minutes, and the
chart's liveness probe restarts an operator whose /healthz stays silent for about 60 s.
So the probe handler needs no worker thread and no lock a pass holds: here kopf's own
health server (the one `kopf.run` starts with `--liveness`) runs the operator's probe
handlers while the passes' thread pool and kopf's pool for synchronous handlers are both
full of passes that do not end, and must still answer at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import kopf
from kopf._core.engines import probing
from prometheus_client import CollectorRegistry

from inferfleet import handlers
from inferfleet.controller.single_flight import SingleFlight
from inferfleet.metrics.operator_metrics import OperatorMetrics
from tests.unit.reconcile.fixtures import LOGGER, NAMESPACE

WORKERS = 2
# Passes started: more than the workers, so some wait for one, as in a cold start.
PASSES = 2 * WORKERS
# A probe that answers needs milliseconds; one that waits for a worker never answers.
ANSWER_WITHIN_S = 2.0
# A stuck pass ends by itself after this, so a failing run ends too.
STUCK_AT_MOST_S = 10.0


class StuckReconciler:
    """A reconciler whose passes last until `release` is set (a pass of a cold start)."""

    def __init__(self) -> None:
        self.in_flight = SingleFlight()
        self.release = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def reconcile(self, namespace: str, name: str) -> None:
        with self._lock:
            self.started += 1
        self.release.wait(STUCK_AT_MOST_S)


def _free_port() -> int:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port: int = bound.getsockname()[1]
        return port


async def _until(condition: Callable[[], bool], timeout_s: float) -> None:
    """Wait on the event loop alone: every worker thread is taken."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


async def _health_during_a_cold_start() -> tuple[int, Any, int]:
    """(/healthz status and body while every worker is stuck in a pass, passes counted
    once they end)."""
    loop = asyncio.get_running_loop()
    passes_pool = ThreadPoolExecutor(max_workers=WORKERS)  # where asyncio.to_thread runs
    loop.set_default_executor(passes_pool)
    settings = kopf.OperatorSettings()
    settings.execution.executor = ThreadPoolExecutor(max_workers=WORKERS)  # kopf's sync handlers
    reconciler = StuckReconciler()
    memo = kopf.Memo(reconciler=reconciler, metrics=OperatorMetrics(CollectorRegistry()))
    endpoint = f"http://127.0.0.1:{_free_port()}/healthz"
    ready = asyncio.Event()
    server = asyncio.create_task(
        probing.health_reporter(
            endpoint,
            memo=memo,
            indices={},
            registry=kopf.get_default_registry(),
            settings=settings,
            ready_flag=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        # kopf's own pool taken too: whatever kopf runs synchronously waits for a worker.
        for _ in range(WORKERS):
            settings.execution.executor.submit(reconciler.release.wait, STUCK_AT_MOST_S)
        passes = [
            asyncio.create_task(
                handlers.reconcile_on_change(
                    name=f"chat-{i}", namespace=NAMESPACE, memo=memo, retry=0, logger=LOGGER
                )
            )
            for i in range(PASSES)
        ]
        await _until(lambda: reconciler.started == WORKERS, 10)
        async with (
            aiohttp.ClientSession() as session,
            asyncio.timeout(ANSWER_WITHIN_S),
            session.get(endpoint) as response,
        ):
            during = (response.status, await response.json())
        reconciler.release.set()
        await asyncio.wait_for(asyncio.gather(*passes), 30)
        return during[0], during[1], int(memo.get("passes", 0))
    finally:
        reconciler.release.set()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        settings.execution.executor.shutdown(wait=True)
        passes_pool.shutdown(wait=True)


def test_health_answers_while_every_worker_is_in_a_pass() -> None:
    status, body, passes = asyncio.run(_health_during_a_cold_start())
    # Answered at once, with the passes finished so far: none, every worker being stuck.
    assert (status, body) == (200, {"reconcilePasses": 0})
    assert passes == PASSES
