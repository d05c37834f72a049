"""InferenceServices the end-to-end tests deploy (besides the bundled examples)."""

from __future__ import annotations

import copy
from typing import Any

WORKLOAD = {
    "archetype": "chat",
    "inputTokens": {"p50": 600, "p95": 2000, "p99": 4000},
    "outputTokens": {"p50": 200, "p95": 600, "p99": 1000},
    "peakRequestsPerSecond": 4,
}


def cpu_service(name: str, namespace: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "Qwen/Qwen3-0.6B"},
            "workload": {
                "inputTokens": {"p50": 100, "p95": 200, "p99": 400},
                "outputTokens": {"p50": 50, "p95": 100, "p99": 200},
                "peakRequestsPerSecond": 1,
            },
            # resourceName "none": the pods request no accelerator at all.
            "tiers": [
                {
                    "name": "cpu",
                    "gpu": {"name": "cpu-standin", "memoryGiB": 16, "resourceName": "none"},
                    "gpusPerNode": 1,
                    "minReplicas": 1,
                    "maxReplicas": 3,
                }
            ],
            "cache": {"mode": "none"},
            "serving": {"image": image, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}},
        },
    }


def gpu_service(
    name: str,
    namespace: str,
    tiers: list[dict[str, Any]],
    *,
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    cache: dict[str, Any] | None = None,
    scaling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An 8B chat service on the given tiers (weights pre-cached unless `cache` says otherwise)."""
    spec: dict[str, Any] = {
        "model": {"name": model},
        "workload": copy.deepcopy(WORKLOAD),
        "tiers": tiers,
        "cache": cache or {"mode": "nvme"},
    }
    if scaling is not None:
        spec["scaling"] = scaling
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
