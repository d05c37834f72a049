"""Drift correction without a finalizer: the resync loop, and what kopf is told to register."""

from __future__ import annotations

import importlib
from typing import Any

import kopf
import pytest
from prometheus_client import CollectorRegistry

from inferfleet import handlers
from inferfleet.cli.run import HANDLER_MODULES
from inferfleet.cluster import TransientApiError
from inferfleet.controller import leader
from inferfleet.controller.leader import LeaseConfig
from inferfleet.controller.resync import PassSummary, Resync
from inferfleet.kubedata import ObjectRef
from inferfleet.metrics.operator_metrics import OperatorMetrics
from tests.unit.reconcile.fixtures import NAMESPACE, Control, example


def created() -> Control:
    control = Control()
    control.submit(example())
    control.reconcile()
    return control


def resync_of(control: Control, namespaces: tuple[str, ...] = ()) -> Resync:
    return Resync(control.memo["reconciler"], namespaces=namespaces, interval_s=3600)


def test_resync_restores_a_deleted_service_and_an_edited_workload() -> None:
    control = created()
    service = ObjectRef("v1", "Service", NAMESPACE, "llama-8b-chat-l4-api")
    control.cluster.delete(service)

    def tamper(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else:latest"

    control.cluster.update(control.workload_ref("l4"), tamper, manager="kubectl-edit")

    summary = resync_of(control).run_once()

    assert summary.reconciled == 1 and summary.failed == 0
    assert service in control.cluster.objects
    pod = control.cluster.objects[control.workload_ref("l4")]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == control.settings.vllm_image


def test_no_pass_ever_writes_a_finalizer() -> None:
    control = created()
    resync_of(control).run_once()
    control.reconcile()
    assert not control.cr()["metadata"].get("finalizers")


def test_resync_lists_only_the_watched_namespaces() -> None:
    control = created()
    other = example()
    other["metadata"]["namespace"] = "elsewhere"
    control.submit(other)
    assert resync_of(control).targets() == [("elsewhere", "llama-8b-chat"), (NAMESPACE, "llama-8b-chat")]
    assert resync_of(control, (NAMESPACE,)).targets() == [(NAMESPACE, "llama-8b-chat")]
    assert resync_of(control, ("else*",)).targets() == [("elsewhere", "llama-8b-chat")]


def test_one_failing_object_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    control = created()
    other = example()
    other["metadata"]["name"] = "second"
    control.submit(other)
    reconciler = control.memo["reconciler"]
    original = reconciler.reconcile

    def flaky(namespace: str, name: str) -> Any:
        if name == "llama-8b-chat":
            raise TransientApiError("429 from the API server")
        return original(namespace, name)

    monkeypatch.setattr(reconciler, "reconcile", flaky)
    summary = resync_of(control).run_once()
    assert (summary.reconciled, summary.failed) == (1, 1)
    assert control.cr("second").get("status")


def _handlers_of(module: str) -> list[Any]:
    importlib.import_module(module)
    registry = kopf.get_default_registry()
    found = [*registry._spawning.get_all_handlers(), *registry._changing.get_all_handlers()]
    return [handler for handler in found if handler.fn.__module__ == module]


def _finalizer_handlers(module: str) -> list[str]:
    # kopf writes its finalizer exactly when a matching handler says it requires one:
    # every timer and daemon does, and on.delete unless optional=True.
    return [handler.id for handler in _handlers_of(module) if handler.requires_finalizer]


def test_the_reconcile_handlers_make_kopf_add_no_finalizer() -> None:
    assert _handlers_of("inferfleet.handlers"), "no handlers registered: the test checks nothing"
    assert _finalizer_handlers("inferfleet.handlers") == []


@pytest.mark.parametrize("module", [m for m in HANDLER_MODULES if m != "inferfleet.handlers"])
def test_other_handler_modules_make_kopf_add_no_finalizer(module: str) -> None:
    assert _finalizer_handlers(module) == []


def test_startup_starts_one_resync_loop_and_cleanup_stops_it() -> None:
    control = created()
    memo = control.memo
    memo["settings"] = control.settings
    memo["namespaces"] = (NAMESPACE,)
    settings = kopf.OperatorSettings()
    handlers.configure(settings=settings, memo=memo)
    loop = memo["resync"]
    try:
        assert loop.namespaces == (NAMESPACE,)
        assert settings.persistence.finalizer == handlers.LEGACY_FINALIZER
        handlers.configure(settings=settings, memo=memo)
        assert memo["resync"] is loop
    finally:
        handlers.stop_resync(memo=memo)
    assert not loop.running


def test_a_standby_replica_resyncs_nothing() -> None:
    control = created()
    control.cluster.calls.clear()
    loop = Resync(control.memo["reconciler"], interval_s=3600, is_leader=lambda: False)
    assert loop.run_once() == PassSummary(reconciled=0, failed=0, standby=True)
    assert control.cluster.calls == []  # not even the listing


def test_startup_shares_one_lease_between_resync_and_autoscaler() -> None:
    control = created()
    memo = control.memo
    memo.update(
        settings=control.settings,
        cluster=control.cluster,
        leader_election=LeaseConfig("ops", "inferfleet", "replica-a"),
    )
    handlers.configure(settings=kopf.OperatorSettings(), memo=memo)
    try:
        elector = memo["leader"]
        assert memo["resync"].is_leader == elector.is_leader
        assert leader.from_memo(memo) is elector
    finally:
        handlers.stop_resync(memo=memo)
    assert not elector.is_leader()


# --- the operator's own reconcile metrics ---------------------------------------------------


def sample(metrics: OperatorMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_every_pass_is_counted_and_timed_by_kind_of_outcome() -> None:
    control = Control()
    metrics = OperatorMetrics(CollectorRegistry())
    control.memo["metrics"] = metrics
    control.submit(example())
    control.reconcile()
    assert sample(metrics, "inferfleet_reconcile_total", result="success") == 1
    assert sample(metrics, "inferfleet_reconcile_duration_seconds_count") == 1

    # The user's error: the pass succeeds, and counts as a spec error.
    control.edit(lambda body: body["spec"]["tiers"][0].__setitem__("minReplicas", -3))
    control.reconcile()
    assert sample(metrics, "inferfleet_reconcile_total", result="success") == 2
    assert sample(metrics, "inferfleet_reconcile_errors_total", kind="spec") == 1

    # The world's error: the pass fails, is retried by kopf, and counts as transient.
    control.cluster.inject("get", TransientApiError("apiserver away", 503), kind="InferenceService")
    with pytest.raises(kopf.TemporaryError):
        control.reconcile()
    assert sample(metrics, "inferfleet_reconcile_total", result="error") == 1
    assert sample(metrics, "inferfleet_reconcile_errors_total", kind="transient") == 1

    # The resync loop's passes count the same way.
    Resync(control.memo["reconciler"], interval_s=3600, metrics=metrics).run_once()
    assert sample(metrics, "inferfleet_reconcile_total", result="success") == 3
    assert sample(metrics, "inferfleet_reconcile_duration_seconds_count") == 4
