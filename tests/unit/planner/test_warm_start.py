"""The cold-start model, first start and warm compile cache, by hand-worked examples; the
measured starts per case; and where the hold and the lead time take the warm figure."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import InferenceService, Plan
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache import workloads as objects
from inferfleet.config import OperatorSettings
from inferfleet.design import Observations, design, topology
from inferfleet.planner import MeasuredColdStart, fleet, observe_cold_starts, startup
from inferfleet.planner.releases import resolve_release
from tests.unit.precache.test_workloads_readiness import service

SETTINGS = OperatorSettings()
GB = 1e9


def _startup(image: str, *, eager: bool = False, nodes: int = 1, **changes: Any) -> startup.Startup:
    """25 GB of weights at NVMe's 12.5 GB/s: 2 s of reading."""
    first = fleet.cold_start_seconds(25 * GB, nodes, 12.5, eager)
    return startup.startup(
        service(**changes).spec,
        resolve_release(image, None),
        first_s=first,
        nodes_per_replica=nodes,
        pipeline_parallel=1,
        enforce_eager=eager,
    )


def test_first_and_warm_start_by_hand() -> None:
    # First: 2 s reading + 30 s init + 20 s torch.compile + 10 s CUDA graphs = 62 s.
    # Warm (vLLM 0.33 keeps a torch.compile cache, V1 compiles by default): the 20 s of
    # compiling become 9 s of Dynamo's trace and loading the artifacts: 62 - 11 = 51 s.
    found = _startup("vllm/vllm-openai:v0.33.0")
    assert found.first_s == pytest.approx(62.0)
    assert found.warm_s == pytest.approx(51.0)
    assert "PR #16848" in found.warm_reason and "2 m 15 s" in found.warm_reason
    # 0.11 too (its compile directory holds Triton's cache as well).
    assert _startup("vllm/vllm-openai:v0.11.0").warm_s == pytest.approx(51.0)


@pytest.mark.parametrize(
    ("image", "eager", "why"),
    [
        ("vllm/vllm-openai:v0.33.0", True, "enforceEager"),
        ("vllm/vllm-openai:v0.6.4", False, "not known to keep a torch.compile cache"),
        ("vllm/vllm-openai:v0.7.3", False, "V0 engine"),
        ("vllm/vllm-openai:latest", False, "not known to keep a torch.compile cache"),
    ],
)
def test_no_saving_is_promised_where_nothing_compiled_is_kept(image: str, eager: bool, why: str) -> None:
    found = _startup(image, eager=eager)
    # Eager: 2 s + 30 s, nothing compiled or captured; the others: 62 s either way.
    assert found.warm_s == found.first_s == pytest.approx(32.0 if eager else 62.0)
    assert why in found.warm_reason


def test_no_warm_figure_where_the_node_keeps_no_compile_cache() -> None:
    assert _startup("vllm/vllm-openai:v0.33.0", nodes=2).warm_s is None
    pvc = _startup("vllm/vllm-openai:v0.33.0", cache={"mode": "pvc", "pvcName": "weights"})
    assert pvc.warm_s is None and "cache.mode pvc" in pvc.warm_reason


def test_the_plan_carries_both_figures_and_no_loader_is_chosen() -> None:
    plan = design(service(), SETTINGS).plan
    assert plan is not None
    l4 = plan.tier("l4")
    # 15.0 GiB (16.06 GB) at 12.5 GB/s = 1.3 s; + 60 s = 61.3 s first; 61.3 - 11 = 50.3 s warm.
    assert (l4.cold_start_seconds, l4.first_start_seconds, l4.warm_start_seconds) == (61.3, 61.3, 50.3)
    assert not l4.compile_cache_warm
    loader = next(r for r in l4.reasons if r.startswith(startup.LOADER_PREFIX))
    assert "default (safetensors)" in loader and "runai_streamer, fastsafetensors" in loader
    assert "not chosen" in loader


def test_measured_starts_replace_each_case_and_the_next_start_is_warm_only_where_every_node_has_it() -> None:
    plan = design(service(), SETTINGS).plan
    assert plan is not None
    first, warm = {"l4": MeasuredColdStart(70.0, 3)}, {"l4": MeasuredColdStart(40.0, 2)}
    cold = observe_cold_starts(plan, first, warm).tier("l4")
    assert (cold.cold_start_seconds, cold.first_start_seconds, cold.warm_start_seconds) == (70.0, 70.0, 40.0)
    assert not cold.compile_cache_warm
    assert any(
        r.startswith("cold start ~70 s measured") and "3 serving pod(s) that compiled" in r
        for r in cold.reasons
    )
    assert any(r.startswith("warm start ~40 s measured") and "2 serving pod(s)" in r for r in cold.reasons)
    hot = observe_cold_starts(plan, first, warm, {"l4": 2}).tier("l4")
    assert (hot.cold_start_seconds, hot.compile_cache_warm) == (40.0, True)
    assert any("all 2 eligible node(s)" in r for r in hot.reasons)
    # Every node has it, nothing measured warm yet: the warm estimate.
    estimated = observe_cold_starts(plan, {}, {}, {"l4": 1}).tier("l4")
    assert (estimated.cold_start_seconds, estimated.first_start_seconds) == (50.3, 61.3)
    # The burst tier nobody measured keeps its estimate.
    assert observe_cold_starts(plan, first, warm, {"l4": 2}).tier("a100-burst") == plan.tier("a100-burst")


T0, LATER = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"


def _zero_able() -> InferenceService:
    """The example with every tier allowed to stand at zero (what a hold protects)."""
    svc = service()
    tiers = [tier.model_copy(update={"min_replicas": 0}) for tier in svc.spec.tiers]
    return svc.model_copy(update={"spec": svc.spec.model_copy(update={"tiers": tiers})})


def _observed(svc: InferenceService, plan: Plan, nodes: list[str], eligible: int) -> Observations:
    """For every tier: pre-cache pods Ready on each of its `eligible` nodes since T0, and on
    `nodes` a serving pod of the tier that restored its compile cache at LATER."""
    cache_pods: list[dict[str, Any]] = []
    serving: list[dict[str, Any]] = []
    for tier in plan.feasible_tiers:
        ref = objects.compile_cache_ref(svc, tier, "vllm/vllm-openai:v0.33.0")
        assert ref is not None
        label = {"inferfleet.dev/tier": tier.name, objects.LABEL_CACHE_REVISION: objects.revision_label(svc)}
        cache_pods += [
            {
                "metadata": {"labels": label, "creationTimestamp": T0},
                "spec": {"nodeName": f"{tier.name}-n{i}"},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T0}]},
            }
            for i in range(eligible)
        ]
        message = compile_cache.encode_restore(compile_cache.Restore(True, ref.key, "rev", 1))
        serving += [
            {
                "metadata": {"labels": {"inferfleet.dev/tier": tier.name}},
                "spec": {"nodeName": f"{tier.name}-{node}"},
                "status": {
                    "initContainerStatuses": [
                        {
                            "name": "cache-verify",
                            "state": {"terminated": {"exitCode": 0, "startedAt": LATER}},
                        },
                        {
                            "name": "compile-cache",
                            "state": {"terminated": {"exitCode": 0, "message": message}},
                        },
                    ]
                },
            }
            for node in nodes
        ]
    eligible_nodes = {tier.name: eligible for tier in plan.feasible_tiers}
    return Observations(cache_pods=cache_pods, serving_pods=serving, eligible_nodes=eligible_nodes)


def test_the_hold_and_the_lead_time_take_the_warm_start_only_where_every_eligible_node_has_it() -> None:
    svc = _zero_able()
    plan = design(svc, SETTINGS).plan
    assert plan is not None
    margin = SETTINGS.cold_start_margin_s  # 60 s
    holds = {}
    for label, nodes in (("none", []), ("some", ["n0"]), ("all", ["n0", "n1"])):
        designed = design(svc, SETTINGS, _observed(svc, plan, nodes, eligible=2))
        assert designed.front_door is not None and designed.reported_plan is not None
        pool = next(p for p in designed.front_door.pools if "l4" in p.tiers)
        holds[label] = pool.hold_s
        l4 = designed.reported_plan.tier("l4")
        assert designed.compile_caches["l4"].warm is (label == "all")
        # The lead time the autoscaler reads (status.plan's coldStartSeconds).
        assert l4.cold_start_seconds == (50.3 if label == "all" else 61.3)
    # One pool over both tiers (no routing), holding for the slower, 61.3 s either way (L4 and
    # A100 read the same 16 GB): ceil((61.3 + 60) / 30) × 30 = 150 s while a node of either
    # tier may start cold, ceil((50.3 + 60) / 30) × 30 = 120 s once every node of both has it.
    assert margin == 60
    assert holds == {"none": 150, "some": 150, "all": 120}
    assert topology.HOLD_STEP_S == 30
