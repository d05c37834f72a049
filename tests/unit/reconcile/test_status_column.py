"""`kubectl get ifs` STATUS shows the worst condition, not Ready's reason.

It read `Available` while SloAtRisk was True and `Progressing` while Degraded was True.
Each writer (reconciler, autoscaler) sets `status.summary` from the whole conditions
list it writes; the CRD's printer column shows it.
"""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import crd, labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import ObjectRef
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk
from tests.unit.autoscaler.conftest import ScriptedReader
from tests.unit.reconcile.fixtures import Control, example
from tests.unit.reconcile.test_handlers import created, tighten_slo


def c(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": ""}


AVAILABLE = c("Ready", "True", "Available")
AS_PLANNED = c("Degraded", "False", "AsPlanned")
AT_RISK = c("SloAtRisk", "True", "SloUnreachable")


@pytest.mark.parametrize(
    ("conditions", "shown"),
    [
        ([AVAILABLE, AS_PLANNED, c("SloAtRisk", "False", "SlosReachable")], "Available"),
        ([AVAILABLE, AT_RISK], "SloUnreachable"),
        ([c("Ready", "False", "Progressing"), c("Degraded", "True", "ApplyFailed")], "ApplyFailed"),
        ([AVAILABLE, AT_RISK, c("ScalingActive", "False", "MetricsUnavailable")], "MetricsUnavailable"),
        ([AVAILABLE, c("WorkloadDrift", "True", "PromptsRejected")], "PromptsRejected"),
        ([AVAILABLE, c("WorkloadDrift", "False", "MatchesPlan"), AS_PLANNED], "Available"),
        ([c("Ready", "False", "NoWorkloads"), c("ModelConfigRead", "Unknown", "Probing")], "Probing"),
        ([c("Ready", "False", "NoWorkloads"), c("ModelConfigRead", "False", "ProbeFailed")], "ProbeFailed"),
        ([c("Ready", "False", "Progressing"), c("CacheReady", "False", "Fetching")], "Progressing"),
        ([AVAILABLE, c("CacheReady", "False", "FetchingRevision")], "FetchingRevision"),
        ([AVAILABLE, c("Scaling", "True", "WaitingForReplicas")], "WaitingForReplicas"),
        ([], None),
    ],
)  # fmt: skip
def test_the_worst_condition_is_shown(conditions: list[dict[str, Any]], shown: str | None) -> None:
    from inferfleet.api.status import worst_condition

    assert worst_condition(conditions) == shown


def test_every_condition_type_has_its_place_in_the_order() -> None:
    from inferfleet.api.status import WORST_FIRST

    assert {type_ for type_, _ in WORST_FIRST} == set(labels.CONDITION_TYPES)


def test_the_printer_column_shows_the_summary() -> None:
    columns = {column["name"]: column for column in crd.PRINTER_COLUMNS}
    assert columns["Status"]["jsonPath"] == ".status.summary"


def test_the_reconciler_shows_slo_at_risk_over_available() -> None:
    control = created()
    control.edit(tighten_slo)
    control.reconcile()
    control.mark_ready()
    control.reconcile()
    assert control.condition("Ready")["reason"] == "Available"
    assert control.condition("SloAtRisk")["status"] == "True"
    assert control.status()["summary"] == "SloUnreachable"


def test_the_reconciler_shows_degraded_over_progressing() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    assert control.condition("Ready")["reason"] == "Progressing"
    assert control.status()["summary"] == "Progressing"
    # Every tier infeasible: Degraded, while the workloads keep rolling out.
    control.edit(lambda body: body["spec"]["tiers"][0].__setitem__("gpu", "T4"))
    control.edit(lambda body: [tier.setdefault("overrides", {}).update(maxModelLen=10_000_000)
                               for tier in body["spec"]["tiers"]])  # fmt: skip
    control.reconcile()
    degraded = control.condition("Degraded")
    assert degraded["status"] == "True"
    assert control.condition("Ready")["status"] == "False"
    assert control.status()["summary"] == degraded["reason"]


def test_the_autoscaler_shows_scaling_inactive_over_the_reconcilers_available() -> None:
    cluster = InMemoryCluster()
    tk.install(cluster, a_scaled_service("chat", "team"))
    ref = ObjectRef(labels.API_VERSION, labels.KIND, "team", "chat")
    # As the reconciler left it: every tier Ready.
    cluster.patch_status(ref, {"conditions": [AVAILABLE], "summary": "Available"})
    reader = ScriptedReader()
    reader.down = True
    try:
        Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False)).run_once(1_800_000_000.0)
    finally:
        reader.close()
    status = tk.status(cluster, "team", "chat")
    inactive = tk.condition(cluster, "team", "chat", labels.CONDITION_SCALING_ACTIVE)
    assert inactive is not None and inactive["status"] == "False"
    ready = tk.condition(cluster, "team", "chat", labels.CONDITION_READY)
    assert ready is not None and ready["reason"] == "Available"
    assert status["summary"] == "MetricsUnavailable"
