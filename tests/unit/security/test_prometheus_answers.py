"""Malformed Prometheus answers are "metrics unavailable", never an exception in the loop.

A loopback HTTP server plays Prometheus and answers with whatever a broken proxy, a
caching frontend or a hostile endpoint might send; the real client and reader read it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk

NS = "team"
T0 = 1_800_000_000.0
SERIES = {"namespace": NS, "inferfleet_service": "chat", "inferfleet_tier": "l4"}


class FakePrometheus:
    """Answers every query with `self.body` (bytes) and `self.status`."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.status = 200
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.body)))
                self.end_headers()
                self.wfile.write(fake.body)

            def log_message(self, *_: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    fake = FakePrometheus()
    yield fake
    fake.close()


def vector(value: Any) -> bytes:
    return json.dumps(
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": SERIES, "value": value}]},
        }
    ).encode()


MALFORMED = {
    "data null": b'{"status": "success", "data": null}',
    "data a list": b'{"status": "success", "data": []}',
    "result a string": b'{"status": "success", "data": {"resultType": "vector", "result": "oops"}}',
    "result null": b'{"status": "success", "data": {"resultType": "vector", "result": null}}',
    "body a list": b"[1, 2, 3]",
    "body a string": b'"hello"',
    "not json": b"<html>502 Bad Gateway</html>",
    "error status": b'{"status": "error", "errorType": "bad_data", "error": "parse error"}',
    "deeply nested": b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "series null": b'{"status": "success", "data": {"resultType": "vector", "result": [null, 5, "x"]}}',
}


def reader_for(url: str) -> SignalReader:
    return SignalReader(PrometheusClient(PrometheusConfig(url, timeout_s=2.0)), QueryConfig())


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_answer_never_raises(prometheus: FakePrometheus, body: bytes) -> None:
    prometheus.body = body
    reader = reader_for(prometheus.url)
    try:
        snapshot = reader.read(T0)  # must not raise
    finally:
        reader.close()
    assert snapshot.tier(NS, "chat", "l4") is None


@pytest.mark.parametrize("value", ['"+Inf"', '"-Inf"', '"NaN"', '"-3"', '"1e999"'])
def test_non_finite_or_negative_samples_are_missing(prometheus: FakePrometheus, value: str) -> None:
    prometheus.body = vector([T0, json.loads(value)])
    reader = reader_for(prometheus.url)
    try:
        snapshot = reader.read(T0)
    finally:
        reader.close()
    tier = snapshot.tier(NS, "chat", "l4")
    assert tier is not None and not tier.has_load_data and tier.ready_replicas is None


@pytest.mark.parametrize(
    "body", [MALFORMED["data null"], MALFORMED["not json"]], ids=["data null", "not json"]
)
def test_a_malformed_answer_is_metrics_unavailable_with_the_condition_set(
    prometheus: FakePrometheus, body: bytes
) -> None:
    prometheus.body = body
    cluster = InMemoryCluster()
    tk.install(cluster, a_scaled_service("chat", NS), replicas={"l4": 3})
    reader = reader_for(prometheus.url)
    try:
        report = Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False)).run_once(T0)
    finally:
        reader.close()
    assert report.metrics_unavailable and report.errors == []
    assert tk.replicas(cluster, NS, "chat", "l4") == 3
    inactive = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None
    assert (inactive["status"], inactive["reason"]) == ("False", labels.REASON_METRICS_UNAVAILABLE)
    assert "malformed answer" in inactive["message"] or "Expecting value" in inactive["message"]
