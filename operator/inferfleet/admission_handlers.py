"""kopf wiring for the validating admission webhook (`inferfleet run --webhook-host`).

A module of its own because kopf refuses to start when an admission handler is
registered but no webhook server is configured: `inferfleet run` imports it only when
the webhook is on, so the operator also runs without one (conditions still report a
spec nothing can serve).
"""

from __future__ import annotations

from typing import Any

import kopf

from inferfleet.controller import admission
from inferfleet.controller.reconciler import Reconciler
from inferfleet.handlers import GVP, WEBHOOK_PLAN


# Served by every replica; the webhook's configuration (failurePolicy Ignore, every
# replica's certificate) is the operator's own, controller.webhook_config.
@kopf.on.validate(*GVP, id=WEBHOOK_PLAN, operations=["CREATE", "UPDATE"])
def validate_plan(*, body: kopf.Body, memo: Any, warnings: list[str], **_: Any) -> None:
    reconciler: Reconciler = memo["reconciler"]
    verdict = admission.review(dict(body), reconciler.settings)
    warnings.extend(verdict.warnings)
    if verdict.rejection is not None:
        raise kopf.AdmissionError(verdict.rejection, code=422)
