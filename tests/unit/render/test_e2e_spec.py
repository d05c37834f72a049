"""The end-to-end spec plans and renders here too, so a broken one fails without a cluster."""

from __future__ import annotations

from inferfleet.api import parse
from inferfleet.config import OperatorSettings
from inferfleet.handlers import make_planner
from inferfleet.render import render
from tests.e2e.spec import cpu_service
from tests.unit.render.validation import validate


def test_cpu_only_tier_is_feasible_and_requests_no_accelerator() -> None:
    service = parse(cpu_service("tiny", "e2e", "inferfleet/vllm-standin:e2e"))
    service.metadata.uid = "uid-tiny"
    plan = make_planner(OperatorSettings())(service)
    assert [tier.feasible for tier in plan.tiers] == [True], plan.tiers[0].reasons
    objects = render(service, plan, OperatorSettings())
    (deployment,) = [obj for obj in objects if obj["kind"] == "Deployment"]
    main = deployment["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "inferfleet/vllm-standin:e2e"
    # No accelerator resource; only the memory limit every vLLM container gets.
    assert set(main["resources"]["limits"]) == {"memory"}
    assert main["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
    for obj in objects:
        validate(obj)
