"""Whether the operator runs the prefill/decode split the planner chose: deployed for the
bundled long-prompt example, advice with its reason (auto) or a refusal with its field
path (on) wherever what it renders could not work."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from inferfleet.api import InferenceService, load_all
from inferfleet.config import OperatorSettings
from inferfleet.design import design, pd_split
from inferfleet.design.verdict import judge
from tests.conftest import EXAMPLES_DIR

EXAMPLE = EXAMPLES_DIR / "rag-8b-disaggregated.yaml"
SETTINGS = OperatorSettings()


def example(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    document["spec"].update(changes)
    return document


def service_of(document: dict[str, Any]) -> InferenceService:
    (service,) = load_all(yaml.safe_dump(document))
    return service


def with_mode(document: dict[str, Any], mode: str) -> dict[str, Any]:
    document["spec"]["serving"]["disaggregation"]["mode"] = mode
    return document


def test_the_bundled_long_prompt_example_is_deployed_split() -> None:
    designed = design(service_of(example()), SETTINGS)
    assert designed.plan is not None
    split = designed.plan.disaggregation
    assert split is not None and split.enabled and split.deployed
    assert pd_split.roles(designed.plan) == pd_split.Roles(prefill="l40s", decode="h100")
    assert split.ratio is not None and f"P:D {split.ratio} in GPUs" in split.reasons[0]
    assert split.reasons[1].startswith("pays: ")
    assert split.reasons[-1].startswith("deployed: l40s pods prefill")
    assert designed.front_door is not None and designed.front_door.disaggregated
    assert not judge(designed).problems


def test_a_service_that_does_not_ask_is_never_split() -> None:
    designed = design(service_of(with_mode(example(), "off")), SETTINGS)
    assert designed.plan is not None and designed.plan.disaggregation is None
    assert pd_split.roles(designed.plan) is None
    assert designed.front_door is not None and not designed.front_door.disaggregated


BLOCKERS: list[tuple[str, dict[str, Any], str]] = [
    ("service front door", {"frontDoor": {"mode": "service"}}, "spec.frontDoor"),
    (
        "the platform's picker",
        {"frontDoor": {"gateway": {"name": "inference-gateway"}, "endpointPicker": {"name": "platform-epp"}}},
        "spec.frontDoor.endpointPicker",
    ),
    ("route weights", {"workload": None}, "spec.workload.routing"),
    (
        "a connector of the user's",
        {"serving": {"disaggregation": {"mode": "auto"}, "extraArgs": ["--kv-transfer-config={}"]}},
        "spec.serving.extraArgs",
    ),
    (
        "the host-memory KV tier",
        {"serving": {"disaggregation": {"mode": "auto"}, "hostKvCache": {"mode": "on"}}},
        "spec.serving.hostKvCache",
    ),
    (
        "a release without the NixlConnector",
        {"serving": {"disaggregation": {"mode": "auto"}, "image": "vllm/vllm-openai:v0.8.5"}},
        "spec.tiers[0].image",
    ),
]


def _blocking(changes: dict[str, Any]) -> dict[str, Any]:
    document = example()
    if changes.get("workload", 1) is None:  # shares: the same workload, split by weights
        document["spec"]["workload"]["routing"] = {"h100": 0.5, "l40s": 0.5}
        return document
    document["spec"].update(changes)
    return document


@pytest.mark.parametrize(("what", "changes", "path"), BLOCKERS, ids=[b[0] for b in BLOCKERS])
def test_auto_stays_colocated_where_the_split_cannot_run_and_says_why(
    what: str, changes: dict[str, Any], path: str
) -> None:
    designed = design(service_of(_blocking(changes)), SETTINGS)
    assert designed.plan is not None
    split = designed.plan.disaggregation
    assert split is not None and split.enabled and not split.deployed, what
    assert split.reasons[-1].startswith("not deployed, every tier serves both phases: ")
    assert split.reasons[-1].endswith(f"({path})")
    assert pd_split.roles(designed.plan) is None
    assert designed.front_door is None or not designed.front_door.disaggregated
    assert not [p for p in judge(designed).problems if "split" in p.message]


@pytest.mark.parametrize(("what", "changes", "path"), BLOCKERS, ids=[b[0] for b in BLOCKERS])
def test_on_is_refused_where_the_split_cannot_run(what: str, changes: dict[str, Any], path: str) -> None:
    designed = design(service_of(with_mode(_blocking(changes), "on")), SETTINGS)
    paths = [problem.path for problem in judge(designed).problems]
    assert path in paths, (what, paths)


def test_on_without_a_pair_is_refused_with_the_planners_reason() -> None:
    document = with_mode(example(), "on")
    del document["spec"]["tiers"][1]["overrides"]  # the L40S tier back at TP 2: no joinable pair
    (problem,) = judge(design(service_of(document), SETTINGS)).problems
    assert problem.path == "spec.serving.disaggregation.mode"
    assert "their tensor-parallel sizes differ" in problem.message


def test_the_autoscaler_keeps_the_deployed_split() -> None:
    """The autoscaler designs on the plan status shows deployed; the split's roles travel in it."""
    from inferfleet.design import Observations

    planned = design(service_of(example()), SETTINGS).plan
    assert planned is not None
    again = design(service_of(example()), SETTINGS, Observations(deployed_plan=planned))
    assert pd_split.roles(again.plan) == pd_split.roles(planned)
