from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from inferfleet.metrics.operator_metrics import OperatorMetrics


def test_reconcile_counts_success_and_error() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    with metrics.reconcile():
        pass
    with pytest.raises(RuntimeError), metrics.reconcile():
        raise RuntimeError("boom")
    assert registry.get_sample_value("inferfleet_reconcile_total", {"result": "success"}) == 1
    assert registry.get_sample_value("inferfleet_reconcile_total", {"result": "error"}) == 1
    assert registry.get_sample_value("inferfleet_reconcile_duration_seconds_count") == 2


def test_tier_gauges_are_removed_with_the_service() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    metrics.record_tier("ns", "svc", "h100", desired=3, ready=2, forecast_rps=4.5, actual_rps=4.0)
    labels = {"namespace": "ns", "service": "svc", "tier": "h100"}
    assert registry.get_sample_value("inferfleet_autoscaler_desired_replicas", labels) == 3
    assert registry.get_sample_value("inferfleet_autoscaler_forecast_requests_per_second", labels) == 4.5
    metrics.forget_service("ns", "svc")
    assert registry.get_sample_value("inferfleet_autoscaler_desired_replicas", labels) is None
    assert metrics.known_services() == set()
