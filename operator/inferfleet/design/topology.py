"""The front door's topology (pure): which Gateway, which pools over which tiers, their
route weights, how long each pool's picker holds a request and how many it queues.

render.frontdoor turns this into objects (the route, the pools, the pickers and their
configuration); the autoscaler reads the pools' queues by their names and the simulator
replays the same pools. The module docstring of render.frontdoor explains the shapes
(`gateway` and `service` mode, share-mode pools with overflow tiers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.api import InferenceService, Plan, TierPlan
from inferfleet.api.frontdoor_spec import EndpointPickerRef
from inferfleet.config import OperatorSettings
from inferfleet.design import object_names as names
from inferfleet.planner.workload import tier_share

# Route weights are integers: shares to a thousandth.
WEIGHT_SCALE = 1000
# Holds move in whole steps so a new cold-start measurement rarely restarts a picker
# (a restart drops what it holds).
HOLD_STEP_S = 30


@dataclass(frozen=True)
class Pool:
    """One InferencePool: its name, the tiers it routes to first, their overflow tiers,
    its route weight (None: the only backend), its hold and the most requests its picker
    queues (flowControl.maxRequests)."""

    name: str
    tiers: tuple[str, ...]
    overflow: tuple[str, ...]
    weight: int | None
    hold_s: int
    queue_limit: int


@dataclass(frozen=True)
class Gateway:
    name: str
    namespace: str | None
    section_name: str | None


@dataclass(frozen=True)
class FrontDoor:
    """What the front door of one InferenceService is, before it becomes objects."""

    mode: str
    gateway: Gateway | None
    pools: tuple[Pool, ...]
    picker: EndpointPickerRef | None  # a picker the platform runs, else one per pool
    # The pool's picker splits requests into prefill and decode (design.pd_split).
    disaggregated: bool = False

    @property
    def holds_requests(self) -> bool:
        if self.mode != "gateway":
            return False
        return self.picker is None or self.picker.holds_requests

    def pool_of(self, tier: str) -> Pool | None:
        """The pool whose picker holds requests for `tier` when it is at zero."""
        return next((pool for pool in self.pools if tier in pool.tiers), None)


def gateway_of(service: InferenceService, settings: OperatorSettings) -> Gateway | None:
    """The Gateway the route attaches to: the spec's, else the operator's default."""
    front = service.spec.front_door
    if front is not None and front.mode == "service":
        return None
    if front is not None and front.gateway is not None:
        ref = front.gateway
        return Gateway(ref.name, ref.namespace, ref.section_name)
    if settings.gateway_name:
        return Gateway(settings.gateway_name, settings.gateway_namespace, None)
    return None


def mode_of(service: InferenceService, settings: OperatorSettings) -> str:
    return "gateway" if gateway_of(service, settings) is not None else "service"


def hold_seconds(
    service: InferenceService,
    settings: OperatorSettings,
    tiers: Sequence[TierPlan],
    measured_cold_start_s: Mapping[str, float],
    estimated_cold_start_s: Mapping[str, float] | None = None,
) -> int:
    """How long a picker holds a request: the slowest of `tiers` to start (measured when the
    cluster has shown it, never below the estimate) plus the cold-start margin, in whole
    steps; `frontDoor.holdSeconds` wins. `estimated_cold_start_s` replaces a tier's
    `coldStartSeconds` as the estimate: the warm-cache start where every eligible node
    holds the tier's compile cache (design.derive), else the first start."""
    front = service.spec.front_door
    if front is not None and front.hold_seconds is not None:
        return front.hold_seconds
    estimated = estimated_cold_start_s or {}
    slowest_s = max(
        (
            max(estimated.get(tier.name, tier.cold_start_seconds), measured_cold_start_s.get(tier.name, 0.0))
            for tier in tiers
        ),
        default=0.0,
    )
    return HOLD_STEP_S * math.ceil((slowest_s + settings.cold_start_margin_s) / HOLD_STEP_S)


def queue_limit(service: InferenceService, tiers: Sequence[TierPlan]) -> int:
    """The most requests a pool's picker queues (flowControl.maxRequests): what the pool's
    smallest serving fleet (its tiers' warm minimums; one replica of the slowest tier when
    all may stand at zero) serves within one TTFT SLO, and at least one, so a pool at zero
    always holds its first request.

    The pinned router bounds a queued request's wait by one TTL whether the pool has no pod
    or only busy ones (llm-d-router PR #2284 splits the two after v0.10.0), and that TTL
    must be the hold; so the saturated regime is bounded by length: a request waits behind
    at most this many, and the next one is answered 429 at once."""
    warm = {tier.name: tier.min_replicas for tier in service.spec.tiers}
    warm_rps = sum(warm.get(tier.name, 0) * tier.usable_rps for tier in tiers)
    floor_rps = warm_rps or min((tier.usable_rps for tier in tiers), default=0.0)
    bound_s = service.spec.workload.slo.ttft_p99_ms / 1000.0
    return max(1, math.floor(bound_s * floor_rps))


def _zero_able(service: InferenceService, tiers: Sequence[TierPlan]) -> list[TierPlan]:
    """The tiers that may stand at zero replicas (what a hold has to outlast); all of them
    when none may (a pool can still empty during a failure)."""
    by_name = {tier.name: tier for tier in service.spec.tiers}
    zero = [tier for tier in tiers if by_name[tier.name].min_replicas == 0]
    return zero or list(tiers)


def resolve(
    service: InferenceService,
    plan: Plan,
    settings: OperatorSettings,
    measured_cold_start_s: Mapping[str, float] | None = None,
    estimated_cold_start_s: Mapping[str, float] | None = None,
) -> FrontDoor:
    """The front door the spec, plan and settings ask for; the two mappings as in
    `hold_seconds` (per tier: the measured start and the estimate of the case in force)."""
    measured = measured_cold_start_s or {}
    estimated = estimated_cold_start_s or {}
    gateway = gateway_of(service, settings)
    picker = service.spec.front_door.endpoint_picker if service.spec.front_door else None
    feasible = plan.feasible_tiers
    if gateway is None:
        return FrontDoor("service", None, (), picker)
    if not service.spec.workload.routing or not feasible:
        # One pool over every serving pod of the service. With no tier feasible it stays,
        # routing to the workloads an infeasible spec leaves running.
        members = feasible or plan.tiers
        hold = hold_seconds(service, settings, _zero_able(service, members), measured, estimated)
        limit = queue_limit(service, members)
        pool = Pool(service.name, tuple(t.name for t in members), (), None, hold, limit)
        split = plan.disaggregation
        return FrontDoor("gateway", gateway, (pool,), picker, split is not None and split.deployed)
    specs = {tier.name: tier for tier in service.spec.tiers}
    pools = []
    for tier in feasible:
        overflow = tuple(t.name for t in feasible if t.max_model_len > tier.max_model_len)
        weight = round(tier_share(service.spec, specs[tier.name]) * WEIGHT_SCALE)
        hold = hold_seconds(service, settings, [tier], measured, estimated)
        name = names.bounded(f"{service.name}-{tier.name}")
        pools.append(Pool(name, (tier.name,), overflow, weight, hold, queue_limit(service, [tier])))
    return FrontDoor("gateway", gateway, tuple(pools), picker)
