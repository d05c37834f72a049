"""What a Prometheus outage says: one log line per attempt, and conditions, Events and
logs that name the query by its signal, never by its text.

The real client and reader talk to a closed loopback port (nothing listens: connection
refused) or to a loopback server answering 503. Every query is some 700 characters of
PromQL, and the failing URL carries it URL-encoded: it used to appear in the
ScalingActive message, its Warning event, and in one urllib3 warning per query and
retry (16 a loop).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.promql.queries import QueryConfig, Signal
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk

NS = "team"
T0 = 1_800_000_000.0
# Words no short message has: PromQL, or a URL-encoded query string.
QUERY_TEXT = ("sum by", "query=", "vllm:", "vllm%3A", "inferfleet_service")


def closed_port() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Answers503:
    """A Prometheus behind a proxy that answers 503 to everything; counts requests."""

    def __init__(self) -> None:
        self.requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests += 1
                body = b"<html>503 Service Unavailable</html>"
                self.send_response(503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def answers_503() -> Iterator[Answers503]:
    fake = Answers503()
    yield fake
    fake.close()


def reader_for(url: str) -> SignalReader:
    return SignalReader(PrometheusClient(PrometheusConfig(url, timeout_s=2.0)), QueryConfig())


def _short(text: str) -> None:
    assert len(text) < 200, text
    assert not any(word in text for word in QUERY_TEXT), text


def test_no_prometheus_is_one_log_line_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, urllib3's included
    reader = reader_for(closed_port())
    try:
        first = reader.read(T0)
        said = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert [r.name for r in said] == ["inferfleet.autoscaling.prometheus.reader"], [
            r.getMessage()[:120] for r in said
        ]
        _short(said[0].getMessage().split("; ")[0])
        assert "`waiting` query" in said[0].getMessage() and "connection refused" in said[0].getMessage()
        assert first.unavailable
        why = first.failed[Signal.waiting]
        assert why.startswith("Prometheus did not answer the `waiting` query: cannot reach http://127.0.0.1:")
        assert why.endswith("(connection refused)"), why
        _short(why)
        # While backing off: no query, no line, and the same words (no countdown in them).
        caplog.clear()
        held = reader.read(T0 + 1)
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert set(held.failed.values()) == {why}
        # The next attempt: one more line.
        reader.read(T0 + reader.backoff.delay_s() + 1)
        assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    finally:
        reader.close()


def test_a_503_is_said_in_three_words_and_tried_once_more(answers_503: Answers503) -> None:
    reader = reader_for(answers_503.url)
    try:
        snapshot = reader.read(T0)
    finally:
        reader.close()
    assert snapshot.failed[Signal.ttft_p99] == "Prometheus did not answer the `ttftP99` query: HTTP 503"
    # Every query (the signals and the front door's queue) twice: a proxy's 503 is retried
    # once at once, longer waits are the reader's backoff.
    assert answers_503.requests == 2 * (len(Signal) + 1)


def test_scaling_active_and_its_event_name_the_signal_and_an_outage_writes_status_once() -> None:
    cluster = InMemoryCluster()
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 2})
    reader = reader_for(closed_port())
    autoscaler = Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False))
    writes = 0
    try:
        # Ten minutes of 5 s loop ticks without Prometheus (the reader backs off to 5 min).
        for tick in range(120):
            report = autoscaler.run_once(T0 + 5 * tick)
            assert report.metrics_unavailable and report.errors == []
            writes += report.status_writes
    finally:
        reader.close()
    inactive = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None
    assert (inactive["status"], inactive["reason"]) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    assert inactive["message"].startswith(
        "metrics unavailable, holding replica counts: Prometheus did not answer the `waiting` query: "
    ), inactive["message"]
    _short(inactive["message"])
    (event,) = [e for e in cluster.events if e["reason"] == labels.REASON_METRICS_UNAVAILABLE]
    assert event["message"] == inactive["message"]
    # The transition, then the 5-minute heartbeats: the message does not count down.
    assert writes <= 3, writes
    assert tk.replicas(cluster, NS, "chat", "l4") == 2
