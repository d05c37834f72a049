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
# A denial is shown to the person running kubectl; beyond this it is noise.
MAX_CHARS = 4096


@dataclass(frozen=True)
class Verdict:
    """`rejection` is None when the object is admitted."""

    rejection: str | None
    warnings: tuple[str, ...] = ()


def _with_path(problem: Problem) -> str:
    # A problem of the whole object (not a mapping, too large) has no field of its own.
    return str(problem) if problem.path else f"(object): {problem.message}"


def _refusal(problems: list[Problem]) -> Verdict:
    return Verdict("; ".join(_with_path(problem) for problem in problems)[:MAX_CHARS])


def review(body: Mapping[str, Any], planner: Planner, checks: Checks | None = None) -> Verdict:
    """Admit or refuse one object. Never raises: every refusal names the field it is about,
    whatever the object holds (kopf would turn an exception into an HTTP 500 answer).

    `checks(service, feasible_tiers)`: problems only the operator's catalogs and settings
    show (render.checks): an unknown GPU or model, a cache path outside the allowed root, a
    tier without placement, ...; any one refuses the spec."""
    try:
        metadata = body.get("metadata") if isinstance(body, Mapping) else None
        name = str(metadata.get("name", "")) if isinstance(metadata, Mapping) else ""
        document = {**body, "status": None} if isinstance(body, Mapping) else body
        service = parse(document, source=name)
    except SpecInvalid as error:
        return Verdict("; ".join(_with_path(problem) for problem in error.problems) or str(error))
    except Exception as error:  # parse() turns every user error into SpecInvalid; this is a bug
        return Verdict(f"(object): cannot read this object ({type(error).__name__}: {error})"[:MAX_CHARS])
    try:
        unknown = checks(service, None) if checks is not None else []
        if unknown:
            return _refusal(unknown)
        plan = planner(service)
    except SpecInvalid as error:
        return Verdict("; ".join(_with_path(problem) for problem in error.problems) or str(error))
    except ValueError as error:
        return Verdict(f"spec: the planner cannot size this spec: {error}"[:MAX_CHARS])
    except Exception as error:
        return Verdict(f"spec: the planner failed on this spec ({type(error).__name__}: {error})"[:MAX_CHARS])
    index = {tier.name: position for position, tier in enumerate(service.spec.tiers)}
    infeasible = [tier for tier in plan.tiers if not tier.feasible]

    def where(name: str) -> str:
        return f"spec.tiers[{index[name]}]" if name in index else "spec.tiers"

    if infeasible and len(infeasible) == len(plan.tiers):
        words = "; ".join(
            f"{where(tier.name)} ({tier.name}): {tier.infeasible_reason}" for tier in infeasible
        )
        return Verdict(f"no tier can serve {service.spec.model.name}: {words}"[:MAX_CHARS])
    try:
        refused = checks(service, {tier.name for tier in plan.feasible_tiers}) if checks is not None else []
    except Exception as error:
        words = f"spec: the operator cannot check this spec ({type(error).__name__}: {error})"
        return Verdict(words[:MAX_CHARS])
    if refused:
        return _refusal(refused)
    return Verdict(
        None,
        tuple(
            f"tier {tier.name} is infeasible and will not be deployed: {tier.infeasible_reason}"
            for tier in infeasible
        ),
    )
