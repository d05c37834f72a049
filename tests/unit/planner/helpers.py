"""The planner tests' spec shorthands over the test toolkit (tests/toolkit)."""

from __future__ import annotations

from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from tests.toolkit import ServiceBuilder, a_service

# The planner tests' baseline: one H100 tier with a price, a longer chat workload.
PLANNER_WORKLOAD: dict[str, Any] = {
    "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
    "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
    "peakRequestsPerSecond": 10,
}


def planner_service(model: str = "meta-llama/Llama-3.1-8B-Instruct") -> ServiceBuilder:
    return (
        a_service()
        .model(model)
        .with_spec(workload=PLANNER_WORKLOAD)
        .tiers({"name": "h100", "gpu": "H100-SXM-80GB", "costPerGpuHour": 2.5})
    )


def spec_doc(model: str = "meta-llama/Llama-3.1-8B-Instruct", **extra: Any) -> dict[str, Any]:
    return planner_service(model).with_spec(**extra).spec_dict()


def make_spec(**kwargs: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate(spec_doc(**kwargs))
