"""plan(): choices, reasons, infeasible tiers, fleet figures, the usual worked example."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from inferfleet.api import InferenceServiceSpec, load_all
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan, plan_service
from inferfleet.planner.units import GB, GIB
from tests.conftest import EXAMPLES_DIR, example_paths
from tests.unit.planner.helpers import make_spec, spec_doc

CATALOGS = default_catalogs()


def _tier(spec: InferenceServiceSpec, index: int = 0):  # type: ignore[no-untyped-def]
    return plan(spec, CATALOGS, "t").tiers[index]


# --- the usual worked sizing example (docs/concepts/planning.md) ----------------------


def _worked_example(quantization: str) -> InferenceServiceSpec:
    # 50 concurrent requests at 8K context: P95 input 8000 + P95 output 192 tokens, and a
    # peak rate whose Little's-law concurrency rounds up to 50 (0.245 req/s × 202 s).
    # The guide's example sizes memory only, so the latency SLOs are loose enough not to
    # raise TP (with a 100 ms ITL SLO, 8K prompts need more GPUs; see the SLO tests).
    return make_spec(
        model="meta-llama/Llama-3.3-70B-Instruct",
        quantization=quantization,
        workload={
            "inputTokens": {"p50": 8000, "p95": 8000, "p99": 8000},
            "outputTokens": {"p50": 192, "p95": 192, "p99": 192},
            "peakRequestsPerSecond": 49.5 / 202,
            "slo": {"ttftP99Ms": 10000, "itlP99Ms": 1000},
        },
    )


def test_worked_example_fp16_needs_four_h100s() -> None:
    tier = _tier(_worked_example("none"))
    assert tier.feasible and tier.quantization == "none"
    # guide: 140 GB of weights, ceil(287 GB / 80 GB) = 4 H100s at minimum
    assert tier.gpus_per_replica == 4
    weights_gb = tier.memory_gi_b.weights * tier.gpus_per_replica * GIB / GB
    assert abs(weights_gb - 140) / 140 < 0.05
    assert tier.concurrency_at_p95 >= 50


def test_worked_example_fp8_needs_two_to_three_h100s() -> None:
    tier = _tier(_worked_example("fp8"))
    assert tier.feasible and tier.quantization == "fp8"
    # guide: weights drop to 70 GB, 2-3 GPUs become viable (TP must divide 64 heads: 2)
    assert tier.gpus_per_replica in (2, 3)
    weights_gb = tier.memory_gi_b.weights * tier.gpus_per_replica * GIB / GB
    assert abs(weights_gb - 70) / 70 < 0.05
    assert tier.concurrency_at_p95 >= 50


# --- the examples -------------------------------------------------------------------


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_examples_plan_feasibly_with_every_field(path: Any) -> None:
    for service in load_all(path.read_text(encoding="utf-8")):
        result = plan_service(service)
        assert [t.name for t in result.tiers] == [t.name for t in service.spec.tiers]
        for tier in result.tiers:
            assert tier.feasible, tier.reasons[0]
            assert tier.performance is not None and tier.performance.prefill_tokens_per_second > 0
            assert tier.usable_rps > 0 and tier.replicas_for_peak >= 1 and tier.cold_start_seconds > 0
            assert tier.kv_cache_tokens > 0 and tier.max_concurrency >= 1 and tier.concurrency_at_p95 > 0
            assert tier.cost_per_million_tokens_usd is not None and tier.cost_per_million_tokens_usd > 0
            assert tier.gpus_per_replica == tier.tensor_parallel_size * tier.pipeline_parallel_size
            assert len(tier.reasons) >= 8


def test_405b_bf16_needs_pipeline_parallel_across_nodes() -> None:
    service = load_all((EXAMPLES_DIR / "llama-405b-multinode.yaml").read_text(encoding="utf-8"))[0]
    tier = plan_service(service).tiers[0]
    assert tier.quantization == "none" and tier.tensor_parallel_size == 8
    assert tier.pipeline_parallel_size >= 2 and tier.nodes_per_replica >= 2
    assert any("LeaderWorkerSet" in reason for reason in tier.reasons)


def test_fp8_hardware_gets_w8a8_and_fp8_kv_ampere_does_not() -> None:
    service = load_all((EXAMPLES_DIR / "llama-70b-chat.yaml").read_text(encoding="utf-8"))[0]
    h100, a100 = plan_service(service).tiers
    assert (h100.quantization, h100.kv_cache_dtype) == ("fp8", "fp8")
    assert a100.kv_cache_dtype == "auto" and a100.quantization in ("none", "fp8")
    assert h100.gpus_per_replica <= a100.gpus_per_replica


def test_prequantized_checkpoint_keeps_its_format() -> None:
    tier = _tier(make_spec(model="openai/gpt-oss-120b"))
    assert tier.quantization == "mxfp4"
    assert any("pre-quantized" in reason for reason in tier.reasons)


def test_inline_architecture_and_inline_gpu() -> None:
    doc = spec_doc(model="acme/custom-7b")
    doc["model"].update(
        {
            "parametersBillion": 7.2,
            "config": {
                "hidden_size": 4096,
                "intermediate_size": 11008,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 64000,
            },
        }
    )
    doc["tiers"] = [{"name": "ada", "gpu": {"name": "RTX-6000-Ada", "memoryGiB": 47.5, "fp8": True}}]
    tier = _tier(InferenceServiceSpec.model_validate(doc))
    assert tier.feasible and tier.gpu == "RTX-6000-Ada" and tier.quantization == "fp8"
    assert tier.cost_per_million_tokens_usd is None  # no costPerGpuHour


# --- infeasible tiers never raise -------------------------------------------------------


def test_unknown_model_is_infeasible_with_the_reason_first() -> None:
    tier = _tier(make_spec(model="acme/never-heard-of-it"))
    assert not tier.feasible and tier.reasons[0].startswith("infeasible:")
    assert "spec.model.config" in tier.reasons[0]


def test_unsupported_accelerator_is_infeasible() -> None:
    doc = spec_doc()
    doc["tiers"] = [{"name": "tpu", "gpu": "TPU-v6e"}, {"name": "h100", "gpu": "H100-SXM-80GB"}]
    tpu, h100 = plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "t").tiers
    assert not tpu.feasible and "not served by vLLM-GPU tiers" in tpu.reasons[0]
    assert h100.feasible


def test_too_long_max_model_len_is_infeasible_as_a_failed_start() -> None:
    doc = spec_doc()
    doc["tiers"] = [
        {
            "name": "l4",
            "gpu": "L4",
            "gpusPerNode": 1,
            "overrides": {
                "quantization": "none",
                "maxModelLen": 131072,
                "tensorParallelSize": 1,
                "pipelineParallelSize": 1,
            },
        }
    ]
    tier = _tier(InferenceServiceSpec.model_validate(doc))
    assert not tier.feasible
    assert "refuses to start" in tier.reasons[0] or "does not fit" in tier.reasons[0]


def test_a_model_beyond_the_node_limit_is_infeasible_and_suggests_fp8() -> None:
    doc = spec_doc(model="meta-llama/Llama-3.3-70B-Instruct", quantization="none")
    doc["tiers"] = [{"name": "l4", "gpu": "L4", "gpusPerNode": 1}]
    tier = _tier(InferenceServiceSpec.model_validate(doc))
    assert not tier.feasible and "enable fp8" in tier.reasons[0] and "nodes" in tier.reasons[0]


def test_invalid_tp_override_is_infeasible_not_an_exception() -> None:
    doc = spec_doc()
    doc["tiers"][0]["overrides"] = {"tensorParallelSize": 3}
    tier = _tier(InferenceServiceSpec.model_validate(doc))
    assert not tier.feasible and "divisible" in tier.reasons[0]


# --- fleet figures ----------------------------------------------------------------------


def test_cold_start_follows_the_storage_path_and_the_hint_wins() -> None:
    def cold(cache: dict[str, Any]) -> float:
        return _tier(make_spec(cache=cache)).cold_start_seconds

    nvme, pvc, hub = cold({"mode": "nvme"}), cold({"mode": "pvc", "pvcName": "w"}), cold({"mode": "none"})
    assert nvme < pvc < hub
    assert cold({"mode": "none", "storageBandwidthGBps": 50}) < nvme


def test_routing_share_and_headroom_drive_replicas() -> None:
    doc = spec_doc()
    doc["tiers"] = [{"name": "a", "gpu": "H100-SXM-80GB"}, {"name": "b", "gpu": "H100-SXM-80GB"}]
    doc["workload"]["peakRequestsPerSecond"] = 100
    doc["workload"]["routing"] = {"a": 0.8}
    a, b = plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "t").tiers
    assert a.replicas_for_peak > b.replicas_for_peak
    doc["scaling"] = {"headroom": 1.0}
    a2 = plan(InferenceServiceSpec.model_validate(doc), CATALOGS, "t").tiers[0]
    assert a2.replicas_for_peak > a.replicas_for_peak


def test_cost_per_million_tokens_scales_with_price() -> None:
    cheap = make_spec(tiers=[{"name": "h", "gpu": "H100-SXM-80GB", "costPerGpuHour": 1.0}])
    dear = make_spec(tiers=[{"name": "h", "gpu": "H100-SXM-80GB", "costPerGpuHour": 3.0}])
    one, three = _tier(cheap).cost_per_million_tokens_usd, _tier(dear).cost_per_million_tokens_usd
    assert (
        one is not None and three is not None and abs(three / one - 3) < 0.01
    )  # figures are rounded to 4 decimals


def test_batch_archetype_takes_larger_batches_than_chat() -> None:
    chat = _tier(make_spec(tiers=[{"name": "l4", "gpu": "L4"}]))
    batch_doc = spec_doc(tiers=[{"name": "l4", "gpu": "L4"}])
    batch_doc["workload"].update({"archetype": "batch", "mode": "offline"})
    batch = _tier(InferenceServiceSpec.model_validate(batch_doc))
    assert batch.max_num_seqs > chat.max_num_seqs
    assert batch.max_num_batched_tokens >= chat.max_num_batched_tokens


def test_plan_is_deterministic() -> None:
    spec = make_spec()
    assert plan(spec, CATALOGS, "x") == plan(spec, CATALOGS, "x")


# --- the CLI ----------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from inferfleet.cli import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_json_follows_the_contract() -> None:
    result = _cli("plan", "-f", str(EXAMPLES_DIR / "llama-70b-chat.yaml"), "-o", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"name", "tiers"} and document["name"] == "llama-70b-chat"
    tier = document["tiers"][0]
    for key in (
        "name",
        "gpu",
        "feasible",
        "tensorParallelSize",
        "pipelineParallelSize",
        "gpusPerReplica",
        "quantization",
        "kvCacheDtype",
        "gpuMemoryUtilization",
        "maxModelLen",
        "maxNumSeqs",
        "maxNumBatchedTokens",
        "memoryGiB",
        "kvCacheTokens",
        "maxConcurrency",
        "usableRps",
        "replicasForPeak",
        "coldStartSeconds",
        "reasons",
        "performance",
        "costPerMillionTokensUsd",
    ):
        assert key in tier, key
    # The contract's four figures stay; fields are only ever added.
    assert set(tier["memoryGiB"]) == {
        "weights",
        "activations",
        "overhead",
        "kvCache",
        "cudaGraphs",
        "reserve",
    }
    assert tier["vllmRelease"] == "0.33.0" and tier["releaseFamily"] == "v1-graph-reserve"
    assert tier["loadPeakGiB"] > tier["memoryGiB"]["weights"] and tier["numGpuBlocks"] > 0


def test_cli_table_shows_figures_and_reasons() -> None:
    result = _cli("plan", "-f", str(EXAMPLES_DIR / "qwen3-moe.yaml"))
    assert result.returncode == 0, result.stderr
    assert "KV tokens / replica" in result.stdout and "why:" in result.stdout


def test_cli_missing_file_exits_2() -> None:
    result = _cli("plan", "-f", "/nonexistent.yaml")
    assert result.returncode == 2 and "no such file" in result.stderr
