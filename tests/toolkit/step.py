"""The pure autoscaler step's input for one service, from the toolkit's builders.

step_input(a_scaled_service("chat", "ns"), [a_small_tier_plan("l4")], replicas=2, ready=2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inferfleet.autoscaling.policy import TierReadings, TierSignals
from inferfleet.autoscaling.step.drift_report import Replanner
from inferfleet.autoscaling.step.step import ServiceInput, WorkloadReplicas, deployed_design
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import DEPLOYMENT, ObjectRef
from tests.toolkit.builders import ServiceBuilder, TierPlanBuilder


def step_input(
    service: ServiceBuilder,
    plans: Sequence[TierPlanBuilder],
    *,
    replicas: int,
    ready: int,
    status: Mapping[str, Any] | None = None,
    generation: int | None = None,
    replan: Replanner | None = None,
    settings: OperatorSettings | None = None,
) -> ServiceInput:
    """The service designed (under `settings`) on its plan, and one Deployment per planned
    tier, each at `replicas` with `ready` of them Ready."""
    namespace = service.namespace or "default"
    resource = service.service()
    deployed = [plan.build() for plan in plans]
    return ServiceInput(
        design=deployed_design(resource, settings or OperatorSettings(), deployed, generation),
        status=status or {},
        workloads={
            plan.wire["name"]: WorkloadReplicas(
                ObjectRef(*DEPLOYMENT, namespace, f"{service.name}-{plan.wire['name']}"), replicas, ready
            )
            for plan in plans
        },
        generation=generation,
        replan=replan,
    )


def tier_signals(
    ready_replicas: int | None = None,
    desired_replicas: int | None = None,
    *,
    ttft_p99_ms: float | None = None,
    **readings: Any,
) -> TierSignals:
    """A tier's signals as decide() reads them: the replica counts beside readings made
    (and checked) as Prometheus's answers are; TTFT given in milliseconds."""
    ttft_s = None if ttft_p99_ms is None else ttft_p99_ms / 1000.0
    return TierSignals(ready_replicas, desired_replicas, load=TierReadings(ttft_p99_s=ttft_s, **readings))
