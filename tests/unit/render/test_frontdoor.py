"""The front door: pools, pickers and the route, on hand-made plans and on every example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from inferfleet.api import labels, load_all
from inferfleet.cli.render import render_file
from inferfleet.config import OperatorSettings
from inferfleet.design import topology
from inferfleet.design.checks import render_problems
from inferfleet.kubedata import matches
from inferfleet.planner import plan_service
from inferfleet.planner.workload import tier_share
from inferfleet.render import frontdoor, lifecycle
from tests.conftest import REPO_ROOT, example_paths
from tests.toolkit.design import render
from tests.unit.render import plans
from tests.unit.render.validation import validate, validate_picker_config

GATEWAY = OperatorSettings(gateway_name="inference-gateway", gateway_namespace="gateway-system")
NO_GATEWAY = OperatorSettings()
EXAMPLES = example_paths()


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def picker_configs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Picker Deployment name -> its EndpointPickerConfig (the --config-text argument)."""
    out = {}
    for obj in by_kind(objects, "Deployment"):
        if obj["metadata"]["labels"].get(labels.LABEL_COMPONENT) == "epp":
            args = obj["spec"]["template"]["spec"]["containers"][0]["args"]
            out[obj["metadata"]["name"]] = yaml.safe_load(args[args.index("--config-text") + 1])
    return out


def serving_pod_labels(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Tier -> labels of the pods that serve HTTP (Deployment pods, LWS leaders)."""
    out = {}
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["labels"].get(labels.LABEL_COMPONENT) != "epp":
            out[obj["metadata"]["labels"][labels.LABEL_TIER]] = obj["spec"]["template"]["metadata"]["labels"]
        elif obj["kind"] == "LeaderWorkerSet":
            template = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
            out[obj["metadata"]["labels"][labels.LABEL_TIER]] = template["metadata"]["labels"]
    return out


def other_pod_labels(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Labels of every other pod the service runs: pre-cache, LWS workers, pickers."""
    out = []
    for obj in objects:
        if obj["kind"] == "DaemonSet" or (
            obj["kind"] == "Deployment" and obj["metadata"]["labels"].get(labels.LABEL_COMPONENT) == "epp"
        ):
            out.append(obj["spec"]["template"]["metadata"]["labels"])
        elif obj["kind"] == "LeaderWorkerSet":
            out.append(obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"])
    return out


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_renders_a_valid_pool_and_route_over_all_its_serving_pods(example: Path) -> None:
    objects = render_file(example, GATEWAY)
    pools = by_kind(objects, "InferencePool")
    (route,) = by_kind(objects, "HTTPRoute")
    assert pools
    for obj in [*pools, route]:
        validate(obj)
    for config in picker_configs(objects).values():
        assert config["kind"] == "EndpointPickerConfig" and "flowControl" in config["featureGates"]
        validate_picker_config(config)
    serving = serving_pod_labels(objects)
    selected = {
        tier
        for pool in pools
        for tier, pod in serving.items()
        if matches(pool["spec"]["selector"]["matchLabels"], pod)
    }
    assert selected == set(serving)  # every tier is reachable through the front door
    for pool in pools:  # and nothing else is
        assert not [
            pod for pod in other_pod_labels(objects) if matches(pool["spec"]["selector"]["matchLabels"], pod)
        ]
    assert {ref["name"] for ref in route["spec"]["rules"][0]["backendRefs"]} == {
        p["metadata"]["name"] for p in pools
    }
    # The operator's default Gateway, or one in the example's own namespace (always allowed).
    (parent,) = route["spec"]["parentRefs"]
    assert parent in (
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"},
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "inference-gateway",
            "namespace": "gateway-system",
        },
    )


def test_without_shares_one_pool_spans_every_tier_and_its_picker_filters_by_length() -> None:
    objects = render(plans.service(), plans.plan(), GATEWAY)
    (pool,) = by_kind(objects, "InferencePool")
    assert pool["metadata"]["name"] == "chat"
    assert pool["spec"]["selector"]["matchLabels"] == {
        labels.LABEL_SERVICE: "chat",
        labels.LABEL_COMPONENT: "vllm",
    }
    assert pool["spec"]["endpointPickerRef"] == {
        "name": "chat-epp",
        "kind": "Service",
        "port": {"number": 9002},
        "failureMode": "FailClose",
    }
    (route,) = by_kind(objects, "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}
    ]
    (config,) = picker_configs(objects).values()
    length = next(p for p in config["plugins"] if p["type"] == "context-length-aware")
    assert length["parameters"] == {"label": frontdoor.LABEL_CONTEXT_LENGTH_RANGE, "enableFiltering": True}
    assert "flowControl" in config["featureGates"]
    profile = [entry["pluginRef"] for entry in config["schedulingProfiles"][0]["plugins"]]
    assert profile[0] == "context-length" and profile[-1] == "max-score-picker"


def test_capacity_labels_say_what_the_plan_promises() -> None:
    h100 = plans.tier_plan(
        "h100", maxModelLen=16384, maxNumSeqs=64, kvCacheTokens=480_000, costPerMillionTokensUsd=0.9
    )
    l4 = plans.tier_plan(
        "l4", gpu="L4", maxModelLen=8192, maxNumSeqs=32, kvCacheTokens=90_000, costPerMillionTokensUsd=0.3
    )
    serving = serving_pod_labels(render(plans.service(), plans.plan(h100, l4), GATEWAY))
    assert serving["l4"][frontdoor.LABEL_CONTEXT_LENGTH_RANGE] == "0-8191"  # 8192 prompt tokens get a 400
    # The longest tier takes what nobody else can, so a prompt too long for every tier
    # still reaches a vLLM and gets its 400 (no range: the picker's filter passes it).
    assert frontdoor.LABEL_CONTEXT_LENGTH_RANGE not in serving["h100"]
    assert (
        serving["h100"][frontdoor.LABEL_MAX_NUM_SEQS],
        serving["h100"][frontdoor.LABEL_KV_CACHE_TOKENS],
        serving["h100"][frontdoor.LABEL_MAX_MODEL_LEN],
    ) == ("64", "480000", "16384")
    assert (serving["l4"][frontdoor.LABEL_COST_RANK], serving["h100"][frontdoor.LABEL_COST_RANK]) == (
        "1",
        "2",
    )
    # Equal limits: every tier is a longest one, none is closed to any prompt.
    same = serving_pod_labels(render(plans.service(), plans.plan(), GATEWAY))
    assert not [pod for pod in same.values() if frontdoor.LABEL_CONTEXT_LENGTH_RANGE in pod]


def test_shares_become_route_weights_over_one_pool_per_tier_with_longer_tiers_as_overflow() -> None:
    service = plans.service(workload={**plans.BASE_SERVICE["spec"]["workload"], "routing": {"h100": 0.7}})
    h100 = plans.tier_plan("h100", maxModelLen=32768)
    l4 = plans.tier_plan("l4", gpu="L4", maxModelLen=8192)
    objects = render(service, plans.plan(h100, l4), GATEWAY)
    pools = {p["metadata"]["name"]: p for p in by_kind(objects, "InferencePool")}
    assert set(pools) == {"chat-h100", "chat-l4"}
    (route,) = by_kind(objects, "HTTPRoute")
    weights = {ref["name"]: ref["weight"] for ref in route["spec"]["rules"][0]["backendRefs"]}
    tiers = {tier.name: tier for tier in service.spec.tiers}
    assert weights == {f"chat-{name}": round(tier_share(service.spec, tiers[name]) * 1000) for name in tiers}
    assert weights == {"chat-h100": 700, "chat-l4": 300}
    serving = serving_pod_labels(objects)

    def members(pool: str) -> set[str]:
        return {
            t for t, pod in serving.items() if matches(pools[pool]["spec"]["selector"]["matchLabels"], pod)
        }

    # A prompt the L4 tier cannot take, weighted to the L4 pool, still finds the H100 pods;
    # the H100 pool never sends anything to L4 pods (they accept less).
    assert members("chat-l4") == {"h100", "l4"}
    assert members("chat-h100") == {"h100"}
    configs = picker_configs(objects)
    weight = {
        e["pluginRef"]: e.get("weight") for e in configs["chat-l4-epp"]["schedulingProfiles"][0]["plugins"]
    }
    load = sum(w for ref, w in weight.items() if ref not in {"context-length", "max-score-picker"})
    assert weight["context-length"] > load  # a prompt that fits the pool's own tier stays on it
    for pool in pools.values():
        validate(pool)
    validate(route)


def test_service_mode_renders_no_front_door_but_keeps_the_capacity_labels() -> None:
    objects = render(plans.service(), plans.plan(), NO_GATEWAY)
    kinds = {obj["kind"] for obj in objects}
    assert not kinds & {"InferencePool", "HTTPRoute", "Role", "RoleBinding", "ServiceAccount"}
    assert all(frontdoor.LABEL_MAX_MODEL_LEN in pod for pod in serving_pod_labels(objects).values())
    explicit = plans.service(frontDoor={"mode": "service"})
    assert not by_kind(render(explicit, plans.plan(), GATEWAY), "HTTPRoute")  # the spec wins over settings


def test_the_spec_gateway_wins_and_a_platform_picker_replaces_the_operators() -> None:
    service = plans.service(
        frontDoor={
            "gateway": {"name": "team-gw", "sectionName": "https"},
            "endpointPicker": {"name": "shared-epp", "port": 9100},
        }
    )
    objects = render(service, plans.plan(), NO_GATEWAY)
    (pool,) = by_kind(objects, "InferencePool")
    assert pool["spec"]["endpointPickerRef"]["name"] == "shared-epp"
    assert pool["spec"]["endpointPickerRef"]["port"] == {"number": 9100}
    assert not picker_configs(objects) and not by_kind(objects, "Role")
    assert not [o for o in by_kind(objects, "Deployment") if o["metadata"]["name"].endswith("-epp")]
    (route,) = by_kind(objects, "HTTPRoute")
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "team-gw", "sectionName": "https"}
    ]


def test_the_hold_outlasts_the_slowest_cold_start_and_follows_measurements_upwards() -> None:
    service = plans.service(
        tiers=[
            {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 6},
            {"name": "l4", "gpu": "L4", "minReplicas": 0, "maxReplicas": 4},
        ],
        scaling={"allowScaleToZero": True},
    )
    plan = plans.plan(
        plans.tier_plan("h100", coldStartSeconds=300.0),
        plans.tier_plan("l4", gpu="L4", coldStartSeconds=95.0),
    )
    margin = GATEWAY.cold_start_margin_s
    # Only the L4 tier can stand at zero: its start is what a held request waits for.
    (pool,) = topology.resolve(service, plan, GATEWAY).pools
    assert pool.hold_s >= 95 + margin and pool.hold_s % topology.HOLD_STEP_S == 0
    assert pool.hold_s < 95 + margin + topology.HOLD_STEP_S
    slower = topology.resolve(service, plan, GATEWAY, {"l4": 200.0}).pools[0]
    assert slower.hold_s >= 200 + margin
    faster = topology.resolve(service, plan, GATEWAY, {"l4": 20.0}).pools[0]
    assert faster.hold_s == pool.hold_s  # a fast measurement never cuts below the estimate
    pinned = plans.service(frontDoor={"holdSeconds": 600})
    assert topology.resolve(pinned, plan, GATEWAY).pools[0].hold_s == 600
    objects = render(service, plan, GATEWAY)
    (config,) = picker_configs(objects).values()
    assert config["flowControl"]["defaultRequestTTL"] == f"{pool.hold_s}s"
    (route,) = by_kind(objects, "HTTPRoute")
    timeout = int(route["spec"]["rules"][0]["timeouts"]["request"].rstrip("s"))
    assert timeout == pool.hold_s + lifecycle.drain_budget_s(service)


def test_the_hold_waits_for_a_cold_start_and_the_queue_limit_keeps_a_saturated_wait_short() -> None:
    # The 8B example: two warm L4 replicas (0.95 requests/s each within the SLO), an A100
    # tier that may stand at zero, a 3 s TTFT SLO.
    (service,) = load_all((REPO_ROOT / "manifests" / "examples" / "llama-8b-chat.yaml").read_text())
    plan = plan_service(service)
    (pool,) = topology.resolve(service, plan, GATEWAY).pools
    l4 = next(tier for tier in plan.tiers if tier.name == "l4")
    assert pool.queue_limit == int(3.0 * 2 * l4.usable_rps) >= 1
    (config,) = picker_configs(render(service, plan, GATEWAY)).values()
    # One TTL in the pinned router: the hold (a cold start plus the margin), which a pool at
    # zero needs; a saturated pool queues at most `maxRequests`, the next request gets 429.
    assert config["flowControl"] == {
        "defaultRequestTTL": f"{pool.hold_s}s",
        "maxRequests": str(pool.queue_limit),
    }
    validate_picker_config(config)
    # All tiers at zero: one replica of the slowest, and never below one held request.
    cold = plans.service(
        tiers=[{"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 0}], scaling={"allowScaleToZero": True}
    )
    slow = plans.plan(plans.tier_plan("h100", usableRps=0.1))
    assert topology.resolve(cold, slow, GATEWAY).pools[0].queue_limit == 1


def test_the_pinned_router_refuses_a_field_it_does_not_know() -> None:
    # Its loader decodes strictly: the split TTL of later routers (noEndpointRequestTTL,
    # llm-d-router PR #2284) would stop the picker from starting, so it is not rendered.
    (config,) = picker_configs(render(plans.service(), plans.plan(), GATEWAY)).values()
    validate_picker_config(config)
    later = {**config, "flowControl": {**config["flowControl"], "noEndpointRequestTTL": "150s"}}
    with pytest.raises(jsonschema.ValidationError, match="noEndpointRequestTTL"):
        validate_picker_config(later)
    with pytest.raises(jsonschema.ValidationError):
        validate_picker_config({**config, "flowControl": {"defaultRequestTTL": "150 seconds"}})


def test_the_picker_runs_with_least_privilege_and_is_scraped() -> None:
    objects = render(plans.service(), plans.plan(), GATEWAY)
    (role,) = by_kind(objects, "Role")
    assert all(set(rule["verbs"]) == {"get", "list", "watch"} for rule in role["rules"])
    (binding,) = by_kind(objects, "RoleBinding")
    (account,) = by_kind(objects, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "serving"}
    ]
    (picker,) = [o for o in by_kind(objects, "Deployment") if o["metadata"]["name"] == "chat-epp"]
    pod = picker["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert "--metrics-endpoint-auth=false" in pod["containers"][0]["args"]
    monitors = [m for m in by_kind(objects, "PodMonitor") if m["metadata"]["name"] == "chat-epp"]
    assert monitors and monitors[0]["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    for obj in objects:
        validate(obj)


def test_a_new_picker_configuration_restarts_the_picker_and_nothing_else() -> None:
    plan = plans.plan()
    before = render(plans.service(), plan, GATEWAY)
    after = render(plans.service(frontDoor={"holdSeconds": 900}), plan, GATEWAY)
    changed = {(o["kind"], o["metadata"]["name"]) for o in after if o not in before}
    assert changed == {
        ("Deployment", "chat-epp"),
        ("HTTPRoute", "chat"),
        ("InferencePool", "chat"),
    }


def test_scale_to_zero_needs_a_front_door_that_holds() -> None:
    zero = {"scaling": {"allowScaleToZero": True}}
    problems = render_problems(plans.service(**zero), NO_GATEWAY)
    assert [p.path for p in problems] == ["spec.scaling.allowScaleToZero"]
    assert "holds requests" in problems[0].message
    assert render_problems(plans.service(**zero), GATEWAY) == []
    assert render_problems(plans.service(**zero, frontDoor={"gateway": {"name": "gw"}}), NO_GATEWAY) == []
    foreign = plans.service(**zero, frontDoor={"endpointPicker": {"name": "theirs"}})
    assert [p.path for p in render_problems(foreign, GATEWAY)] == [
        "spec.frontDoor.endpointPicker.holdsRequests"
    ]
    declared = plans.service(**zero, frontDoor={"endpointPicker": {"name": "theirs", "holdsRequests": True}})
    assert render_problems(declared, GATEWAY) == []


def test_the_examples_that_scale_to_zero_name_a_gateway() -> None:
    for path in EXAMPLES:
        for service in load_all(path.read_text(encoding="utf-8")):
            if service.spec.scaling is not None and service.spec.scaling.allow_scale_to_zero:
                assert render_problems(service, NO_GATEWAY) == [], path.name


def test_a_platform_picker_cannot_serve_per_tier_pools() -> None:
    routing = {**plans.BASE_SERVICE["spec"]["workload"], "routing": {"h100": 0.5}}
    shared = plans.service(workload=routing, frontDoor={"endpointPicker": {"name": "theirs"}})
    assert [p.path for p in render_problems(shared, GATEWAY)] == ["spec.frontDoor.endpointPicker"]
    assert render_problems(plans.service(workload=routing), GATEWAY) == []
