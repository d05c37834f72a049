"""Spec samples shared by the API tests."""

from __future__ import annotations

import copy
from typing import Any


def base_spec() -> dict[str, Any]:
    """A small valid spec; tests mutate copies of it."""
    return copy.deepcopy(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
            "workload": {
                "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
                "outputTokens": {"p50": 100, "p95": 400, "p99": 800},
                "peakRequestsPerSecond": 10,
            },
            "tiers": [
                {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4},
                {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 1},
            ],
        }
    )


def document(spec: dict[str, Any], name: str = "sample") -> dict[str, Any]:
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": spec,
    }
