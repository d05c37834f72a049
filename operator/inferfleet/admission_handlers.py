"""kopf wiring for the validating admission webhook (`inferfleet run --webhook-host`).

A module of its own because kopf refuses to start when an admission handler is
registered but no webhook server is configured: `inferfleet run` imports it only when
the webhook is on, so the operator also runs without one (conditions still report a
spec nothing can serve).
"""

from __future__ import annotations

from typing import Any

import kopf

from inferfleet.api import InferenceService, Problem
from inferfleet.controller import admission
from inferfleet.controller.reconciler import Reconciler
from inferfleet.handlers import GVP, WEBHOOK_PLAN
from inferfleet.render import checks


@kopf.on.validate(*GVP, id=WEBHOOK_PLAN, operations=["CREATE", "UPDATE"])
def validate_plan(*, body: kopf.Body, memo: Any, warnings: list[str], **_: Any) -> None:
    reconciler: Reconciler = memo["reconciler"]
    settings = reconciler.settings

    def refusals(service: InferenceService, feasible: set[str] | None) -> list[Problem]:
        if feasible is None:
            return checks.catalog_problems(service, settings.catalogs())
        return checks.render_problems(service, settings, feasible)

    verdict = admission.review(dict(body), reconciler.planner, refusals)
    warnings.extend(verdict.warnings)
    if verdict.rejection is not None:
        raise kopf.AdmissionError(verdict.rejection, code=422)
