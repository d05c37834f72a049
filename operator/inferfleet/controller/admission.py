"""What the validating webhook answers for an InferenceService (no kopf here).

A spec no tier can serve is refused at `kubectl apply` with the planner's own words;
a spec some tiers cannot serve is admitted with one warning per such tier. The
operator handles both safely without the webhook (conditions, no deletions): the
webhook only moves the news earlier, to the person applying the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService, Plan, SpecInvalid, parse

Planner = Callable[[InferenceService], Plan]


@dataclass(frozen=True)
class Verdict:
    """`rejection` is None when the object is admitted."""

    rejection: str | None
    warnings: tuple[str, ...] = ()


def review(body: Mapping[str, Any], planner: Planner) -> Verdict:
    try:
        service = parse({**body, "status": None}, source=str((body.get("metadata") or {}).get("name", "")))
        plan = planner(service)
    except SpecInvalid as error:
        return Verdict("; ".join(str(problem) for problem in error.problems) or str(error))
    except ValueError as error:
        return Verdict(f"the planner rejected the spec: {error}")
    infeasible = [tier for tier in plan.tiers if not tier.feasible]
    if infeasible and len(infeasible) == len(plan.tiers):
        words = "; ".join(f"tier {tier.name}: {tier.infeasible_reason}" for tier in infeasible)
        return Verdict(f"no tier can serve {service.spec.model.name}: {words}")
    return Verdict(
        None,
        tuple(
            f"tier {tier.name} is infeasible and will not be deployed: {tier.infeasible_reason}"
            for tier in infeasible
        ),
    )
