"""The engines' allocated KV cache, read from a real Prometheus scraping the emulator."""

from __future__ import annotations

import time

import pytest

from inferfleet.autoscaling.prometheus.reader import KvCapacityReader, PrometheusClient, PrometheusConfig
from inferfleet.autoscaling.prometheus.testkit import PrometheusServer
from inferfleet.autoscaling.promql.parse import KvCapacityReading
from tests.integration.prometheus.conftest import QUERY_CONFIG

pytestmark = pytest.mark.integration


def test_each_tier_reports_its_smallest_replica_in_either_name_form(prometheus: PrometheusServer) -> None:
    reader = KvCapacityReader(PrometheusClient(PrometheusConfig(url=prometheus.url)), QUERY_CONFIG)
    # chat-h100-0 (`vllm:`) 30000 blocks, chat-h100-1 (`vllm_`) 29500: the smaller counts
    assert reader.tiers_of("sig", "chat") == {"h100": KvCapacityReading(29500, 16, 2)}
    assert reader.tiers_of("sig", "batch") == {}  # engines that report no cache config
    assert reader.tiers_of("elsewhere", "chat") == {}


def test_an_unreachable_prometheus_keeps_the_estimates_and_never_raises() -> None:
    reader = KvCapacityReader(
        PrometheusClient(PrometheusConfig(url="http://127.0.0.1:9", timeout_s=0.5)), QUERY_CONFIG, ttl_s=0
    )
    started = time.monotonic()
    assert reader.tiers_of("sig", "chat") == {}
    assert time.monotonic() - started < 10
