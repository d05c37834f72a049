"""Measured cold starts replace the planner's estimate once the cluster has shown one.

The estimate (`fleet.cold_start_seconds`) divides the checkpoint by a bandwidth guess
and adds fixed start-up costs; it is right to within a factor of two at best. What the
autoscaler needs as its lead time is how long a new replica of this tier really takes,
and the cluster reports exactly that for every serving pod: the vLLM container's start
(`status.containerStatuses[].state.running.startedAt`) and the moment the pod turned
Ready (`status.conditions[Ready].lastTransitionTime`). That interval holds the weight
load at whatever the node's storage delivers (pre-cache NVMe, a network volume, or the
hub itself with no cache) plus engine start-up, so it is the measured fetch-and-load
figure with no bandwidth model in between. The operator reads it with the pod list it
already has permission for.

Why not the fetcher's own rate (`fetch_bytes_per_s` in the node marker): the operator
cannot read node files, the pre-cache pod has no API credentials to publish it (and
should not get any), and a termination message only exists once a container exits,
which a holding pre-cache pod never does. And with a pre-cache in place the fetch rate
is not on the cold-start path at all: the load is.

Pure: `observe_cold_starts(plan, measured)` returns the plan with the measured tiers'
`coldStartSeconds` and reason replaced; tiers without a measurement keep the estimate.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.api.plan import Plan

# Fewer samples than this still replace the estimate (one real start beats a guess),
# and the reason says how many there were.
COLD_START_PREFIX = "cold start ~"


@dataclass(frozen=True)
class MeasuredColdStart:
    """Start-to-Ready of a tier's serving pods: the median over `samples` pods."""

    seconds: float
    samples: int

    @classmethod
    def of(cls, startups_s: Sequence[float]) -> MeasuredColdStart | None:
        valid = [s for s in startups_s if s > 0]
        if not valid:
            return None
        return cls(seconds=float(statistics.median(valid)), samples=len(valid))


def observe_cold_starts(plan: Plan, measured: Mapping[str, MeasuredColdStart]) -> Plan:
    """`plan` with each measured feasible tier's cold start taken from the cluster."""
    if not measured:
        return plan
    tiers = []
    for tier in plan.tiers:
        found = measured.get(tier.name)
        if found is None or not tier.feasible:
            tiers.append(tier)
            continue
        reason = (
            f"{COLD_START_PREFIX}{found.seconds:.0f} s measured: median start-to-Ready of "
            f"{found.samples} serving pod(s) (container start to Ready: weight load from the "
            f"node plus engine start-up); the estimate was ~{tier.cold_start_seconds:.0f} s"
        )
        reasons = [reason if r.startswith(COLD_START_PREFIX) else r for r in tier.reasons]
        if reason not in reasons:
            reasons.append(reason)
        tiers.append(
            tier.model_copy(update={"cold_start_seconds": round(found.seconds, 1), "reasons": reasons})
        )
    return plan.model_copy(update={"tiers": tiers})
