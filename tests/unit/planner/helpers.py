"""Spec builders for planner tests."""

from __future__ import annotations

from typing import Any

from inferfleet.api.spec import InferenceServiceSpec


def spec_doc(model: str = "meta-llama/Llama-3.1-8B-Instruct", **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": {"name": model},
        "workload": {
            "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
            "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
            "peakRequestsPerSecond": 10,
        },
        "tiers": [{"name": "h100", "gpu": "H100-SXM-80GB", "costPerGpuHour": 2.5}],
    }
    doc.update(extra)
    return doc


def make_spec(**kwargs: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate(spec_doc(**kwargs))
