"""Prometheus answers as its HTTP API gives them (`data.result` items), and parsed vectors.

a_sample("3")                                  # h100 of ns/svc, at 1000 s
a_sample("0.25", inferfleet_tier="l4")         # a label replaced or added
a_range([(60, "2")], labels=service_labels())  # a matrix item (range query)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.autoscaling.promql.parse import TierKey, VectorResult


def tier_labels(tier: str = "h100", *, namespace: str = "ns", service: str = "svc") -> dict[str, str]:
    """The target labels a tier's series carry (namespace from discovery, the rest from the PodMonitor)."""
    return {"namespace": namespace, "inferfleet_service": service, "inferfleet_tier": tier}


def service_labels(*, namespace: str = "ns", service: str = "svc") -> dict[str, str]:
    """A service-wide series (the rate history): no tier label."""
    return {"namespace": namespace, "inferfleet_service": service}


def a_sample(
    value: Any, *, at_s: Any = 1000.0, labels: Mapping[str, Any] | None = None, **label_changes: Any
) -> dict[str, Any]:
    """One instant-vector item. Values and times are whatever a test feeds the parser
    (Prometheus sends strings; hostile answers send anything)."""
    metric = {**(tier_labels() if labels is None else labels), **label_changes}
    return {"metric": metric, "value": [at_s, value]}


def a_range(
    points: Sequence[Sequence[Any]], *, labels: Mapping[str, Any] | None = None, **label_changes: Any
) -> dict[str, Any]:
    """One range-vector (matrix) item: `points` as [time, value] pairs."""
    metric = {**(tier_labels() if labels is None else labels), **label_changes}
    return {"metric": metric, "values": [list(point) for point in points]}


def a_vector(values: Mapping[TierKey, float | None]) -> VectorResult:
    """A parsed instant vector: one value per tier (None: present without a value)."""
    return VectorResult(values=dict(values))
