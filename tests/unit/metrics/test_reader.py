"""SignalReader without a network: a fake client answers, fails, or partly fails."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from inferfleet.autoscaling.prometheus.reader import (
    PrometheusClient,
    PrometheusConfig,
    QueryFailed,
    SignalReader,
)
from inferfleet.autoscaling.promql.history import FetchRange
from inferfleet.autoscaling.promql.parse import ServiceKey
from inferfleet.autoscaling.promql.queries import MIX_SIGNALS, QueryConfig, Signal, signal_queries
from inferfleet.metrics.operator_metrics import OperatorMetrics
from tests.toolkit.prometheus import a_range, a_sample, service_labels


class FakeClient(PrometheusClient):
    def __init__(self) -> None:
        super().__init__(PrometheusConfig("http://127.0.0.1:1"))
        self.down = False
        self.failing: set[str] = set()
        self.ranges: list[FetchRange] = []

    def instant(self, query: str, time_s: float) -> list[Any]:
        self.queries_made += 1
        if self.down or query in self.failing:
            raise QueryFailed("connection refused", "connection")
        return [a_sample("3", at_s=time_s)]

    def range(self, query: str, fetch: FetchRange) -> list[Any]:
        self.queries_made += 1
        if self.down:
            raise QueryFailed("connection refused", "connection")
        self.ranges.append(fetch)
        times = range(int(fetch.start_s), int(fetch.end_s) + 1, fetch.step_s)
        return [a_range([(t, "2") for t in times], labels=service_labels())]


def test_constant_query_count_and_history_fetched_once_per_step() -> None:
    client = FakeClient()
    reader = SignalReader(client, QueryConfig(history_step_s=60), history_retention_s=600)
    first = reader.read(1000.0)
    # One instant query per signal plus the front door's queue, and the history.
    assert first.queries == len(Signal) + 1 + 1
    assert first.tiers
    tier = first.tier("ns", "svc", "h100")
    assert tier is not None and tier.waiting == 3.0
    assert list(first.rate_history[ServiceKey("ns", "svc")]) == [2.0] * 10
    # Same history step: no range query; the request mix was read 10 s ago.
    assert reader.read(1010.0).queries == len(Signal) - len(MIX_SIGNALS) + 1  # + the front door's queue
    assert reader.read(1090.0).queries == len(Signal) + 1 + 1
    assert [(r.start_s, r.end_s) for r in client.ranges] == [(420.0, 960.0), (1020.0, 1080.0)]
    reader.close()


class PromptTokensClient(FakeClient):
    """Answers the prompt-token query for the H100 tier only; every other query as FakeClient."""

    def instant(self, query: str, time_s: float) -> list[Any]:
        if query != signal_queries(QueryConfig())[Signal.prompt_tokens_rate]:
            return super().instant(query, time_s)
        self.queries_made += 1
        return [a_sample("4096.5", at_s=time_s)]


def test_prompt_tokens_rate_is_read_in_the_same_batch_and_parsed_to_the_tier() -> None:
    client = PromptTokensClient()
    reader = SignalReader(client, QueryConfig())
    snapshot = reader.read(1000.0)
    assert snapshot.queries == len(Signal) + 1 == 16  # the signals and the front door's queue
    tier = snapshot.tier("ns", "svc", "h100")
    assert tier is not None and tier.prompt_tokens_rps == 4096.5
    reader.close()


def test_partial_failure_reports_failed_signal_only() -> None:
    client = FakeClient()
    reader = SignalReader(client, QueryConfig())
    client.failing = {signal_queries(QueryConfig())[Signal.ttft_p99]}
    snapshot = reader.read(1000.0)
    assert set(snapshot.failed) == {Signal.ttft_p99}
    assert not snapshot.unavailable
    tier = snapshot.tier("ns", "svc", "h100")
    assert tier is not None and tier.has_load_data and tier.ttft_p99_s is None
    reader.close()


def test_outage_backs_off_without_querying_then_recovers() -> None:
    client = FakeClient()
    reader = SignalReader(client, QueryConfig())
    client.down = True
    first = reader.read(1000.0)
    assert first.unavailable
    made = client.queries_made
    held = reader.read(1001.0)  # inside the backoff: Prometheus is spared
    assert held.unavailable and client.queries_made == made
    # The outage's own words, unchanged while it lasts (a countdown would rewrite
    # ScalingActive's message, and so status, every tick).
    assert set(held.failed.values()) == {first.failed[Signal.waiting]}
    client.down = False
    assert not reader.read(1000.0 + reader.backoff.delay_s()).unavailable
    assert reader.backoff.failures == 0
    reader.close()


def test_query_metrics_are_counted() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    client = PrometheusClient(PrometheusConfig("http://127.0.0.1:1", timeout_s=0.5), metrics)
    try:
        client.instant("up", 0.0)
    except QueryFailed as error:
        assert error.cause == "connection"
    else:
        raise AssertionError("expected a connection failure")
    assert (
        registry.get_sample_value(
            "inferfleet_prometheus_query_failures_total", {"kind": "instant", "cause": "connection"}
        )
        == 1.0
    )
    assert (
        registry.get_sample_value("inferfleet_prometheus_query_duration_seconds_count", {"kind": "instant"})
        == 1.0
    )


def test_bearer_token_is_read_from_file(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    client = PrometheusClient(PrometheusConfig("http://x", bearer_token_file=str(token)))
    assert client._headers() == {"Authorization": "Bearer s3cret"}


def test_the_request_mix_is_read_once_a_minute_and_reused_in_between() -> None:
    client = FakeClient()
    reader = SignalReader(client, QueryConfig(mix_refresh_s=60))
    door = 1  # the front door's queue, read every loop
    first = reader.read(1000.0)
    assert first.queries == len(Signal) + door
    later = reader.read(1015.0)
    assert later.queries == len(Signal) - len(MIX_SIGNALS) + door
    tier = later.tier("ns", "svc", "h100")
    assert tier is not None and tier.rejected_rps == 3.0 and tier.generation_tokens_rps == 3.0
    assert reader.read(1060.0).queries == len(Signal) + door
    # Prometheus down: every signal is missing, the cached mix included.
    client.down = True
    down = reader.read(1075.0)
    assert down.unavailable and down.tiers == {}
    reader.close()
