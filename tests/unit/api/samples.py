"""Spec samples shared by the API tests: shorthands over the test toolkit (tests/toolkit)."""

from __future__ import annotations

from typing import Any

from tests.toolkit import a_service

# The API tests' baseline: a small valid spec, no credentials, two tiers.
API_WORKLOAD: dict[str, Any] = {
    "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
    "outputTokens": {"p50": 100, "p95": 400, "p99": 800},
    "peakRequestsPerSecond": 10,
}


def base_spec() -> dict[str, Any]:
    """A small valid spec; tests mutate copies of it."""
    return (
        a_service()
        .model()
        .with_spec(workload=API_WORKLOAD)
        .tiers(
            {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4},
            {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 1},
        )
        .spec_dict()
    )


def document(spec: dict[str, Any], name: str = "sample") -> dict[str, Any]:
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": spec,
    }
