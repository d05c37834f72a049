"""The render tests' shorthands over the test toolkit (tests/toolkit): hand-made plans
and services, so a render test never depends on the planner's numbers."""

from __future__ import annotations

from typing import Any

from inferfleet.api import InferenceService, Plan, TierPlan
from tests.toolkit import a_plan, a_service, a_tier_plan

BASE_SERVICE: dict[str, Any] = a_service().body()


def service_body(**spec_changes: Any) -> dict[str, Any]:
    return a_service().with_spec(**spec_changes).body()


def service(**spec_changes: Any) -> InferenceService:
    return a_service().with_spec(**spec_changes).service()


def tier_plan(name: str, **changes: Any) -> TierPlan:
    return a_tier_plan(name).with_(**changes).build()


def plan(*tiers: TierPlan, name: str = "chat") -> Plan:
    return a_plan(*tiers, name=name)


def infeasible(name: str, reason: str = "70B at BF16 does not fit one L4 node") -> TierPlan:
    return a_tier_plan(name).infeasible(reason).build()
