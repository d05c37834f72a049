"""One tier's inputs to a scaling decision (pure): what it runs, whether it is failing,
and what a replica serves for the traffic it really gets."""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.autoscaling.policy.types import TierContext
from inferfleet.design.policy_config import TierPolicy


@dataclass(frozen=True, slots=True)
class ObservedTier:
    """One tier as a decision sees it, after observing its signals."""

    ctx: TierContext
    policy: TierPolicy
    current: int
    ready: int | None
    missing: bool
    lead_s: float
    max_replicas: int
    failing: bool
    usable_rps: float  # the plan's figure rescaled to the observed mix and learned capacity
    dt_s: float  # since the previous decision
