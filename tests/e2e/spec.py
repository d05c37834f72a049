"""The InferenceService the end-to-end tests deploy: one CPU-only tier, a stand-in image."""

from __future__ import annotations

from typing import Any


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
            "tiers": [{"name": "cpu", "gpu": {"name": "cpu-standin", "memoryGiB": 16, "resourceName": "none"},
                       "gpusPerNode": 1, "minReplicas": 1, "maxReplicas": 3}],
            "cache": {"mode": "none"},
            "serving": {"image": image, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}},
        },
    }
