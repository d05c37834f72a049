"""The verdict on a spec at admission (pure): what refuses it, what is only warned about.

The validating webhook and `inferfleet validate` answer from the design, as the
reconciler acts on it (`Planned=False`, InvalidSpec, for design.refusals): beyond the
checks, a spec no tier can serve is refused with the planner's own words (the reconciler
reports it as NoFeasibleTier), and a spec some tiers cannot serve is admitted with one
warning per such tier.

A model the catalog lacks, whose source a probe Job can read, is admitted: the probe runs
in the tenant's namespace with the tenant's credentials once the object exists
(reconcile.modelprobe), and nothing here reads the source. The warning says where the
architecture will be read from and where the verdict shows; what can be judged without
it (GPU names, the cache path, the front door, ...) is still refused, and each tier's own
problems are warned about, to be refused by the reconciler once the probe finds that
tier feasible.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.api import InferenceService, Plan, Problem
from inferfleet.caching.precache.layout import DEFAULT_REF
from inferfleet.design.derive import Design


@dataclass(frozen=True)
class Judgement:
    """What refuses a parsed spec (each with its field path) and what is only warned about."""

    problems: tuple[Problem, ...]
    warnings: tuple[str, ...] = ()


def probe_warning(service: InferenceService, source: str) -> str:
    revision = service.spec.model.revision or DEFAULT_REF
    where = service.namespace or "its namespace"
    return (
        f"spec.model: {service.spec.model.name!r} is not in the operator's model catalog: its architecture "
        f"will be read from {source}@{revision} by a probe Job in namespace {where}, with this namespace's "
        f"credentials (the webhook cannot read it); the verdict shows in status.modelSource and the "
        f"ModelConfigRead condition, the plan in the Planned condition (kubectl describe "
        f"inferenceservice {service.name})"
    )


def unservable(service: InferenceService, plan: Plan) -> Problem | None:
    """A refusal naming every tier by its path when no tier can serve the model."""
    index = {tier.name: position for position, tier in enumerate(service.spec.tiers)}
    infeasible = [tier for tier in plan.tiers if not tier.feasible]
    if not infeasible or len(infeasible) < len(plan.tiers):
        return None

    def where(name: str) -> str:
        return f"spec.tiers[{index[name]}]" if name in index else "spec.tiers"

    words = "; ".join(f"{where(tier.name)} ({tier.name}): {tier.infeasible_reason}" for tier in infeasible)
    return Problem("spec.tiers", f"no tier can serve {service.spec.model.name}: {words}")


def judge(designed: Design) -> Judgement:
    """The admission verdict on one design (see the module docstring)."""
    service, source = designed.service, designed.awaiting_source
    if designed.spec_refusals or source is not None:
        pending = [probe_warning(service, source)] if source is not None else []
        pending += [
            f"{problem} (refused once the probe finds this tier feasible)" for problem in designed.deferred
        ]
        return Judgement(designed.spec_refusals, tuple(pending))
    if designed.plan_failure is not None or designed.plan is None:
        return Judgement(designed.plan_failure.problems if designed.plan_failure else ())
    plan = designed.plan
    refused = unservable(service, plan)
    if refused is not None:
        return Judgement((refused,))
    infeasible = tuple(
        f"tier {tier.name} is infeasible and will not be deployed: {tier.infeasible_reason}"
        for tier in plan.tiers
        if not tier.feasible
    )
    return Judgement(designed.refusals, () if designed.refusals else infeasible)
