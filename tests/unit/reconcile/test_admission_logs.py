"""A user's typo denied by the webhook is not an operator error in the log.

kopf's own admission path (`serve_admission_request`: the handler run, its outcome
logged, the AdmissionReview answered) with the operator's validate handler, logging
set up as `inferfleet run` sets it up (cli.run.start, kopf.run itself left out).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import references
from kopf._core.engines import admission
from kopf._core.reactor import inventory

from inferfleet import admission_handlers
from inferfleet.cli import run
from inferfleet.config import OperatorSettings
from inferfleet.handlers import WEBHOOK_PLAN
from tests.unit.reconcile.fixtures import Control, example

RESOURCE = references.Resource("inferfleet.dev", "v1alpha1", "inferenceservices")


def review(body: dict[str, Any], control: Control) -> dict[str, Any]:
    """The AdmissionReview kopf answers for a CREATE of `body`."""
    assert admission_handlers.validate_plan  # registered with kopf by the import
    request = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "resource": {"group": RESOURCE.group, "version": RESOURCE.version, "resource": RESOURCE.plural},
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": body,
        },
    }
    answer = asyncio.run(
        admission.serve_admission_request(
            request,  # type: ignore[arg-type]
            webhook=WEBHOOK_PLAN,
            settings=kopf.OperatorSettings(),
            memories=inventory.ResourceMemories(),
            memobase=control.memo,
            registry=kopf.get_default_registry(),
            insights=references.Insights(webhook_resources={RESOURCE}),
            indices={},  # type: ignore[arg-type]
        )
    )
    return dict(answer["response"])


@pytest.fixture(autouse=True)
def _started(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`inferfleet run`'s start, up to kopf.run; the loggers as they were afterwards."""
    target = logging.getLogger("kopf.objects")
    before = list(target.filters)
    monkeypatch.setattr(kopf, "run", lambda **_: None)
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    settings = OperatorSettings()
    options = run.decide_options(
        settings, namespaces=[], all_namespaces=False, peering="p", standalone=True,
        webhook_host="op.ns.svc", webhook_cert_dir=None, verbose=False,
    )  # fmt: skip
    run.start(options, settings)
    yield
    target.filters[:] = before


def test_a_denied_typo_is_logged_at_info_not_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = example()
    body["spec"]["tiers"][1]["gpu"] = "H1000"  # a typo
    answer = review(body, Control())
    assert answer["allowed"] is False
    assert "spec.tiers[1].gpu: unknown GPU 'H1000'" in answer["status"]["message"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    (denied,) = [r for r in caplog.records if "H1000" in r.getMessage()]
    assert denied.levelno == logging.INFO, denied.levelname
    assert denied.getMessage().startswith("admission denied: spec.tiers[1].gpu: unknown GPU 'H1000'")


def test_a_handler_that_fails_is_still_an_error(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    # A bug in the check, not a denial: kopf logs it with its traceback, at ERROR.
    monkeypatch.setattr(admission_handlers.admission, "review", broken)
    caplog.set_level(logging.DEBUG)
    answer = review(example(), Control())
    assert answer["allowed"] is False
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and all(r.exc_info for r in errors), [r.getMessage() for r in errors]
