#!/usr/bin/env python3
"""How close the planner's memory figures come to what vLLM reported at startup.

Plans every row of shared/data/vllm_kv_calibration.csv through the public
`inferfleet.planner.plan` API: the row's settings go in as tier overrides (TP, PP,
dtype, quantization, KV dtype, gpu-memory-utilization, max-model-len, block size, and
the batch limits that row's vLLM version defaults to), the architecture goes in inline
from shared/data/model_arch.csv, and the GPU comes from the catalog (inline when the
catalog lacks it). Prints JSON: per row and in aggregate, the error of kvCacheTokens
(memoryGiB.kvCache where the row logged no token count) and of memoryGiB.weights.

Targets (issue 3): KV within ±10% or 1 GiB per GPU on ≥ 90% of rows, weights within
±5%, rows that record a failed start come out infeasible.

Usage: hack/bench/planner_accuracy.py [--shared DIR]   (or INFERFLEET_SHARED_DIR)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import Catalogs, default_catalogs
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.planner import plan

KV_TOLERANCE_REL = 0.10
KV_TOLERANCE_GIB = 1.0
WEIGHTS_TOLERANCE_REL = 0.05
KV_SHARE_TARGET = 0.90
GIB = float(1 << 30)


def shared_dir(flag: str | None) -> Path:
    if flag:
        return Path(flag)
    env = os.environ.get("INFERFLEET_SHARED_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared"


def _number(value: str) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


# --- architecture: model_arch.csv row → config.json keys ---------------------------


def _note_int(notes: str, key: str) -> int | None:
    match = re.search(rf"{key}\s*[= ]\s*(\d+)", notes)
    return int(match.group(1)) if match else None


def arch_config(row: dict[str, str]) -> dict[str, Any]:
    """The row as HF config.json keys; extra keys come from `key=value` notes."""
    notes = row.get("notes", "")
    config: dict[str, Any] = {
        "num_hidden_layers": int(row["num_layers"]),
        "num_attention_heads": int(row["num_attention_heads"]),
        "num_key_value_heads": int(row["num_kv_heads"]),
        "hidden_size": int(row["hidden_size"]),
        "intermediate_size": int(row["intermediate_size"]),
        "vocab_size": int(row["vocab_size"]),
        # The CSV has no context length; the benchmark forces max-model-len anyway.
        "max_position_embeddings": 1 << 20,
    }
    if row.get("head_dim"):
        config["head_dim"] = int(row["head_dim"])
    if row.get("is_moe", "").lower() == "true":
        config["num_local_experts"] = int(row["num_experts"])
        config["num_experts_per_tok"] = int(row["experts_per_token"])
        for key in ("moe_intermediate_size", "first_k_dense_replace"):
            value = _note_int(notes, key)
            if value is not None:
                config[key] = value
        shared = re.search(r"(\d+) shared experts?", notes)
        if shared:
            config["n_shared_experts"] = int(shared.group(1))
    for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"):
        value = _note_int(notes, key)
        if value is not None:
            config[key] = value
    window = re.search(r"sliding-window\((\d+)\)", notes)
    if window:
        config["sliding_window"] = int(window.group(1))
        if "alternating" in notes:
            config["layer_types"] = [
                "sliding_attention" if i % 2 == 0 else "full_attention"
                for i in range(config["num_hidden_layers"])
            ]
    return config


# --- hardware and engine defaults --------------------------------------------------

GPU_PATTERNS = (
    (r"h200", "H200-SXM-141GB"),
    (r"h100.*nvl", "H100-NVL-94GB"),
    (r"h100.*pcie", "H100-PCIE-80GB"),
    (r"h100", "H100-SXM-80GB"),
    (r"a100.*40", "A100-SXM-40GB"),
    (r"a100", "A100-SXM-80GB"),
    (r"l40s", "L40S"),
    (r"\bl4\b", "L4"),
    (r"a10g", "A10G"),
    (r"\bt4\b", "T4"),
    (r"mi325x", "MI325X"),
    (r"mi300x", "MI300X"),
    (r"b200", "B200"),
)


def catalog_gpu(text: str, catalogs: Catalogs) -> GpuSpec | None:
    lowered = text.lower()
    for pattern, name in GPU_PATTERNS:
        if re.search(pattern, lowered):
            return catalogs.gpu(name)
    return None


def engine_defaults(version: str, gpu_memory_gib: float, ampere: bool, max_model_len: int) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) that row's vLLM picked by itself.

    V0 without chunked prefill profiles max(max_model_len, 2048) tokens over 256
    sequences; V1 picks by GPU (reference/vllm-and-gpus.md §1, API server defaults).
    """
    if "V0" in version:
        batched = max(max_model_len, 2048) if max_model_len <= 32768 else 2048
        return (256, batched)
    if gpu_memory_gib >= 160:
        return (1024, 16384)
    if gpu_memory_gib >= 70 and not ampere:
        return (1024, 8192)
    return (256, 2048)


def _dtype(text: str) -> str:
    return "float16" if "float16" in text and "bfloat16" not in text else "bfloat16"


def row_spec(
    row: dict[str, str], arch_row: dict[str, str], catalogs: Catalogs
) -> tuple[dict[str, Any], GpuSpec | str]:
    gpu = catalog_gpu(row["gpu"], catalogs)
    total = _number(row["gpu_mem_gib"])
    if gpu is not None:
        gpu_field: Any = gpu.name
        memory = gpu.memory_gib
        ampere = gpu.family == "ampere"
    else:
        if total is None:
            raise ValueError(f"GPU {row['gpu']!r} is not in the catalog and the row has no memory figure")
        gpu_field = {"name": re.sub(r"[^A-Za-z0-9-]+", "-", row["gpu"]).strip("-")[:60], "memoryGiB": total}
        memory = total
        ampere = "3090" in row["gpu"] or "a10" in row["gpu"].lower()
    mml = int(row["max_model_len"])
    seqs, batched = engine_defaults(row["vllm_version"], memory, ampere, mml)
    quant = (row.get("quantization") or "").strip() or "none"
    kv = row["kv_cache_dtype"].strip()
    overrides: dict[str, Any] = {
        "tensorParallelSize": int(row["tp"]),
        "pipelineParallelSize": int(row["pp"]),
        "dtype": _dtype(row["dtype"]),
        "quantization": quant,
        "kvCacheDtype": "fp8" if kv.startswith("fp8") else kv,
        "gpuMemoryUtilization": float(row["gpu_memory_utilization"]),
        "maxModelLen": mml,
        "blockSize": int(row["block_size"] or 16),
        "maxNumSeqs": seqs,
        "maxNumBatchedTokens": batched,
        "enforceEager": "enforce_eager" in row.get("notes", ""),
    }
    spec = {
        "model": {
            "name": row["model"],
            "config": arch_config(arch_row),
            "parametersBillion": float(arch_row["num_params_b"]),
        },
        "workload": {
            "inputTokens": {"p50": mml // 4, "p95": mml // 2, "p99": mml // 2},
            "outputTokens": {"p50": 64, "p95": 128, "p99": 128},
            "peakRequestsPerSecond": 1,
        },
        "tiers": [{"name": "row", "gpu": gpu_field, "gpusPerNode": 8, "overrides": overrides}],
    }
    return (spec, gpu_field)


def evaluate(shared: Path) -> dict[str, Any]:
    catalogs = default_catalogs()
    data = shared / "data"
    with (data / "model_arch.csv").open(newline="", encoding="utf-8") as handle:
        archs = {row["model"]: row for row in csv.DictReader(handle)}
    with (data / "vllm_kv_calibration.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    results: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        spec_doc, gpu_field = row_spec(row, archs[row["model"]], catalogs)
        spec = InferenceServiceSpec.model_validate(spec_doc)
        tier = plan(spec, catalogs, f"row-{index}").tiers[0]
        failed_start = "FAILED" in row.get("notes", "").upper()
        result: dict[str, Any] = {
            "row": index,
            "model": row["model"],
            "gpu": gpu_field if isinstance(gpu_field, str) else gpu_field["name"],
            "tp": int(row["tp"]),
            "pp": int(row["pp"]),
            "vllmVersion": row["vllm_version"],
            "feasible": tier.feasible,
            "predicted": {
                "kvCacheTokens": tier.kv_cache_tokens,
                "kvCacheGiB": tier.memory_gi_b.kv_cache,
                "weightsGiB": tier.memory_gi_b.weights,
                "activationsGiB": tier.memory_gi_b.activations,
                "overheadGiB": tier.memory_gi_b.overhead,
            },
        }
        actual_tokens = _number(row["kv_cache_tokens"])
        actual_kv_gib = _number(row["kv_cache_gib"])
        if actual_tokens:
            error = (tier.kv_cache_tokens - actual_tokens) / actual_tokens
            gib_per_token = tier.memory_gi_b.kv_cache / tier.kv_cache_tokens if tier.kv_cache_tokens else 0.0
            gib_error = abs(tier.kv_cache_tokens - actual_tokens) * gib_per_token
            result["kv"] = {
                "metric": "kvCacheTokens",
                "actual": actual_tokens,
                "predicted": tier.kv_cache_tokens,
                "relError": round(error, 4),
                "perGpuGiBError": round(gib_error, 3),
                "withinTarget": abs(error) <= KV_TOLERANCE_REL or gib_error <= KV_TOLERANCE_GIB,
            }
        elif actual_kv_gib is not None:
            error = (tier.memory_gi_b.kv_cache - actual_kv_gib) / actual_kv_gib
            gib_error = abs(tier.memory_gi_b.kv_cache - actual_kv_gib)
            result["kv"] = {
                "metric": "memoryGiB.kvCache",
                "actual": actual_kv_gib,
                "predicted": tier.memory_gi_b.kv_cache,
                "relError": round(error, 4),
                "perGpuGiBError": round(gib_error, 3),
                "withinTarget": abs(error) <= KV_TOLERANCE_REL or gib_error <= KV_TOLERANCE_GIB,
            }
        actual_weights = _number(row["weights_gib"])
        if actual_weights:
            error = (tier.memory_gi_b.weights - actual_weights) / actual_weights
            result["weights"] = {
                "actual": actual_weights,
                "predicted": tier.memory_gi_b.weights,
                "relError": round(error, 4),
                "withinTarget": abs(error) <= WEIGHTS_TOLERANCE_REL,
            }
        if failed_start:
            result["failedStart"] = {
                "expectedInfeasible": True,
                "ok": not tier.feasible,
                "reason": tier.reasons[0],
            }
        results.append(result)

    kv_rows = [r["kv"] for r in results if "kv" in r]
    weight_rows = [r["weights"] for r in results if "weights" in r]
    failed_rows = [r["failedStart"] for r in results if "failedStart" in r]
    kv_share = sum(1 for r in kv_rows if r["withinTarget"]) / len(kv_rows) if kv_rows else 0.0
    aggregate = {
        "kv": {
            "rows": len(kv_rows),
            "withinTarget": sum(1 for r in kv_rows if r["withinTarget"]),
            "share": round(kv_share, 4),
            "medianAbsRelError": round(statistics.median(abs(r["relError"]) for r in kv_rows), 4),
            "maxAbsRelError": round(max(abs(r["relError"]) for r in kv_rows), 4),
            "target": (
                f"share >= {KV_SHARE_TARGET} within ±{KV_TOLERANCE_REL:.0%} or {KV_TOLERANCE_GIB} GiB/GPU"
            ),
        },
        "weights": {
            "rows": len(weight_rows),
            "withinTarget": sum(1 for r in weight_rows if r["withinTarget"]),
            "medianAbsRelError": round(statistics.median(abs(r["relError"]) for r in weight_rows), 4),
            "maxAbsRelError": round(max(abs(r["relError"]) for r in weight_rows), 4),
            "target": f"every row within ±{WEIGHTS_TOLERANCE_REL:.0%}",
        },
        "failedStart": {"rows": len(failed_rows), "infeasible": sum(1 for r in failed_rows if r["ok"])},
    }
    aggregate["targetsMet"] = (
        kv_share >= KV_SHARE_TARGET
        and aggregate["weights"]["withinTarget"] == len(weight_rows)
        and aggregate["failedStart"]["infeasible"] == len(failed_rows)
    )
    return {"benchmark": "planner_accuracy", "aggregate": aggregate, "rows": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", help="the shared/ directory (default: ../shared next to the repository)")
    parser.add_argument("--summary", action="store_true", help="print only the aggregate")
    args = parser.parse_args()
    report = evaluate(shared_dir(args.shared))
    if args.summary:
        report = {"benchmark": report["benchmark"], "aggregate": report["aggregate"]}
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
