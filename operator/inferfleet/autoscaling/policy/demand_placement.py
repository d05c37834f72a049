"""Place a service-wide demand (req/s) on tiers: cheapest first, within the spec's rules.

Rules, in the order they apply:
1. A tier with a routing share gets exactly that share of the demand (the router
   sends it there whatever we do); what exceeds its maximum spills to the pool.
2. The pool (demand not covered by shares) is split into a *base* (the recent trough,
   the load that is always there) and a *burst* (everything above it).
3. The base goes to on-demand tiers, filling warm-minimum replicas that are paid for
   anyway first, then tiers in order of cost per served request; spot tiers only take
   base load when on-demand tiers are full.
4. The burst first fills spare room in replicas already needed, then whole replicas of
   spot tiers (the production-lessons article: on-demand base, spot on top for
   bursts). What is left, less than one replica of a spot tier, goes where the
   replicas it needs cost least (a tier's price per replica is its cost per request
   times its requests per second), so a burst worth one small on-demand replica does
   not start a big, half-empty spot one; then spot tiers, then on-demand, to their
   maximum.
A tier marked unavailable (it keeps failing to become ready) gets nothing; its share
goes to the pool so the next tier takes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

EPSILON = 1e-9
# cost_rank of a tier without a price (spec order from there on): no price to compare.
UNPRICED_RANK = 1e12


@dataclass(frozen=True, slots=True)
class TierSlot:
    name: str
    usable_rps: float
    min_replicas: int
    max_replicas: int
    cost_rank: float  # lower is cheaper per served request
    spot: bool = False
    share: float | None = None
    available: bool = True


@dataclass(frozen=True, slots=True)
class Placement:
    rps: dict[str, float]  # demand placed on each tier
    replicas: dict[str, int]  # within [min, max]
    unplaced_rps: float
    needed: dict[str, int]  # replicas the placed demand alone needs (no warm-minimum floor)


def replicas_for(rps: float, usable_rps: float) -> int:
    if rps <= EPSILON or usable_rps <= 0.0:
        return 0
    return math.ceil(rps / usable_rps - EPSILON)


def _fill_remainder(
    amount: float, candidates: Sequence[TierSlot], alloc: dict[str, float], room: Callable[[TierSlot], float]
) -> float:
    """Put `amount` (less than one replica's worth) on the tier whose new replicas for it
    cost least; candidates come in preference order, which breaks ties."""
    if amount <= EPSILON:
        return amount
    best: tuple[float, TierSlot] | None = None
    for tier in candidates:
        if room(tier) < amount - EPSILON:
            continue
        if tier.cost_rank >= UNPRICED_RANK:
            if best is None:
                best = (math.inf, tier)  # no price: the preference order decides
            continue
        before = replicas_for(alloc[tier.name], tier.usable_rps)
        added = replicas_for(alloc[tier.name] + amount, tier.usable_rps) - before
        price = added * tier.cost_rank * tier.usable_rps
        if best is None or price < best[0] - EPSILON:
            best = (price, tier)
    if best is None:
        return amount
    alloc[best[1].name] += amount
    return 0.0


def place(demand_rps: float, base_rps: float, tiers: Sequence[TierSlot]) -> Placement:
    alloc = {tier.name: 0.0 for tier in tiers}
    usable = [tier for tier in tiers if tier.available and tier.usable_rps > 0.0]
    by_cost = sorted(usable, key=lambda tier: tier.cost_rank)

    def room(tier: TierSlot) -> float:
        return max(0.0, tier.max_replicas * tier.usable_rps - alloc[tier.name])

    pool = demand_rps
    for tier in usable:
        if tier.share is None:
            continue
        wanted = tier.share * demand_rps
        taken = min(wanted, room(tier))
        alloc[tier.name] += taken
        pool -= taken  # what did not fit stays in the pool and spills
    pool = max(0.0, pool)
    free = [tier for tier in by_cost if tier.share is None]

    def fill(amount: float, candidates: Sequence[TierSlot], limit: str) -> float:
        for tier in candidates:
            if amount <= EPSILON:
                break
            if limit == "paid":
                # Capacity of replicas that run anyway: warm minimum or already rounded up.
                paid = max(tier.min_replicas, replicas_for(alloc[tier.name], tier.usable_rps))
                space = max(0.0, min(paid, tier.max_replicas) * tier.usable_rps - alloc[tier.name])
            elif limit == "whole":
                # Only replicas the amount fills entirely; the remainder is placed by price.
                whole = math.floor(amount / tier.usable_rps + EPSILON) * tier.usable_rps
                space = min(room(tier), whole)
            else:
                space = room(tier)
            taken = min(amount, space)
            alloc[tier.name] += taken
            amount -= taken
        return amount

    on_demand = [tier for tier in free if not tier.spot]
    spot = [tier for tier in free if tier.spot]
    base = min(pool, max(0.0, base_rps))
    burst = pool - base
    base = fill(base, on_demand, "paid")
    base = fill(base, on_demand, "max")
    base = fill(base, spot, "max")
    burst += base  # base that found no room is treated like burst
    burst = fill(burst, free, "paid")
    # Spot takes the burst in whole replicas where a request costs no more there than
    # on the cheapest on-demand tier: spot is for bursts because it is cheap.
    cheapest_on_demand = min((tier.cost_rank for tier in on_demand), default=math.inf)
    cheap_spot = [t for t in spot if t.cost_rank <= cheapest_on_demand or t.cost_rank >= UNPRICED_RANK]
    burst = fill(burst, cheap_spot, "whole")
    burst = _fill_remainder(burst, spot + on_demand, alloc, room)
    burst = fill(burst, spot, "max")
    burst = fill(burst, on_demand, "max")

    replicas = {
        tier.name: min(
            tier.max_replicas, max(tier.min_replicas, replicas_for(alloc[tier.name], tier.usable_rps))
        )
        for tier in tiers
    }
    needed = {
        tier.name: min(tier.max_replicas, replicas_for(alloc[tier.name], tier.usable_rps)) for tier in tiers
    }
    return Placement(rps=alloc, replicas=replicas, unplaced_rps=max(0.0, burst), needed=needed)
