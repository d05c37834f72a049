"""One test toolkit: fluent builders for specs and plans, and the one vLLM stand-in.

    from tests.toolkit import a_plan, a_service, a_tier_plan, vllm_standin

    service = a_service("chat").tier("l4", gpu="L4", max_replicas=4).service()
    plan = a_plan(a_tier_plan("l4").on("L4"), a_tier_plan("h100").infeasible("too small"))
    with vllm_standin(served="chat", api_key="sk-test") as port: ...

The autoscaler's side: `a_scaled_service` and `a_small_tier_plan` (the service and tier it
scales), `reconciled` (that service installed in an InMemoryCluster as the reconciler
leaves it, and readers of what the autoscaler wrote), `prometheus` (answers as
Prometheus's HTTP API gives them), `traces` (synthetic traces for the simulator).
"""

from tests.toolkit.builders import (
    PlanBuilder,
    ServiceBuilder,
    TierPlanBuilder,
    a_plan,
    a_scaled_service,
    a_service,
    a_small_tier_plan,
    a_tier_plan,
)
from tests.toolkit.vllm import vllm_standin

__all__ = [
    "PlanBuilder",
    "ServiceBuilder",
    "TierPlanBuilder",
    "a_plan",
    "a_scaled_service",
    "a_service",
    "a_small_tier_plan",
    "a_tier_plan",
    "vllm_standin",
]
