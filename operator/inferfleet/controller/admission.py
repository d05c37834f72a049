"""What the validating webhook answers for an InferenceService (no kopf here).

A spec no tier can serve is refused at `kubectl apply` with the planner's own words;
so is one naming a GPU or model the catalogs lack, or one the operator would refuse to
render (render.checks); a spec some tiers cannot serve is admitted with one warning per
such tier. The
operator handles both safely without the webhook (conditions, no deletions): the
webhook only moves the news earlier, to the person applying the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService, Plan, Problem, SpecInvalid, parse

Planner = Callable[[InferenceService], Plan]
# (service, None) -> catalog problems; (service, feasible tier names) -> render problems.
Checks = Callable[[InferenceService, set[str] | None], list[Problem]]


@dataclass(frozen=True)
class Verdict:
    """`rejection` is None when the object is admitted."""

    rejection: str | None
    warnings: tuple[str, ...] = ()


def review(body: Mapping[str, Any], planner: Planner, checks: Checks | None = None) -> Verdict:
    """`checks(service, feasible_tiers)`: problems only the operator's catalogs and settings
    show (render.checks): an unknown GPU or model, a cache path outside the allowed root, a
    tier without placement, ...; any one refuses the spec."""
    try:
        service = parse({**body, "status": None}, source=str((body.get("metadata") or {}).get("name", "")))
        unknown = checks(service, None) if checks is not None else []
        if unknown:
            return Verdict("; ".join(str(problem) for problem in unknown))
        plan = planner(service)
    except SpecInvalid as error:
        return Verdict("; ".join(str(problem) for problem in error.problems) or str(error))
    except ValueError as error:
        return Verdict(f"the planner rejected the spec: {error}")
    infeasible = [tier for tier in plan.tiers if not tier.feasible]
    if infeasible and len(infeasible) == len(plan.tiers):
        words = "; ".join(f"tier {tier.name}: {tier.infeasible_reason}" for tier in infeasible)
        return Verdict(f"no tier can serve {service.spec.model.name}: {words}")
    refused = checks(service, {tier.name for tier in plan.feasible_tiers}) if checks is not None else []
    if refused:
        return Verdict("; ".join(str(problem) for problem in refused))
    return Verdict(
        None,
        tuple(
            f"tier {tier.name} is infeasible and will not be deployed: {tier.infeasible_reason}"
            for tier in infeasible
        ),
    )
