"""The reconcile pass as data: compute(snapshot) -> intent, conclude -> status and events.

The shell (controller.reconciler) reads the snapshot and executes; these tests drive the
pure half alone, from a snapshot the real reader produced.
"""

from __future__ import annotations

import copy
from typing import Any

from inferfleet.api import InferenceService, parse
from inferfleet.config import OperatorSettings
from inferfleet.reconcile import compute
from inferfleet.reconcile.actions import Apply, Create
from inferfleet.render import at_revision
from tests.toolkit.design import designed, render
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

SETTINGS = OperatorSettings()


def _service(**model: Any) -> InferenceService:
    body = example()
    body["metadata"].setdefault("namespace", NAMESPACE)
    body["spec"]["model"].update(model)
    return parse(body, source="test")


def _snapshot_of(control: Control) -> compute.Snapshot:
    read = control.memo["reconciler"].read(NAMESPACE, NAME)
    assert read is not None
    return read[1]


def test_compute_is_pure_and_repeatable() -> None:
    control = Control()
    control.submit(example())
    snapshot = _snapshot_of(control)
    frozen = copy.deepcopy(snapshot)
    first, second = compute.compute(snapshot), compute.compute(snapshot)
    assert first.actions == second.actions and first.actions
    # Nothing exists yet: the namespace's node-cache volume and claim are created (never
    # applied over something that exists), everything the service owns is applied.
    assert [type(action) for action in first.actions[:2]] == [Create, Create]
    assert [action.ref.kind for action in first.actions[:2]] == ["PersistentVolume", "PersistentVolumeClaim"]
    assert all(isinstance(action, Apply) for action in first.actions[2:])
    assert snapshot == frozen  # compute changed nothing it was given
    assert compute.conclude(snapshot, first) == compute.conclude(snapshot, first)


def test_the_reported_plan_is_a_separate_value_from_the_rendered_one() -> None:
    control = Control()
    control.submit(example())
    snapshot = _snapshot_of(control)
    intent = compute.compute(snapshot)
    assert intent.design is not None
    assert intent.rendered_plan is intent.design.plan  # rendered from the estimate as planned
    assert intent.reported_plan is intent.design.reported_plan
    assert intent.reported_plan != intent.rendered_plan or not snapshot.measured_kv


def test_read_observes_and_compute_designs() -> None:
    """The snapshot holds only what was read (the spec as declared, no plan); compute's
    design is the one `design()` makes from it, the same for the same snapshot."""
    control = Control()
    control.submit(example())
    snapshot = _snapshot_of(control)
    assert not hasattr(snapshot, "plan") and snapshot.service is not None
    intent = compute.compute(snapshot)
    probe = compute.model_probe(snapshot, snapshot.service)
    assert intent.design == compute.design_of(snapshot, snapshot.service, probe)


def test_nothing_to_do_without_a_plan() -> None:
    control = Control()
    control.submit(example())
    snapshot = _snapshot_of(control)
    invalid = compute.Snapshot(**{**snapshot.__dict__, "service": None, "invalid": "spec.tiers: bad"})
    intent = compute.compute(invalid)
    assert intent.actions == () and intent.rendered_plan is None
    status = compute.conclude(invalid, intent).status
    planned = next(c for c in status["conditions"] if c["type"] == "Planned")
    assert (planned["status"], planned["message"]) == ("False", "spec.tiers: bad")


def test_a_held_tier_renders_its_workload_at_the_revision_it_serves_in_one_render() -> None:
    service = _service(revision="new-rev")
    plan = designed(service, SETTINGS).plan
    assert plan is not None
    tier = plan.feasible_tiers[0].name
    once = render(service, plan, SETTINGS, workload_revisions={tier: "old-rev"})
    wanted = render(service, plan, SETTINGS)
    served = render(at_revision(service, "old-rev"), plan, SETTINGS)

    def key(obj: dict[str, Any]) -> tuple[str, str]:
        return obj["kind"], obj["metadata"]["name"]

    def held(obj: dict[str, Any]) -> bool:
        return (
            obj["kind"] in ("Deployment", "LeaderWorkerSet")
            and obj["metadata"]["labels"].get("inferfleet.dev/tier") == tier
        )

    by_key_wanted = {key(o): o for o in wanted}
    by_key_served = {key(o): o for o in served}
    assert [key(o) for o in once] == [key(o) for o in wanted]
    for obj in once:
        expected = by_key_served[key(obj)] if held(obj) else by_key_wanted[key(obj)]
        assert obj == expected, key(obj)
    assert any(held(o) for o in once)
    assert by_key_served != by_key_wanted  # the revision really shows in the workload
