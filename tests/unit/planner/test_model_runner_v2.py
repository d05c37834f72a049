"""Model Runner V2's accounting (vllm/v1/worker/gpu/, the default for dense models from
0.25.1 and for every model from 0.29) and expert parallelism through serving.extraArgs."""

from __future__ import annotations

from typing import Any

from inferfleet.api.plan import TierPlan
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan
from inferfleet.planner.accounting import (
    SAMPLER_BYTES_V1,
    SAMPLER_BYTES_V2_PROFILE,
    model_accounting,
    runs_model_runner_v2,
)
from inferfleet.planner.releases import resolve_release

CATALOGS = default_catalogs()


def _arch(name: str) -> Any:
    arch = CATALOGS.model(name)
    assert arch is not None
    return arch


def test_which_models_the_release_runs_on_v2() -> None:
    dense, moe = _arch("Qwen/Qwen3-8B"), _arch("openai/gpt-oss-20b")
    for version, on_dense, on_moe in (
        ("0.21.0", False, False),
        ("0.27.1", True, False),
        ("0.33.0", True, True),
    ):
        release = resolve_release(None, version)
        for arch, expected in ((dense, on_dense), (moe, on_moe)):
            got = runs_model_runner_v2(
                release, model_type=arch.model_type, moe=arch.moe is not None, weight_format="none"
            )
            assert got == expected, (version, arch.name)
    # 0.22-0.23: the listed architectures only, and only unquantized
    release = resolve_release(None, "0.23.0")
    assert runs_model_runner_v2(release, model_type="qwen3", moe=False, weight_format="none")
    assert not runs_model_runner_v2(release, model_type="qwen3", moe=False, weight_format="fp8")
    assert not runs_model_runner_v2(release, model_type="qwen2", moe=False, weight_format="none")


def test_v2_accounting_up_to_0_28() -> None:
    # profile_cudagraph_memory returned 0; the dummy sampler kept 16-bit logits only; the
    # penalty state (max_num_seqs × vocab × 4.125 B) is allocated after the first snapshot.
    dense = model_accounting(resolve_release(None, "0.27.1"), _arch("Qwen/Qwen3-8B"), weight_format="none")
    assert dense.model_runner_v2 and not dense.graph_reserve
    assert dense.sampler_bytes_per_logit == SAMPLER_BYTES_V2_PROFILE
    assert dense.runner_state_bytes(256, 151_936) == 256 * 151_936 * 4.125
    moe = model_accounting(
        resolve_release(None, "0.27.1"), _arch("openai/gpt-oss-20b"), weight_format="mxfp4"
    )
    assert not moe.model_runner_v2 and moe.graph_reserve and moe.runner_state_bytes(256, 201_088) == 0.0
    newest = model_accounting(resolve_release(None, "0.33.0"), _arch("Qwen/Qwen3-8B"), weight_format="none")
    assert newest.model_runner_v2 and newest.graph_reserve
    assert newest.sampler_bytes_per_logit == SAMPLER_BYTES_V1


def _tier(model: str, version: str, gpu: Any, **overrides: Any) -> TierPlan:
    extra = overrides.pop("extraArgs", None)
    spec = InferenceServiceSpec.model_validate(
        {
            "model": {"name": model},
            "workload": {
                "inputTokens": {"p50": 1000, "p95": 2000, "p99": 2000},
                "outputTokens": {"p50": 64, "p95": 128, "p99": 128},
                "peakRequestsPerSecond": 1,
            },
            "serving": {"vllmVersion": version, "extraArgs": extra},
            "tiers": [{"name": "t", "gpu": gpu, "gpusPerNode": 8, "overrides": overrides}],
        }
    )
    return plan(spec, CATALOGS, "x").tiers[0]


def test_qwen3_8b_on_an_rtx_4090_at_0_27_1() -> None:
    # enginrect/llmso (held out): 'Available KV cache memory: 5.87 GiB', 42,768 tokens.
    tier = _tier(
        "Qwen/Qwen3-8B",
        "0.27.1",
        {"name": "RTX-4090", "memoryGiB": 23.99},
        gpuMemoryUtilization=0.9,
        maxModelLen=4096,
        maxNumSeqs=256,
        maxNumBatchedTokens=2048,
        tensorParallelSize=1,
    )
    assert tier.feasible and tier.memory_gi_b.cuda_graphs == 0.0
    assert abs(tier.kv_cache_tokens / 42_768 - 1) < 0.02


def test_expert_parallel_keeps_experts_whole() -> None:
    # 128×128 FP8 blocks cannot split Qwen3-235B's 1536-wide experts 8 ways (192), but
    # --enable-expert-parallel deals whole experts to the ranks (tim-roethig/ai-platform).
    flags = {"tensorParallelSize": 8, "maxModelLen": 32768, "gpuMemoryUtilization": 0.9}
    plain = _tier("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "0.10.2", "L40S", **flags)
    assert not plain.feasible and "weight blocks" in plain.reasons[0]
    ep = _tier(
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "0.10.2",
        "L40S",
        extraArgs=["--enable-expert-parallel"],
        **flags,
    )
    assert ep.feasible, ep.reasons
    off = _tier(
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "0.10.2",
        "L40S",
        extraArgs=["--enable-expert-parallel", "--no-enable-expert-parallel"],
        **flags,
    )
    assert not off.feasible
