"""The end-to-end spec plans and renders here too, so a broken one fails without a cluster."""

from __future__ import annotations

from inferfleet import render
from inferfleet.api import parse
from inferfleet.config import OperatorSettings
from tests.e2e.spec import cpu_service
from tests.toolkit.design import designed
from tests.unit.render.validation import validate


def test_cpu_only_tier_is_feasible_and_requests_no_accelerator() -> None:
    service = parse(cpu_service("tiny", "e2e", "inferfleet/vllm-standin:e2e"))
    service.metadata.uid = "uid-tiny"
    design = designed(service, OperatorSettings())
    plan = design.plan
    assert plan is not None and [tier.feasible for tier in plan.tiers] == [True], design.invalid
    objects = render.render(design)
    (deployment,) = [obj for obj in objects if obj["kind"] == "Deployment"]
    main = deployment["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "inferfleet/vllm-standin:e2e"
    # No accelerator resource; only the memory limit every vLLM container gets.
    assert set(main["resources"]["limits"]) == {"memory"}
    assert main["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
    for obj in objects:
        validate(obj)
