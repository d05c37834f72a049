"""A scripted signal source and an in-memory cluster for autoscaler tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.policy.readings import TierReadings
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.promql.parse import ServiceKey, TierKey
from inferfleet.autoscaling.promql.queries import QueryConfig, Signal
from inferfleet.autoscaling.promql.signals import SignalSnapshot
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings


class ScriptedReader(SignalReader):
    """Answers `read()` from `self.tiers` instead of Prometheus; counts reads as queries."""

    def __init__(self) -> None:
        super().__init__(PrometheusClient(PrometheusConfig("http://127.0.0.1:1")), QueryConfig())
        self.tiers: dict[TierKey, TierReadings] = {}
        self.service_history: dict[ServiceKey, list[float]] = {}
        self.down = False
        self.history_failed: str | None = None
        self.pod_load: dict[TierKey, dict[str, float]] = {}
        self.reads = 0

    def set(self, namespace: str, service: str, tier: str, **values: Any) -> None:
        self.tiers[TierKey(namespace, service, tier)] = TierReadings(**values)

    def read(self, now_s: float) -> SignalSnapshot:
        self.reads += 1
        self.client.queries_made += len(Signal)
        if self.down:
            return SignalSnapshot(time_s=now_s, failed=dict.fromkeys(Signal, "connection refused"))
        # The per-pod load is part of the one read, as the real reader makes it.
        return SignalSnapshot(
            time_s=now_s,
            tiers=dict(self.tiers),
            rate_history=dict(self.service_history),
            history_failed=self.history_failed,
            pod_in_flight=dict(self.pod_load),
        )


@pytest.fixture
def cluster() -> InMemoryCluster:
    return InMemoryCluster()


@pytest.fixture
def reader() -> Iterator[ScriptedReader]:
    scripted = ScriptedReader()
    yield scripted
    scripted.close()


@pytest.fixture
def settings() -> OperatorSettings:
    # Predictive off by default here: these tests script the reactive path exactly.
    return OperatorSettings(sync_period_s=15, predictive_enabled=False, scale_down_stabilization_s=60)


@pytest.fixture
def autoscaler(cluster: InMemoryCluster, reader: ScriptedReader, settings: OperatorSettings) -> Autoscaler:
    return Autoscaler(cluster, reader, settings)
