"""The reconciler and the autoscaler share status, never a condition.

Both run for real on one in-memory cluster. Every status patch is attributed to its
writer, and each writer may change only the condition types `labels.CONDITION_OWNERS`
gives it. Before each condition had one owner, Degraded was written by both and told
apart by a message prefix; now the autoscaler's "cannot decide" is its own ScalingActive.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.autoscaling.loop import runner as runner_module
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.step.step import REASON_AUTOSCALING_FAILED, REASON_METRICS_AVAILABLE
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile.status_rules import REASON_AS_PLANNED
from tests.unit.autoscaler.conftest import ScriptedReader
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

T0 = 1_800_000_000.0
# What an operator from before ScalingActive left in status while Prometheus was down.
LEGACY_AUTOSCALER_DEGRADED = {
    "type": labels.CONDITION_DEGRADED,
    "status": "True",
    "reason": labels.REASON_METRICS_UNAVAILABLE,
    "message": "autoscaler: metrics unavailable, holding replica counts: connection refused",
    "lastTransitionTime": "2027-01-01T00:00:00Z",
}


def _by_type(status: Mapping[str, Any] | None) -> dict[str, tuple[Any, ...]]:
    return {
        c["type"]: (c.get("status"), c.get("reason"), c.get("message"))
        for c in (status or {}).get("conditions") or []
    }


class Writers:
    """Records which condition types each writer's status patches changed."""

    def __init__(self, control: Control) -> None:
        self.changed: dict[str, set[str]] = {labels.OWNER_RECONCILER: set(), labels.OWNER_AUTOSCALER: set()}
        self._writer: str | None = None
        cluster = control.cluster
        real_patch = cluster.patch_status

        def patch_status(ref: ObjectRef, status: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
            before = _by_type((cluster.get(ref) or {}).get("status"))
            result = real_patch(ref, status, **kwargs)
            after = _by_type(result.get("status"))
            assert self._writer is not None, f"a status patch outside any writer: {ref}"
            self.changed[self._writer] |= {
                t for t in before.keys() | after.keys() if before.get(t) != after.get(t)
            }
            return result

        cluster.patch_status = patch_status  # type: ignore[method-assign]

    @contextmanager
    def writing(self, writer: str) -> Iterator[None]:
        self._writer = writer
        try:
            yield
        finally:
            self._writer = None

    def assert_each_wrote_only_its_own(self) -> None:
        for writer, types in self.changed.items():
            strangers = {t for t in types if labels.CONDITION_OWNERS.get(t) != writer}
            assert not strangers, f"the {writer} wrote {sorted(strangers)}"


class Scene:
    def __init__(self) -> None:
        self.control = Control()
        self.writers = Writers(self.control)
        self.reader = ScriptedReader()
        self.autoscaler = Autoscaler(
            self.control.cluster, self.reader, OperatorSettings(predictive_enabled=False)
        )
        self.control.submit(example())
        self.reconcile()
        self.control.mark_ready()

    def reconcile(self) -> None:
        with self.writers.writing(labels.OWNER_RECONCILER):
            self.control.reconcile()

    def autoscale(self, now_s: float) -> None:
        with self.writers.writing(labels.OWNER_AUTOSCALER):
            self.autoscaler.run_once(now_s)

    def metrics_back(self) -> None:
        self.reader.down = False
        for tier in ("l4", "a100-burst"):
            self.reader.set(
                NAMESPACE, NAME, tier, waiting=0.0, running=1.0, request_rate_rps=0.5, ready_replicas=1
            )

    def condition(self, type_: str) -> tuple[str, str]:
        found = self.control.condition(type_)
        return found["status"], found["reason"]

    def warnings(self) -> list[str]:
        return [e["reason"] for e in self.control.cluster.events if e["type"] == "Warning"]


@pytest.fixture
def scene() -> Iterator[Scene]:
    made = Scene()
    yield made
    made.reader.close()


def test_metrics_down_is_scaling_inactive_and_leaves_degraded_to_the_reconciler(scene: Scene) -> None:
    scene.reader.down = True
    for tick in range(4):
        scene.autoscale(T0 + tick * 60)
        scene.reconcile()
        assert scene.condition(labels.CONDITION_SCALING_ACTIVE) == (
            "False",
            labels.REASON_METRICS_UNAVAILABLE,
        )
        assert scene.condition(labels.CONDITION_DEGRADED) == ("False", REASON_AS_PLANNED)
    # One Warning on the transition, none while it stays False, whoever writes in between.
    assert scene.warnings() == [labels.REASON_METRICS_UNAVAILABLE]

    scene.metrics_back()
    scene.autoscale(T0 + 600)
    scene.reconcile()
    assert scene.condition(labels.CONDITION_SCALING_ACTIVE) == ("True", REASON_METRICS_AVAILABLE)
    assert scene.writers.changed[labels.OWNER_AUTOSCALER] >= {labels.CONDITION_SCALING_ACTIVE}
    assert labels.CONDITION_DEGRADED in scene.writers.changed[labels.OWNER_RECONCILER]
    scene.writers.assert_each_wrote_only_its_own()


def test_a_service_that_cannot_be_decided_and_a_reconciler_failure_are_both_shown(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(runner_module, "step", broken)
    scene.autoscale(T0)
    # The reconciler now fails on its own (a tier no GPU can hold): neither hides the other.
    scene.control.edit(lambda body: body["spec"]["tiers"][0].__setitem__("gpu", "NoSuchGpu"))
    scene.reconcile()
    scene.autoscale(T0 + 60)
    assert scene.condition(labels.CONDITION_SCALING_ACTIVE) == ("False", REASON_AUTOSCALING_FAILED)
    assert "OverflowError" in scene.control.condition(labels.CONDITION_SCALING_ACTIVE)["message"]
    assert scene.condition(labels.CONDITION_DEGRADED)[0] == "True"
    scene.writers.assert_each_wrote_only_its_own()


def test_a_legacy_autoscaler_degraded_is_overwritten_by_the_next_reconcile_pass(scene: Scene) -> None:
    """Upgrade: a Degraded=True an older operator's autoscaler wrote does not stay forever."""
    ref = ObjectRef(labels.API_VERSION, labels.KIND, NAMESPACE, NAME)
    status = scene.control.status()
    conditions = [c for c in status["conditions"] if c["type"] != labels.CONDITION_DEGRADED]
    scene.control.cluster.set_status(ref, {**status, "conditions": [*conditions, LEGACY_AUTOSCALER_DEGRADED]})
    scene.metrics_back()
    scene.autoscale(T0)
    assert scene.condition(labels.CONDITION_DEGRADED) == (
        "True",
        labels.REASON_METRICS_UNAVAILABLE,
    )  # not ours
    scene.reconcile()
    assert scene.condition(labels.CONDITION_DEGRADED) == ("False", REASON_AS_PLANNED)
    assert scene.condition(labels.CONDITION_SCALING_ACTIVE) == ("True", REASON_METRICS_AVAILABLE)
