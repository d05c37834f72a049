"""What the validating webhook answers for an InferenceService (no kopf here, no I/O):
the design's verdict (design.verdict), as one denial message or warnings.

The operator handles every spec safely without the webhook (conditions, no deletions):
the webhook only moves the news earlier, to the person applying the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.api import Problem, SpecInvalid, parse
from inferfleet.config import OperatorSettings
from inferfleet.design import design
from inferfleet.design.verdict import Judgement, judge

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


def _refusal(problems: tuple[Problem, ...] | list[Problem]) -> Verdict:
    return Verdict("; ".join(_with_path(problem) for problem in problems)[:MAX_CHARS])


def review(body: Mapping[str, Any], settings: OperatorSettings | None = None) -> Verdict:
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
    try:
        judgement = judge(design(service, settings if settings is not None else OperatorSettings()))
    except Exception as error:  # a bug in the checks: still an answer with a path
        words = f"the operator cannot check this spec ({type(error).__name__}: {error})"
        judgement = Judgement((Problem("spec", words),))
    if judgement.problems:
        return _refusal(judgement.problems)
    return Verdict(None, judgement.warnings)
