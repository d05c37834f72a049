#!/usr/bin/env python3
"""How close the planner's memory figures come to what vLLM reported at startup.

Plans every row of hack/bench/data/vllm_startup_logs.csv (real startup logs from public
sources, a source_url on each) through the public `inferfleet.planner.plan` API, the way
a user would describe that run: the image `vllm/vllm-openai:v<release>`, the run's flags
as tier overrides (TP, PP, dtype, quantization, KV dtype, gpu-memory-utilization,
max-model-len, block size, eager), the flags the planner has no field for
(--enable-expert-parallel, ...) as serving.extraArgs, and max-num-seqs / max-num-batched-tokens as the log
states them or, where it does not, as that release picks them for that GPU and entry
point (`planner.releases.engine_defaults`). The model comes from the catalog, or inline
from hack/bench/data/model_arch.csv when the catalog lacks it; the GPU from the catalog,
inline when the catalog lacks it.

Prints JSON: per row and in aggregate (split into the calibration rows the model was
fitted to and the held-out rows it was not, and by release family), the error of the
KV budget (kvCacheTokens where the log gives tokens, else memoryGiB.kvCache), the share
within ±10 %, the median signed error, the per-component error (weights, activation
peak, non-torch, KV GiB, where the log breaks them out), over-promises, and whether
failed starts come out refused or flagged as a start at risk.

Targets (issue 30, strict): on the held-out rows of V1-era releases (families v1-early,
v1, v1-graph-reserve) ≥ 90% within ±10% of vLLM's KV figure; no plan that promises a start
vLLM refused (every failed start refused or flagged start-at-risk); the median signed KV
error of the newest release family's held-out rows within ±2%; weights within ±5%; no
over-promise on V1-era releases (KV more than 10% and 1 GiB above what vLLM allocated);
no run that started planned as refused. The looser "±10% or 1 GiB per GPU" share of issue 16 is
still reported (`withinTargetOr1GiB`), but no target rests on it.

`targetResults` scores every row. Rows whose `environment` column names a documented
environment class (`wsl2-shared-gpu`: a GPU that also drives a Windows desktop, or is
shared with another server, where vLLM charges other processes' allocations to its own
non-torch memory) are scored with the rest there, and the same targets are scored a
second time without them (`dedicatedGpuTargetResults`), as a planner for dedicated
cluster GPUs sees them (docs/benchmarks/planner-accuracy.md says why).

Usage: hack/bench/planner_accuracy.py [--data CSV] [--archs CSV] [--summary]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import Catalogs, default_catalogs
from inferfleet.planner import plan
from inferfleet.planner.releases import FAMILIES, engine_defaults, resolve_release

KV_TOLERANCE_REL = 0.10
KV_TOLERANCE_GIB = 1.0
WEIGHTS_TOLERANCE_REL = 0.05
KV_SHARE_TARGET = 0.90
NEWEST_FAMILY_MEDIAN_TARGET = 0.02
V1_ERA = ("v1-early", "v1", "v1-graph-reserve")
DATA_DIR = Path(__file__).resolve().parent / "data"


def _number(value: str | None) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def load_archs(path: Path) -> dict[str, tuple[dict[str, Any], float]]:
    return {
        row["model"]: (json.loads(row["config_json"]), float(row["parameters_billion"]))
        for row in load_rows(path)
    }


def row_spec(
    row: dict[str, str], catalogs: Catalogs, archs: dict[str, tuple[dict[str, Any], float]]
) -> InferenceServiceSpec:
    """The InferenceService a user would write for this run."""
    image = f"vllm/vllm-openai:v{row['vllm_version']}"
    gpu = catalogs.gpu(row["gpu"])
    memory_gib = gpu.memory_gib if gpu is not None else float(row["gpu_mem_gib"])
    gpu_field: Any = gpu.name if gpu is not None else {"name": row["gpu"], "memoryGiB": memory_gib}
    mml = int(row["max_model_len"])
    tp, pp = int(row["tp"]), int(row["pp"])
    defaults = engine_defaults(
        resolve_release(image, None),
        gpu_name=row["gpu"],
        gpu_memory_gib=memory_gib,
        max_model_len=mml,
        entry_point="llm_class" if row["entry_point"] == "llm_class" else "api_server",
        pipeline_parallel=pp,
    )
    seqs = int(row["max_num_seqs"]) if row["max_num_seqs"] else defaults.max_num_seqs
    batched = (
        int(row["max_num_batched_tokens"])
        if row["max_num_batched_tokens"]
        else defaults.max_num_batched_tokens
    )
    kv = row["kv_cache_dtype"].strip() or "auto"
    overrides: dict[str, Any] = {
        "tensorParallelSize": tp,
        "pipelineParallelSize": pp,
        "dtype": row["dtype"],
        "quantization": row["quantization"].strip() or "none",
        "kvCacheDtype": "fp8" if kv.startswith("fp8") else kv,
        "gpuMemoryUtilization": float(row["gpu_memory_utilization"]),
        "maxModelLen": mml,
        "blockSize": int(row["block_size"] or 16),
        "maxNumSeqs": seqs,
        "maxNumBatchedTokens": batched,
        "enforceEager": row["enforce_eager"].strip().lower() == "true",
    }
    model: dict[str, Any] = {"name": row["model"]}
    if catalogs.model(row["model"]) is None:
        config, params = archs[row["model"]]
        model.update(config=config, parametersBillion=params)
    return InferenceServiceSpec.model_validate(
        {
            "model": model,
            "workload": {
                "inputTokens": {"p50": mml // 4, "p95": mml // 2, "p99": mml // 2},
                "outputTokens": {"p50": 64, "p95": 128, "p99": 128},
                "peakRequestsPerSecond": 1,
            },
            "serving": {
                "image": image,
                "chunkedPrefill": defaults.chunked_prefill,
                "extraArgs": (row.get("extra_args") or "").split() or None,
            },
            "tiers": [
                {"name": "row", "gpu": gpu_field, "gpusPerNode": max(8, tp * pp), "overrides": overrides}
            ],
        }
    )


def _kv_result(row: dict[str, str], tier: Any) -> dict[str, Any] | None:
    actual_tokens = _number(row["kv_cache_tokens"])
    actual_gib = _number(row["kv_cache_gib"])
    predicted_gib = tier.memory_gi_b.kv_cache
    if actual_tokens:
        gib_per_token = predicted_gib / tier.kv_cache_tokens if tier.kv_cache_tokens else 0.0
        if not gib_per_token and actual_gib:
            gib_per_token = actual_gib / actual_tokens
        error = (tier.kv_cache_tokens - actual_tokens) / actual_tokens
        gib_error = (tier.kv_cache_tokens - actual_tokens) * gib_per_token
        metric, actual, predicted = "kvCacheTokens", actual_tokens, float(tier.kv_cache_tokens)
    elif actual_gib is not None and actual_gib > 0:
        error = (predicted_gib - actual_gib) / actual_gib
        gib_error = predicted_gib - actual_gib
        metric, actual, predicted = "memoryGiB.kvCache", actual_gib, predicted_gib
    else:
        return None
    return {
        "metric": metric,
        "actual": actual,
        "predicted": predicted,
        "relError": round(error, 4),
        "perGpuGiBError": round(gib_error, 3),
        "withinTarget": abs(error) <= KV_TOLERANCE_REL,
        "withinTargetOr1GiB": abs(error) <= KV_TOLERANCE_REL or abs(gib_error) <= KV_TOLERANCE_GIB,
        "overPromise": error > KV_TOLERANCE_REL and gib_error > KV_TOLERANCE_GIB,
    }


def evaluate_row(row: dict[str, str], catalogs: Catalogs, archs: dict[str, Any]) -> dict[str, Any]:
    spec = row_spec(row, catalogs, archs)
    tier = plan(spec, catalogs, "row", default_image=None).tiers[0]
    failed = row["start_failed"].strip().lower() == "true"
    result: dict[str, Any] = {
        "source": row["source_url"],
        "split": row["split"],
        "environment": (row.get("environment") or "").strip(),
        "model": row["model"],
        "gpu": row["gpu"],
        "tp": int(row["tp"]),
        "pp": int(row["pp"]),
        "vllmVersion": row["vllm_version"],
        "releaseFamily": tier.release_family,
        "feasible": tier.feasible,
        "predicted": {
            "kvCacheTokens": tier.kv_cache_tokens,
            "kvCacheGiB": tier.memory_gi_b.kv_cache,
            "weightsGiB": tier.memory_gi_b.weights,
            "activationsGiB": tier.memory_gi_b.activations,
            "overheadGiB": tier.memory_gi_b.overhead,
            "cudaGraphsGiB": tier.memory_gi_b.cuda_graphs,
        },
    }
    at_risk = [w for w in tier.warnings if w.startswith("start at risk")]
    if failed:
        # Caught: refused, or flagged as a start at risk (SloAtRisk) with the number.
        result["failedStart"] = {
            "ok": not tier.feasible or bool(at_risk),
            "how": "refused" if not tier.feasible else "flagged" if at_risk else "promised",
            "reason": tier.reasons[0] if not tier.feasible else (at_risk[0] if at_risk else ""),
        }
    else:
        # A run that started but is planned as refused costs the user a tier that works.
        result["started"] = {"ok": tier.feasible, "reason": "" if tier.feasible else tier.reasons[0]}
        kv = _kv_result(row, tier)
        if kv is not None:
            result["kv"] = kv
    components = {}
    for name, column, predicted in (
        ("weights", "weights_gib", tier.memory_gi_b.weights),
        ("activation", "activation_peak_gib", tier.memory_gi_b.activations),
        ("nonTorch", "non_torch_gib", tier.memory_gi_b.overhead),
        ("kv", "kv_cache_gib", tier.memory_gi_b.kv_cache),
    ):
        actual = _number(row[column])
        if actual is not None and actual > 0 and not failed:
            components[name] = {
                "actualGiB": actual,
                "predictedGiB": predicted,
                "relError": round((predicted - actual) / actual, 4),
            }
    if components:
        result["components"] = components
    actual_weights = _number(row["weights_gib"])
    if actual_weights:
        error = (tier.memory_gi_b.weights - actual_weights) / actual_weights
        result["weights"] = {
            "actual": actual_weights,
            "predicted": tier.memory_gi_b.weights,
            "relError": round(error, 4),
            "withinTarget": abs(error) <= WEIGHTS_TOLERANCE_REL,
        }
    return result


def _summary(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    results = list(results)
    kv = [r["kv"] for r in results if "kv" in r]
    weights = [r["weights"] for r in results if "weights" in r]
    failed = [r["failedStart"] for r in results if "failedStart" in r]
    started = [r["started"] for r in results if "started" in r]
    v1_over = [r for r in results if "kv" in r and r["kv"]["overPromise"] and r["releaseFamily"] in V1_ERA]
    v1_failed_feasible = [
        r
        for r in results
        if "failedStart" in r and not r["failedStart"]["ok"] and r["releaseFamily"] in V1_ERA
    ]
    within = sum(1 for r in kv if r["withinTarget"])
    within_loose = sum(1 for r in kv if r["withinTargetOr1GiB"])
    per_component: dict[str, Any] = {}
    for name in ("weights", "activation", "nonTorch", "kv"):
        errors = [r["components"][name]["relError"] for r in results if name in r.get("components", {})]
        if errors:
            per_component[name] = {
                "rows": len(errors),
                "meanAbsRelError": round(statistics.fmean(abs(e) for e in errors), 4),
                "medianRelError": round(statistics.median(errors), 4),
            }
    return {
        "rows": len(results),
        "kv": {
            "rows": len(kv),
            "withinTarget": within,
            "share": round(within / len(kv), 4) if kv else None,
            "withinTargetOr1GiB": within_loose,
            "shareOr1GiB": round(within_loose / len(kv), 4) if kv else None,
            "medianRelError": round(statistics.median(r["relError"] for r in kv), 4) if kv else None,
            "medianAbsRelError": round(statistics.median(abs(r["relError"]) for r in kv), 4) if kv else None,
            "maxAbsRelError": round(max(abs(r["relError"]) for r in kv), 4) if kv else None,
            "overPromises": sum(1 for r in kv if r["overPromise"]),
        },
        "weights": {
            "rows": len(weights),
            "withinTarget": sum(1 for r in weights if r["withinTarget"]),
            "maxAbsRelError": round(max(abs(r["relError"]) for r in weights), 4) if weights else None,
        },
        "failedStart": {
            "rows": len(failed),
            "infeasible": sum(1 for r in failed if r["how"] == "refused"),
            "caught": sum(1 for r in failed if r["ok"]),
            "promised": sum(1 for r in failed if not r["ok"]),
        },
        "started": {
            "rows": len(started),
            "refused": sum(1 for r in started if not r["ok"]),
        },
        "perComponent": per_component,
        "v1OverPromises": len(v1_over) + len(v1_failed_feasible),
    }


TARGETS = {
    "holdoutV1EraKvShare": f">= {KV_SHARE_TARGET} of held-out V1-era rows within ±{KV_TOLERANCE_REL:.0%}",
    "promisedRefusedStarts": "0: every failed start refused or flagged start-at-risk",
    "newestFamilyMedian": (
        "median signed KV error of the newest family's held-out rows within "
        f"±{NEWEST_FAMILY_MEDIAN_TARGET:.0%}"
    ),
    "weights": f"every row within ±{WEIGHTS_TOLERANCE_REL:.0%}",
    "v1OverPromises": 0,
    "startedRefused": 0,
}


def _target_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 30's targets, scored on `results`."""
    overall = _summary(results)
    held_out = [r for r in results if r["split"] == "holdout"]
    v1_era_holdout = _summary(r for r in held_out if r["releaseFamily"] in V1_ERA)
    with_kv = [f for f in FAMILIES if any(r["releaseFamily"] == f and "kv" in r for r in results)]
    newest = with_kv[-1] if with_kv else None
    newest_holdout = _summary(r for r in held_out if r["releaseFamily"] == newest)["kv"]
    newest_median = newest_holdout.get("medianRelError")
    return {
        "holdoutV1EraKvShare": {
            "value": v1_era_holdout["kv"]["share"],
            "rows": v1_era_holdout["kv"]["rows"],
            "met": (v1_era_holdout["kv"]["share"] or 0.0) >= KV_SHARE_TARGET,
        },
        "promisedRefusedStarts": {
            "value": overall["failedStart"]["promised"],
            "met": overall["failedStart"]["promised"] == 0,
        },
        "newestFamilyMedian": {
            "family": newest,
            "value": newest_median,
            "rows": newest_holdout.get("rows", 0),
            "met": newest_median is not None and abs(newest_median) <= NEWEST_FAMILY_MEDIAN_TARGET,
        },
        "weights": {
            "value": overall["weights"]["maxAbsRelError"],
            "met": overall["weights"]["withinTarget"] == overall["weights"]["rows"],
        },
        "v1OverPromises": {"value": overall["v1OverPromises"], "met": overall["v1OverPromises"] == 0},
        "startedRefused": {"value": overall["started"]["refused"], "met": overall["started"]["refused"] == 0},
    }


def evaluate(data: Path, archs_path: Path) -> dict[str, Any]:
    catalogs = default_catalogs()
    archs = load_archs(archs_path)
    results = [evaluate_row(row, catalogs, archs) for row in load_rows(data)]
    by_split = {
        split: _summary(r for r in results if r["split"] == split) for split in ("calibration", "holdout")
    }
    families = sorted({r["releaseFamily"] for r in results})
    by_family = {family: _summary(r for r in results if r["releaseFamily"] == family) for family in families}
    held_out = [r for r in results if r["split"] == "holdout"]
    held_out_by_family = {
        family: _summary(r for r in held_out if r["releaseFamily"] == family)
        for family in families
        if any(r["releaseFamily"] == family for r in held_out)
    }
    environments = sorted({r["environment"] for r in results if r["environment"]})
    dedicated = [r for r in results if not r["environment"]]
    results_by_target = _target_results(results)
    dedicated_results = _target_results(dedicated)
    return {
        "benchmark": "planner_accuracy",
        "data": str(data),
        "aggregate": {
            "overall": _summary(results),
            "bySplit": by_split,
            "byReleaseFamily": by_family,
            "heldOutByReleaseFamily": held_out_by_family,
            "heldOutV1Era": _summary(r for r in held_out if r["releaseFamily"] in V1_ERA),
            "byEnvironment": {
                "dedicated": _summary(dedicated),
                **{env: _summary(r for r in results if r["environment"] == env) for env in environments},
            },
            "targets": TARGETS,
            "targetResults": results_by_target,
            "targetsMet": all(t["met"] for t in results_by_target.values()),
            "dedicatedGpuTargetResults": dedicated_results,
            "dedicatedGpuTargetsMet": all(t["met"] for t in dedicated_results.values()),
        },
        "rows": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR / "vllm_startup_logs.csv")
    parser.add_argument("--archs", type=Path, default=DATA_DIR / "model_arch.csv")
    parser.add_argument("--summary", action="store_true", help="print only the aggregate")
    args = parser.parse_args()
    report = evaluate(args.data, args.archs)
    if args.summary:
        report = {"benchmark": report["benchmark"], "aggregate": report["aggregate"]}
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
