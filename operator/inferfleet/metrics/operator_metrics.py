"""The operator's own metrics (prometheus-client), served on the operator's metrics port.

Label sets stay small and bounded: per-tier gauges carry namespace/service/tier (one
series per tier that exists, removed with `forget_service`), counters carry only
enumerations (signal, direction, result), never free text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_TIER_LABELS = ("namespace", "service", "tier")
_QUERY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_RECONCILE_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class OperatorMetrics:
    """Every metric the operator exports, registered on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconcile_total = Counter(
            "inferfleet_reconcile_total",
            "Reconcile passes, by result (success, error).",
            ["result"],
            registry=registry,
        )
        self.reconcile_duration_s = Histogram(
            "inferfleet_reconcile_duration_seconds",
            "Time one reconcile pass took.",
            buckets=_RECONCILE_BUCKETS_S,
            registry=registry,
        )
        self.reconcile_errors_total = Counter(
            "inferfleet_reconcile_errors_total",
            "Reconcile errors, by kind (spec: the user's; transient: the world's; internal: a bug).",
            ["kind"],
            registry=registry,
        )
        self.decisions_total = Counter(
            "inferfleet_autoscaler_decisions_total",
            "Autoscaler decisions per tier and loop, by winning signal and direction.",
            ["signal", "direction", "mode"],
            registry=registry,
        )
        self.desired_replicas = Gauge(
            "inferfleet_autoscaler_desired_replicas",
            "Replicas the autoscaler wants per tier (advisory mode included).",
            _TIER_LABELS,
            registry=registry,
        )
        self.ready_replicas = Gauge(
            "inferfleet_autoscaler_ready_replicas",
            "Ready replicas per tier as last observed.",
            _TIER_LABELS,
            registry=registry,
        )
        self.forecast_rps = Gauge(
            "inferfleet_autoscaler_forecast_requests_per_second",
            "Request rate the forecaster predicted for this tier one cold start ahead.",
            _TIER_LABELS,
            registry=registry,
        )
        self.actual_rps = Gauge(
            "inferfleet_autoscaler_actual_requests_per_second",
            "Request rate measured for this tier over the rate window.",
            _TIER_LABELS,
            registry=registry,
        )
        self.loop_duration_s = Histogram(
            "inferfleet_autoscaler_loop_duration_seconds",
            "Wall time of one autoscaler loop over all InferenceServices.",
            buckets=_RECONCILE_BUCKETS_S,
            registry=registry,
        )
        self.loop_queries = Gauge(
            "inferfleet_autoscaler_loop_queries",
            "Prometheus queries the last autoscaler loop made.",
            registry=registry,
        )
        self.metrics_available = Gauge(
            "inferfleet_autoscaler_metrics_available",
            "1 when the last loop read its signals from Prometheus, 0 while holding without them.",
            registry=registry,
        )
        self.query_duration_s = Histogram(
            "inferfleet_prometheus_query_duration_seconds",
            "Latency of the operator's Prometheus queries, by kind (instant, range).",
            ["kind"],
            buckets=_QUERY_BUCKETS_S,
            registry=registry,
        )
        self.query_failures_total = Counter(
            "inferfleet_prometheus_query_failures_total",
            "Failed Prometheus queries, by kind and cause (connection, timeout, http, parse).",
            ["kind", "cause"],
            registry=registry,
        )
        self._lock = threading.Lock()
        self._tiers: dict[tuple[str, str], set[str]] = {}

    @contextmanager
    def reconcile(self) -> Iterator[None]:
        """Count and time one reconcile pass; an exception counts as an error and propagates."""
        started = time.perf_counter()
        try:
            yield
        except Exception:
            self.reconcile_total.labels(result="error").inc()
            raise
        else:
            self.reconcile_total.labels(result="success").inc()
        finally:
            self.reconcile_duration_s.observe(time.perf_counter() - started)

    def record_tier(
        self,
        namespace: str,
        service: str,
        tier: str,
        *,
        desired: int,
        ready: int | None,
        forecast_rps: float | None,
        actual_rps: float | None,
    ) -> None:
        with self._lock:
            self._tiers.setdefault((namespace, service), set()).add(tier)
        self.desired_replicas.labels(namespace, service, tier).set(desired)
        if ready is not None:
            self.ready_replicas.labels(namespace, service, tier).set(ready)
        if forecast_rps is not None:
            self.forecast_rps.labels(namespace, service, tier).set(forecast_rps)
        if actual_rps is not None:
            self.actual_rps.labels(namespace, service, tier).set(actual_rps)

    def forget_service(self, namespace: str, service: str) -> None:
        """Drop the per-tier series of a deleted InferenceService."""
        with self._lock:
            tiers = self._tiers.pop((namespace, service), set())
        for tier in tiers:
            for gauge in (self.desired_replicas, self.ready_replicas, self.forecast_rps, self.actual_rps):
                with suppress(KeyError):
                    gauge.remove(namespace, service, tier)

    def known_services(self) -> set[tuple[str, str]]:
        with self._lock:
            return set(self._tiers)


_default: OperatorMetrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> OperatorMetrics:
    """The process-wide metrics on prometheus-client's global registry (created once)."""
    global _default  # noqa: PLW0603 - one registry per process is the point
    with _default_lock:
        if _default is None:
            from prometheus_client import REGISTRY

            _default = OperatorMetrics(REGISTRY)
        return _default


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Serve /metrics of the global registry on a background thread."""
    start_http_server(port, addr=addr)
