"""What the validating webhook and `inferfleet validate` answer for an InferenceService
(no kopf here, no I/O).

Both judge a spec by `render.checks.refusals`, the function the reconciler refuses specs
with (`Planned=False`, InvalidSpec), plus the planner's verdict: a spec no tier can serve
is refused with the planner's own words (the reconciler reports it as NoFeasibleTier),
and a spec some tiers cannot serve is admitted with one warning per such tier.

A model the catalog lacks, whose source a probe Job can read, is admitted: the probe runs
in the tenant's namespace with the tenant's credentials once the object exists
(reconcile.modelprobe), and nothing here may read the source itself. The warning says
where the architecture will be read from and where the verdict shows; what can be judged
without it (GPU names, the cache path, the front door, ...) is still refused, and each
tier's own problems are warned about, to be refused by the reconciler once the probe
finds that tier feasible. The operator handles every spec safely without the webhook
(conditions, no deletions): the webhook only moves the news earlier, to the person
applying the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService, Plan, Problem, SpecInvalid, parse
from inferfleet.config import OperatorSettings
from inferfleet.design import checks
from inferfleet.precache.layout import DEFAULT_REF

Planner = Callable[[InferenceService], Plan]
# A denial is shown to the person running kubectl; beyond this it is noise.
MAX_CHARS = 4096


@dataclass(frozen=True)
class Verdict:
    """`rejection` is None when the object is admitted."""

    rejection: str | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judgement:
    """What refuses a parsed spec (each with its field path) and what is only warned about."""

    problems: tuple[Problem, ...]
    warnings: tuple[str, ...] = ()


def _with_path(problem: Problem) -> str:
    # A problem of the whole object (not a mapping, too large) has no field of its own.
    return str(problem) if problem.path else f"(object): {problem.message}"


def _refusal(problems: tuple[Problem, ...] | list[Problem]) -> Verdict:
    return Verdict("; ".join(_with_path(problem) for problem in problems)[:MAX_CHARS])


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


def _plan(service: InferenceService, planner: Planner) -> Plan | list[Problem]:
    try:
        return planner(service)
    except SpecInvalid as error:
        return error.problems or [Problem("spec", str(error))]
    except ValueError as error:
        return [Problem("spec", f"the planner cannot size this spec: {error}")]
    except Exception as error:
        return [Problem("spec", f"the planner failed on this spec ({type(error).__name__}: {error})")]


def _unservable(service: InferenceService, plan: Plan) -> Problem | None:
    index = {tier.name: position for position, tier in enumerate(service.spec.tiers)}
    infeasible = [tier for tier in plan.tiers if not tier.feasible]
    if not infeasible or len(infeasible) < len(plan.tiers):
        return None

    def where(name: str) -> str:
        return f"spec.tiers[{index[name]}]" if name in index else "spec.tiers"

    words = "; ".join(f"{where(tier.name)} ({tier.name}): {tier.infeasible_reason}" for tier in infeasible)
    return Problem("spec.tiers", f"no tier can serve {service.spec.model.name}: {words}")


def judge(service: InferenceService, planner: Planner, settings: OperatorSettings) -> Judgement:
    """The verdict on one parsed spec (see the module docstring). Never raises: every
    refusal names the field it is about."""
    try:
        source = checks.awaiting_source(service, settings)
        refused = checks.refusals(service, settings, None)
        if refused or source is not None:
            later = checks.deferred(service, settings) if source is not None else []
            pending = [probe_warning(service, source)] if source is not None else []
            pending += [f"{problem} (refused once the probe finds this tier feasible)" for problem in later]
            return Judgement(tuple(refused), tuple(pending))
        plan = _plan(service, planner)
        if isinstance(plan, list):
            return Judgement(tuple(plan))
        unservable = _unservable(service, plan)
        if unservable is not None:
            return Judgement((unservable,))
        refused = checks.refusals(service, settings, plan)
    except Exception as error:  # a bug in the checks: still an answer with a path
        return Judgement(
            (Problem("spec", f"the operator cannot check this spec ({type(error).__name__}: {error})"),)
        )
    infeasible = tuple(
        f"tier {tier.name} is infeasible and will not be deployed: {tier.infeasible_reason}"
        for tier in plan.tiers
        if not tier.feasible
    )
    return Judgement(tuple(refused), () if refused else infeasible)


def review(body: Mapping[str, Any], planner: Planner, settings: OperatorSettings | None = None) -> Verdict:
    """Admit or refuse one object. Never raises: every refusal names the field it is about,
    whatever the object holds (kopf would turn an exception into an HTTP 500 answer)."""
    try:
        metadata = body.get("metadata") if isinstance(body, Mapping) else None
        name = str(metadata.get("name", "")) if isinstance(metadata, Mapping) else ""
        document = {**body, "status": None} if isinstance(body, Mapping) else body
        service = parse(document, source=name)
    except SpecInvalid as error:
        return Verdict("; ".join(_with_path(problem) for problem in error.problems)[:MAX_CHARS] or str(error))
    except Exception as error:  # parse() turns every user error into SpecInvalid; this is a bug
        return Verdict(f"(object): cannot read this object ({type(error).__name__}: {error})"[:MAX_CHARS])
    judgement = judge(service, planner, settings if settings is not None else OperatorSettings())
    if judgement.problems:
        return _refusal(judgement.problems)
    return Verdict(None, judgement.warnings)
