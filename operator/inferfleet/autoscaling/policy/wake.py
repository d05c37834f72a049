"""Waking a tier from zero when the front door holds requests (pure).

With `allowScaleToZero` a pool can stand empty; its endpoint picker then holds arriving
requests (flow control) and exports how many it holds. No vLLM pod is there to report
a queue, so the ordinary reactive rule sees nothing: this rule reads the picker's queue.
When a pool holds requests and none of its tiers has a replica wanted, one tier is
woken: among the pool's tiers that can run (feasible, not failing, allowed a replica),
the cheapest per served request among those whose nodes already hold the weights (a
pre-cache pod is Ready there, so the cold start is a load from local disk), else the
cheapest. It gets enough replicas for what is held, one at least. While a pool holds
requests, none of its tiers is scaled down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.autoscaling.policy.types import FrontDoorSignals


@dataclass(frozen=True, slots=True)
class WakeCandidate:
    name: str
    current: int  # replicas wanted now (spec.replicas)
    runnable: bool  # feasible, not failing, maxReplicas > 0
    cost_rank: float
    max_replicas: int
    slots_per_replica: float  # requests one replica runs at once


@dataclass(frozen=True, slots=True)
class Wake:
    tier: str
    replicas: int
    reason: str


def held_tiers(door: FrontDoorSignals | None) -> frozenset[str]:
    """Tiers of every pool that holds requests now: none of them may scale down."""
    if door is None:
        return frozenset()
    return frozenset(t for pool in door.pools if (pool.waiting or 0.0) > 0 for t in pool.tiers)


def wakes(door: FrontDoorSignals | None, candidates: Sequence[WakeCandidate]) -> dict[str, Wake]:
    """Tier -> the wake it gets (at most one tier per pool that holds requests)."""
    if door is None:
        return {}
    by_name: Mapping[str, WakeCandidate] = {c.name: c for c in candidates}
    out: dict[str, Wake] = {}
    for pool in door.pools:
        held = pool.waiting or 0.0
        members = [by_name[t] for t in pool.tiers if t in by_name]
        if held <= 0 or not members or any(m.current > 0 for m in members):
            continue  # nothing held, or a replica is wanted already (it may be starting)
        runnable = [m for m in members if m.runnable and m.max_replicas > 0]
        if not runnable:
            continue
        cached = [m for m in runnable if m.name in door.cached_tiers]
        chosen = min(cached or runnable, key=lambda m: m.cost_rank)
        replicas = min(chosen.max_replicas, max(1, math.ceil(held / max(1.0, chosen.slots_per_replica))))
        why = "its nodes already hold the weights" if cached else "no tier's nodes hold the weights yet"
        reason = (
            f"{held:.0f} request(s) held at the front door with no replica; waking {chosen.name} "
            f"(the cheapest tier of the pool; {why})"
        )
        previous = out.get(chosen.name)
        if previous is None or previous.replicas < replicas:
            out[chosen.name] = Wake(chosen.name, replicas, reason)
    return out
