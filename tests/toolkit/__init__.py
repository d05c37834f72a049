"""One test toolkit: fluent builders for specs and plans, and the one vLLM stand-in.

    from tests.toolkit import a_plan, a_service, a_tier_plan, vllm_standin

    service = a_service("chat").tier("l4", gpu="L4", max_replicas=4).service()
    plan = a_plan(a_tier_plan("l4").on("L4"), a_tier_plan("h100").infeasible("too small"))
    with vllm_standin(served="chat", api_key="sk-test") as port: ...
"""

from tests.toolkit.builders import (
    PlanBuilder,
    ServiceBuilder,
    TierPlanBuilder,
    a_plan,
    a_service,
    a_tier_plan,
)
from tests.toolkit.vllm import vllm_standin

__all__ = [
    "PlanBuilder",
    "ServiceBuilder",
    "TierPlanBuilder",
    "a_plan",
    "a_service",
    "a_tier_plan",
    "vllm_standin",
]
