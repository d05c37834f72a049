"""The InferenceService API: pydantic models that are the single source of truth.

The CRD (`crds/`), the CLI's validation and the operator all derive from these models.
"""

from inferfleet.api.plan import MeasuredKv, MemoryBreakdownGiB, Performance, Plan, TierPlan
from inferfleet.api.resource import (
    InferenceService,
    ObjectMeta,
    Problem,
    SpecInvalid,
    load_all,
    parse,
)
from inferfleet.api.spec import (
    CacheSpec,
    InferenceServiceSpec,
    InlineGpu,
    ModelSpec,
    ScalingSpec,
    ServingSpec,
    TierOverrides,
    TierSpec,
    TokenPercentiles,
    WorkloadSpec,
)
from inferfleet.api.status import (
    Condition,
    InferenceServiceStatus,
    ScalingDecision,
    TierCache,
    TierReplicas,
)

__all__ = [
    "CacheSpec",
    "Condition",
    "InferenceService",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "InlineGpu",
    "MeasuredKv",
    "MemoryBreakdownGiB",
    "ModelSpec",
    "ObjectMeta",
    "Performance",
    "Plan",
    "Problem",
    "ScalingDecision",
    "ScalingSpec",
    "ServingSpec",
    "SpecInvalid",
    "TierCache",
    "TierOverrides",
    "TierPlan",
    "TierReplicas",
    "TierSpec",
    "TokenPercentiles",
    "WorkloadSpec",
    "load_all",
    "parse",
]
