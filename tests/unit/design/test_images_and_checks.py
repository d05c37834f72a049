"""Each vendor's runtime, the API key through readiness, and what is refused before rendering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferfleet import planner
from inferfleet.api import InferenceService, labels, load_all
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.config import OperatorSettings
from inferfleet.design import images
from inferfleet.design.checks import awaiting_source, catalog_problems, refusals, render_problems
from inferfleet.render.lifecycle import READINESS_SCRIPT
from tests.conftest import EXAMPLES_DIR
from tests.toolkit import vllm_standin
from tests.toolkit.design import render
from tests.unit.render import plans

SETTINGS = OperatorSettings()
MIXED = EXAMPLES_DIR / "llama-70b-mixed-vendor.yaml"


def mixed() -> InferenceService:
    return load_all(MIXED.read_text(encoding="utf-8"))[0]


def pods_by_tier(
    service: InferenceService, settings: OperatorSettings = SETTINGS
) -> dict[str, dict[str, Any]]:
    objects = render(service, planner.plan_service(service, settings.catalogs()), settings)
    return {
        o["metadata"]["labels"]["inferfleet.dev/tier"]: o["spec"]["template"]["spec"]
        for o in objects
        if o["kind"] == "Deployment"
    }


# ------------------------------------------------------------------ runtime per vendor


def test_mi300x_tier_runs_the_rocm_build_with_amd_devices_and_groups() -> None:
    pods = pods_by_tier(mixed())
    amd, nvidia = pods["mi300x"], pods["h100"]
    vllm_amd, vllm_nvidia = amd["containers"][0], nvidia["containers"][0]
    assert vllm_amd["image"] == SETTINGS.vllm_image_amd and "rocm" in vllm_amd["image"]
    assert vllm_nvidia["image"] == SETTINGS.vllm_image
    limits = vllm_amd["resources"]["limits"]
    assert "amd.com/gpu" in limits and "nvidia.com/gpu" not in limits
    assert amd["securityContext"]["supplementalGroups"] == [44, 109]
    assert amd["securityContext"]["runAsNonRoot"] is True
    assert "supplementalGroups" not in nvidia["securityContext"]
    assert {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in amd["tolerations"]


def test_each_tier_is_planned_for_the_release_of_the_image_it_runs() -> None:
    # The planner models the vLLM release each tier's image carries: the ROCm default is
    # vLLM 0.11.1, the CUDA default 0.33.0; a tier's own image moves only that tier.
    service = mixed()
    releases = {
        tier.name: tier.vllm_release
        for tier in planner.plan_service(
            service, SETTINGS.catalogs(), tier_images=images.tier_images(service, SETTINGS)
        ).tiers
    }
    assert releases == {"h100": "0.33.0", "mi300x": "0.11.1"}
    body = service.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["tiers"][1]["image"] = "rocm/vllm:rocm6.3.1_vllm_0.8.3_20250410"
    pinned = load_all(json.dumps(body))[0]
    pinned_images = images.tier_images(pinned, SETTINGS)
    plan = planner.plan_service(pinned, SETTINGS.catalogs(), tier_images=pinned_images)
    assert {tier.name: tier.vllm_release for tier in plan.tiers} == {"h100": "0.33.0", "mi300x": "0.8.3"}


def test_plan_cli_models_the_release_each_tier_runs() -> None:
    import importlib

    from typer.testing import CliRunner

    from inferfleet.cli import COMMAND_MODULES, app

    for module in COMMAND_MODULES:  # register every subcommand, as main() does
        importlib.import_module(module)
    result = CliRunner().invoke(app, ["plan", "-f", str(MIXED), "-o", "json", "--offline"])
    assert result.exit_code == 0, result.output
    tiers = json.loads(result.stdout)["tiers"]
    assert {tier["name"]: tier["vllmRelease"] for tier in tiers} == {"h100": "0.33.0", "mi300x": "0.11.1"}


def test_an_inline_amd_gpu_is_an_amd_tier() -> None:
    mi250 = {
        "name": "MI250X-GCD",
        "memoryGiB": 64,
        "resourceName": "amd.com/gpu",
        "nodeLabels": {"amd.com/gpu.device-id": ["740c", "7408"]},
    }
    service = plans.service(tiers=[{"name": "mi250", "gpu": mi250, "gpusPerNode": 8}])
    (pod,) = pods_by_tier(service).values()
    assert pod["containers"][0]["image"] == SETTINGS.vllm_image_amd
    assert pod["securityContext"]["supplementalGroups"] == [44, 109]
    limits = pod["containers"][0]["resources"]["limits"]
    (planned,) = planner.plan_service(service, SETTINGS.catalogs()).tiers
    assert limits["amd.com/gpu"] == str(planned.gpus_per_replica) and "nvidia.com/gpu" not in limits


def test_device_groups_follow_the_setting_and_are_not_needed_as_root() -> None:
    settings = OperatorSettings.from_env({"INFERFLEET_AMD_SUPPLEMENTAL_GROUPS": "44,992"})
    assert pods_by_tier(mixed(), settings)["mi300x"]["securityContext"]["supplementalGroups"] == [44, 992]
    as_root = SETTINGS.model_copy(update={"vllm_run_as_root": True})
    assert "supplementalGroups" not in pods_by_tier(mixed(), as_root)["mi300x"]["securityContext"]


def test_image_precedence_tier_then_serving_then_vendor_default() -> None:
    body = mixed().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["tiers"][1]["image"] = "registry.local/vllm-rocm:pinned"
    pods = pods_by_tier(load_all(json.dumps(body))[0])
    assert pods["mi300x"]["containers"][0]["image"] == "registry.local/vllm-rocm:pinned"
    assert pods["h100"]["containers"][0]["image"] == SETTINGS.vllm_image
    body["spec"]["serving"]["image"] = "registry.local/vllm-cuda:pinned"
    pods = pods_by_tier(load_all(json.dumps(body))[0])
    assert pods["h100"]["containers"][0]["image"] == "registry.local/vllm-cuda:pinned"
    assert pods["mi300x"]["containers"][0]["image"] == "registry.local/vllm-rocm:pinned"


def test_api_key_from_a_secret_reaches_vllm_as_a_secret_reference() -> None:
    pod = pods_by_tier(mixed())["h100"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["VLLM_API_KEY"] == {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "llama-api-key", "key": "key"}},
    }
    assert all("--api-key" not in arg for arg in pod["containers"][0]["args"])


# ------------------------------------------------------------------ readiness with an API key


@pytest.fixture
def fake_vllm() -> Iterator[int]:
    """The toolkit's vLLM stand-in with an API key (vLLM's AuthenticationMiddleware)."""
    with vllm_standin("served", api_key="sk-test") as port:
        yield port


def _probe(port: int, served: str, key: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    if key is not None:
        env["VLLM_API_KEY"] = key
    result = subprocess.run(
        [sys.executable, "-c", READINESS_SCRIPT, str(port), served],
        env=env,
        capture_output=True,
        check=False,
        timeout=30,
    )
    return result.returncode


def test_readiness_sends_the_api_key_and_still_checks_the_model(fake_vllm: int) -> None:
    assert _probe(fake_vllm, "served", "sk-test") == 0
    assert _probe(fake_vllm, "served", None) != 0  # a key-guarded server without the key
    assert _probe(fake_vllm, "served", "sk-wrong") != 0
    assert _probe(fake_vllm, "other-model", "sk-test") != 0  # up, but not serving our model


# ------------------------------------------------------------------ refused before rendering


def test_unknown_gpu_and_unreadable_model_are_problems_with_field_paths() -> None:
    service = plans.service(
        model={"name": "acme/never-heard-of-it"},
        tiers=[{"name": "a", "gpu": "L4"}, {"name": "b", "gpu": "H1000"}],
    )
    no_sources = OperatorSettings(fetch_model_config=False)
    found = {(p.path, p.message.split(":")[0]) for p in catalog_problems(service, no_sources)}
    assert found == {
        ("spec.tiers[1].gpu", "unknown GPU 'H1000'"),
        ("spec.model.name", "unknown model 'acme/never-heard-of-it'"),
    }
    assert "serving.fetchModelConfig" in catalog_problems(service, no_sources)[1].message
    inline = plans.service(model={"name": "acme/x", "config": {"hidden_size": 64}, "parametersBillion": 1})
    assert catalog_problems(inline, no_sources) == []


def test_a_model_a_probe_can_read_is_no_problem_and_its_source_is_named() -> None:
    """The operator reads config.json through a probe Job: hf:// (also implied by the
    name) and s3:// are readable there, pvc:// and file:// are not."""
    implied = plans.service(model={"name": "acme/never-heard-of-it"})
    assert catalog_problems(implied, SETTINGS) == []
    assert awaiting_source(implied, SETTINGS) == "hf://acme/never-heard-of-it"
    s3 = plans.service(model={"name": "acme/x", "source": "s3://bucket/models/x"})
    assert catalog_problems(s3, SETTINGS) == [] and awaiting_source(s3, SETTINGS) == "s3://bucket/models/x"
    pvc = plans.service(model={"name": "acme/x", "source": "pvc://weights/x"})
    (problem,) = catalog_problems(pvc, SETTINGS)
    assert problem.path == "spec.model.source" and "mounted only in the pods" in problem.message
    assert awaiting_source(pvc, SETTINGS) is None
    catalogued = plans.service()
    assert awaiting_source(catalogued, SETTINGS) is None
    assert awaiting_source(implied, OperatorSettings(fetch_model_config=False)) is None


def test_refusals_without_a_plan_judge_what_holds_for_every_tier() -> None:
    """Before the probe has read the architecture, a spec-wide problem refuses, a tier's own
    problem waits for the plan (its tier may turn out infeasible)."""
    npu = {
        "name": "npu",
        "memoryGiB": 64,
        "resourceName": "example.com/npu",
        "nodeLabels": {"example.com/npu.product": "npu-1"},
    }
    service = plans.service(
        model={"name": "acme/never-heard-of-it"},
        tiers=[{"name": "n", "gpu": npu}],
        cache={"nodePath": "/data/weights"},
    )
    assert [p.path for p in refusals(service, SETTINGS, None)] == ["spec.cache.nodePath"]
    catalogued = plans.service(tiers=[{"name": "n", "gpu": npu}])
    plan = planner.plan_service(catalogued, SETTINGS.catalogs())
    assert [p.path for p in refusals(catalogued, SETTINGS, plan)] == ["spec.tiers[0].image"]


def test_cache_path_must_lie_under_the_allowed_root() -> None:
    outside = plans.service(cache={"nodePath": "/data/weights"})
    (problem,) = render_problems(outside, SETTINGS)
    assert problem.path == "spec.cache.nodePath" and "/mnt/nvme/inferfleet" in problem.message
    assert render_problems(plans.service(cache={"nodePath": "/mnt/nvme/inferfleet/team-a"}), SETTINGS) == []
    wider = OperatorSettings(cache_allowed_root="/data", cache_node_path="/data/inferfleet")
    assert render_problems(outside, wider) == []


def test_one_serving_image_for_two_vendors_is_refused() -> None:
    body = mixed().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["spec"]["serving"]["image"] = "registry.local/vllm:1"
    (problem,) = render_problems(load_all(json.dumps(body))[0], SETTINGS)
    assert problem.path == "spec.serving.image" and "amd: mi300x" in problem.message
    body["spec"]["tiers"][1]["image"] = "registry.local/vllm-rocm:1"  # the AMD tier names its own
    assert render_problems(load_all(json.dumps(body))[0], SETTINGS) == []


def test_gpus_without_node_labels_need_a_placement_of_the_tiers_own(tmp_path: Path) -> None:
    inline = {"name": "x", "memoryGiB": 24}
    service = plans.service(tiers=[{"name": "x", "gpu": inline}])
    (problem,) = render_problems(service, SETTINGS)
    assert problem.path == "spec.tiers[0].gpu.nodeLabels"
    placed = plans.service(tiers=[{"name": "x", "gpu": inline, "nodeSelector": {"pool": "x"}}])
    assert render_problems(placed, SETTINGS) == []
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text("gpus:\n  - {name: NPU-1, memoryGiB: 32, bandwidthTBs: 1, bf16Tflops: 100}\n")
    settings = OperatorSettings(catalog_file=str(catalog))
    (problem,) = render_problems(plans.service(tiers=[{"name": "n", "gpu": "NPU-1"}]), settings)
    assert problem.path == "spec.tiers[0].gpu" and "catalog entry" in problem.message
    # Only tiers that will be rendered: an infeasible tier's placement is moot.
    assert render_problems(service, SETTINGS, tiers=set()) == []


def test_too_many_combined_node_selector_terms_are_refused() -> None:
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [str(i)]}]} for i in range(20)]
    required = {"nodeSelectorTerms": terms}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    # 20 own terms x 4 ways to recognise an L4 = 80
    (problem,) = render_problems(
        plans.service(tiers=[{"name": "l4", "gpu": "L4", "affinity": affinity}]), SETTINGS
    )
    assert problem.path == "spec.tiers[0].affinity" and problem.message.startswith("80 required")
    required["nodeSelectorTerms"] = terms[:16]
    assert (
        render_problems(plans.service(tiers=[{"name": "l4", "gpu": "L4", "affinity": affinity}]), SETTINGS)
        == []
    )


def test_a_vendor_without_a_default_image_needs_one_named() -> None:
    npu = {
        "name": "npu",
        "memoryGiB": 32,
        "resourceName": "example.com/npu",
        "nodeLabels": {"example.com/npu.product": "npu-1"},
    }
    (problem,) = render_problems(plans.service(tiers=[{"name": "n", "gpu": npu}]), SETTINGS)
    assert problem.path == "spec.tiers[0].image" and "example.com" in problem.message
    named = plans.service(tiers=[{"name": "n", "gpu": npu, "image": "registry.local/vllm-npu:1"}])
    assert render_problems(named, SETTINGS) == []


def test_examples_have_no_problems() -> None:
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        for service in load_all(path.read_text(encoding="utf-8")):
            assert refusals(service, SETTINGS, None) == [], path.name
            plan = planner.plan_service(service, SETTINGS.catalogs())
            assert refusals(service, SETTINGS, plan) == [], path.name


# ------------------------------------------------------------------ the fetcher's privileges


def test_fetcher_runs_as_non_root_and_only_the_owner_step_is_root_with_chown() -> None:
    service = plans.service()
    (daemonset, *_) = cache_objects.precache_objects(service, plans.plan(), SETTINGS)
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == cache_objects.FETCHER_UID >= 10000
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == cache_objects.FETCHER_UID
        assert context["capabilities"] == {"drop": ["ALL"]} and context["allowPrivilegeEscalation"] is False
    (owner,) = pod["initContainers"]
    assert owner["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert owner["command"] == ["chown", "-R", "-h", "65532:65532", cache_objects.CACHE_MOUNT_PATH]
    assert owner["securityContext"]["allowPrivilegeEscalation"] is False


def test_every_flag_the_renderer_sets_is_refused_in_extra_args() -> None:
    """api.vllm_flags.PLANNED_FLAGS is the renderer's own list: nothing it sets can be overridden."""
    from inferfleet.api.vllm_flags import PLANNED_FLAGS

    services = [load_all(path.read_text(encoding="utf-8"))[0] for path in sorted(EXAMPLES_DIR.glob("*.yaml"))]
    services.append(
        plans.service(
            model={"name": "m/base", "adapters": [{"name": "sql", "source": "hf://org/sql-lora"}]},
            cache={"mode": "none"},
            serving={"prefixCaching": False, "speculativeDecoding": {"method": "ngram"}},
        )
    )
    # A host KV tier the planner sizes (its flags are the renderer's too).
    services.append(
        plans.service(
            workload={
                "archetype": "rag",
                "inputTokens": {"p50": 6000, "p95": 12000, "p99": 16000},
                "outputTokens": {"p50": 200, "p95": 500, "p99": 800},
                "peakRequestsPerSecond": 4,
                "slo": {"ttftP99Ms": 4000},
            },
            serving={"hostKvCache": {"mode": "on"}},
        )
    )
    seen: set[str] = set()
    for service in services:
        plan = planner.plan_service(service)
        if not plan.feasible_tiers:
            plan = plans.plan(*(plans.tier_plan(t.name, enforceEager=True) for t in service.spec.tiers))
        for obj in render(service, plan, SETTINGS):
            tier_workload = labels.LABEL_TIER in obj["metadata"]["labels"]  # not a front-door picker
            if obj["kind"] in ("Deployment", "LeaderWorkerSet") and tier_workload:
                spec = obj["spec"]
                template = spec.get("template") or spec["leaderWorkerTemplate"]["leaderTemplate"]
                args = template["spec"]["containers"][0].get("args", [])
                seen |= {arg for arg in args if arg.startswith("--")}
    assert seen and seen <= set(PLANNED_FLAGS), seen - set(PLANNED_FLAGS)
    assert "--kv-offloading-size" in seen
