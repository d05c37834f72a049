"""The host-memory KV tier: its size by hand-worked arithmetic, when it pays, which
releases and models get one, and what the plan, the pods and vLLM's flags say."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet import planner
from inferfleet.api import TierPlan
from inferfleet.catalog import default_catalogs
from inferfleet.catalog.vllm_releases import release_facts
from inferfleet.config import OperatorSettings
from inferfleet.planner import host_kv
from inferfleet.planner.host_memory import memory_request_gib
from inferfleet.planner.units import GIB
from tests.toolkit import a_service, a_tier_plan
from tests.toolkit.design import designed

CATALOGS = default_catalogs()
H100 = CATALOGS.gpu("H100-SXM-80GB")
LLAMA = CATALOGS.model("meta-llama/Llama-3.1-8B-Instruct")
GEMMA = CATALOGS.model("google/gemma-2-9b-it")
NEWEST = release_facts("0.33.0")

# The toolkit's hand-made H100 plan: TP 2, 50 GiB of KV per GPU holding 200,000 tokens
# (so 0.0005 GiB a token over the replica), 128 sequence slots, a 20,000 tokens/s prefill.
PLAN = a_tier_plan("h100").with_(
    performance={"prefillTokensPerSecond": 20_000.0, "decodeStepBaseMs": 10.0, "decodeStepPerSeqMs": 0.1}
)


def rag(**host: Any) -> Any:
    """A RAG service whose P95 prompt is 4,000 tokens, with the host tier as given."""
    service = a_service("docs").workload(
        archetype="rag", inputTokens={"p50": 2000, "p95": 4000, "p99": 6000}, slo={"ttftP99Ms": 2000}
    )
    return service.with_spec(serving={"hostKvCache": host} if host else {}).tier("h100", "H100-SXM-80GB")


def decide(
    service: Any, plan: TierPlan, *, default: host_kv.Mode = "off", arch: Any = LLAMA, release: Any = NEWEST
) -> host_kv.HostKv:
    spec = service.spec()
    tier = next(t for t in spec.tiers if t.name == plan.name)
    assert H100 is not None
    return host_kv.plan_host_kv(spec, tier, plan, gpu=H100, arch=arch, release=release, default=default)


def test_the_size_is_half_of_what_the_nodes_memory_leaves_beside_the_pods_by_hand() -> None:
    plan = PLAN.build()
    # H100 nodes: 217.9 GiB of host memory per GPU (GCP a3-highgpu-8g, 1,872 GB / 8), two
    # GPUs: 435.8 GiB. The pod asks 16 + 2 x 8 = 32 GiB. Half of the 403.8 GiB left is
    # 201.9: 201 GiB. At 100 GiB / 200,000 tokens that is 402,000 tokens.
    assert memory_request_gib(plan) == 32
    found = decide(rag(mode="on"), plan)
    assert found.gib == 201.0
    assert found.tokens == 402_000
    (reason,) = found.reasons
    assert reason.startswith("host KV cache: 201 GiB per replica planned (402,000 tokens;")
    # vLLM stores every block the GPU computes: the tier reaches 402,000 - 200,000 beyond it.
    assert reason.endswith("it reaches 202,000 tokens beyond the GPU cache's 200,000")
    # It pays: 4,000 tokens are 2 GiB, back in 34 ms over PCIe Gen5 (63 GB/s) against
    # 200 ms to prefill them; the GPU cache holds 200,000 / (4,000 x 128) = 0.4 contexts a slot.
    assert "pays: a P95 prompt's KV (4,000 tokens, 2.00 GiB) reloads in 34 ms" in reason
    assert "against 200 ms to prefill it again" in reason and "0.4 P95 contexts" in reason


def test_a_size_asked_for_is_kept_within_the_budget_and_a_larger_one_is_said() -> None:
    plan = PLAN.build()
    assert decide(rag(mode="on", sizeGiB=64), plan).gib == 64.0
    capped = decide(rag(mode="on", sizeGiB=5000), plan)
    assert capped.gib == 201.0
    assert capped.warnings == ("host KV cache: 5000 GiB asked for, 201 GiB planned (the nodes' budget)",)
    # The nodes' own memory, when the tier says it: 2 GPUs of an 8-GPU 1 TiB node.
    small = rag(mode="on").tier("h100", "H100-SXM-80GB", hostMemoryGiB=1024)
    assert decide(small, plan).gib == (1024 / 8 * 2 - 32) // 2


def test_a_tier_under_twice_the_gpu_cache_reaches_too_little_beyond_it() -> None:
    # 64 GiB hold 128,000 tokens, a copy of what the GPU's 200,000 already hold: auto
    # plans none, on plans it and says it may not pay.
    found = decide(rag(mode="auto", sizeGiB=64), PLAN.build())
    assert found.gib == 0.0
    assert (
        "it reaches 0 tokens beyond the GPU cache's 200,000, less than the GPU cache again"
        in (found.reasons[0])
    )
    forced = decide(rag(mode="on", sizeGiB=199), PLAN.build())
    assert forced.gib == 199.0 and "though it may not pay" in forced.reasons[0]
    assert "reaches 198,000 tokens beyond" in forced.reasons[0]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"archetype": "batch"}, "archetype batch reuses no prefixes"),
        ({"inputTokens": {"p50": 20, "p95": 40, "p99": 60}}, "from 4 reused prefixes start falling out"),
    ],
)
def test_auto_leaves_it_out_where_it_does_not_pay(change: dict[str, Any], why: str) -> None:
    service = rag(mode="auto").workload(**change)
    found = decide(service, PLAN.build())
    assert (found.gib, found.warnings) == (0.0, ())
    assert why in found.reasons[0]
    # `on` plans it anyway, and says it may not pay.
    forced = decide(rag(mode="on").workload(**change), PLAN.build())
    assert forced.gib > 0 and "though it may not pay" in forced.reasons[0]


def test_auto_leaves_it_out_when_recomputing_is_as_fast_as_reloading() -> None:
    fast_prefill = PLAN.with_(
        performance={"prefillTokensPerSecond": 200_000.0, "decodeStepBaseMs": 10.0, "decodeStepPerSeqMs": 0.1}
    ).build()
    found = decide(rag(mode="auto"), fast_prefill)
    assert found.gib == 0.0 and "recomputing is about as fast" in found.reasons[0]


def test_prefix_caching_off_leaves_nothing_to_reload() -> None:
    service = rag(mode="auto").with_spec(serving={"hostKvCache": {"mode": "auto"}, "prefixCaching": False})
    assert "prefix caching is off" in decide(service, PLAN.build()).reasons[0]


def test_the_operator_default_applies_where_the_spec_does_not_choose_and_off_says_nothing() -> None:
    plan = PLAN.build()
    assert decide(rag(), plan) == host_kv.NONE
    assert decide(rag(), plan, default="auto").gib == 201.0
    assert decide(rag(mode="off"), plan, default="on") == host_kv.NONE


@pytest.mark.parametrize(
    ("release", "arch", "why"),
    [
        ("0.11.1", LLAMA, "leaves the CPU cache unsized"),
        ("0.10.2", LLAMA, "has no --kv-offloading-size"),
        ("0.20.0", GEMMA, "21 sliding-window layers would hold full-length KV"),
    ],
)
def test_releases_and_models_without_a_working_tier_get_none_and_on_warns(
    release: str, arch: Any, why: str
) -> None:
    facts = release_facts(release)
    assert facts is not None
    found = decide(rag(mode="on"), PLAN.build(), arch=arch, release=facts)
    assert found.gib == 0.0 and why in found.reasons[0]
    assert found.warnings == found.reasons  # asked for: a warning, not a silent default
    assert decide(rag(mode="auto"), PLAN.build(), arch=arch, release=facts).warnings == ()


def test_from_0_21_the_connector_keeps_the_hybrid_manager_so_a_sliding_window_model_gets_one() -> None:
    facts = release_facts("0.21.0")
    assert facts is not None and facts.kv_offload_keeps_hybrid
    assert decide(rag(mode="on"), PLAN.build(), arch=GEMMA, release=facts).gib > 0


def test_a_replica_over_several_nodes_gets_none() -> None:
    found = decide(rag(mode="on"), PLAN.layout(4, 2, nodes=2).build())
    assert found.gib == 0.0 and "spans pipeline stages or nodes" in found.reasons[0]


def test_the_design_plans_it_and_the_pods_ask_for_its_memory_and_run_its_flags() -> None:
    from inferfleet import render

    service = (
        a_service("docs")
        .workload(
            archetype="rag", inputTokens={"p50": 6000, "p95": 12000, "p99": 16000}, slo={"ttftP99Ms": 4000}
        )
        .with_spec(cache={"mode": "none"})
        # Nodes with 128 GiB per L4: a tier over twice the GPU cache fits beside the pods.
        .tiers({"name": "l4", "gpu": "L4", "gpusPerNode": 4, "hostMemoryGiB": 512, "minReplicas": 1})
        .service()
    )
    plain = designed(service)
    with_tier = designed(service, OperatorSettings(host_kv_cache="auto"))
    assert plain.plan is not None and with_tier.plan is not None
    before, after = plain.plan.tiers[0], with_tier.plan.tiers[0]
    assert before.host_kv_cache_gi_b == 0.0 and after.host_kv_cache_gi_b > 0
    # Everything the GPU holds is as planned without it: the tier is beside, not instead.
    assert after.kv_cache_tokens == before.kv_cache_tokens
    assert after.max_concurrency == before.max_concurrency
    per_token = after.memory_gi_b.kv_cache * GIB * after.gpus_per_replica / after.kv_cache_tokens
    assert after.host_kv_cache_tokens == int(after.host_kv_cache_gi_b * GIB / per_token)
    deployment = next(
        o
        for o in render.render(with_tier)
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-l4")
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    size = f"{after.host_kv_cache_gi_b:g}"
    assert container["args"][container["args"].index("--kv-offloading-size") :][:4] == [
        "--kv-offloading-size",
        size,
        "--kv-offloading-backend",
        "native",
    ]
    assert container["resources"]["requests"]["memory"] == f"{memory_request_gib(after)}Gi"
    assert memory_request_gib(after) == memory_request_gib(before) + int(after.host_kv_cache_gi_b)
    plain_args = next(
        o for o in render.render(plain) if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-l4")
    )
    assert "--kv-offloading-size" not in plain_args["spec"]["template"]["spec"]["containers"][0]["args"]


def _vllm_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-l4")
    ]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_planning_keeps_every_other_figure_of_the_tier() -> None:
    service = rag(mode="on").service()
    off = planner.plan_service(rag(mode="off").service())
    on = planner.plan_service(service)
    for left, right in zip(off.tiers, on.tiers, strict=True):
        kept = {"hostKvCacheGiB", "hostKvCacheTokens", "reasons", "warnings"}
        assert {k: v for k, v in left.to_wire().items() if k not in kept} == {
            k: v for k, v in right.to_wire().items() if k not in kept
        }
