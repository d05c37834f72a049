#!/usr/bin/env python3
"""Planner speed: one 4-tier spec (median of many runs) and 1,000 varied specs.

Targets (issue 3): a 4-tier spec plans in ≤ 5 ms median; 1,000 specs in ≤ 5 s.
Prints JSON. Usage: hack/bench/planner_speed.py [--repeats N] [--specs N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog import default_catalogs
from inferfleet.planner import plan

FOUR_TIER_TARGET_MS = 5.0
THOUSAND_TARGET_S = 5.0

GPUS = ["H100-SXM-80GB", "A100-SXM-80GB", "L40S", "L4", "H200-SXM-141GB", "MI300X", "A10G", "B200"]
MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-3.1-405B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "google/gemma-3-27b-it",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-120b",
    "microsoft/phi-4",
]
ARCHETYPES = ["chat", "code", "rag", "agentic", "batch"]


def four_tier_spec() -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate(
        {
            "model": {"name": "meta-llama/Llama-3.3-70B-Instruct"},
            "workload": {
                "inputTokens": {"p50": 1000, "p95": 4000, "p99": 8000},
                "outputTokens": {"p50": 250, "p95": 800, "p99": 1500},
                "peakRequestsPerSecond": 20,
            },
            "tiers": [
                {"name": "h100", "gpu": "H100-SXM-80GB", "costPerGpuHour": 2.5},
                {"name": "h200", "gpu": "H200-SXM-141GB", "costPerGpuHour": 3.5},
                {"name": "a100", "gpu": "A100-SXM-80GB", "costPerGpuHour": 1.6},
                {"name": "l40s", "gpu": "L40S", "gpusPerNode": 8, "costPerGpuHour": 1.1},
            ],
        }
    )


def random_spec(rng: random.Random) -> InferenceServiceSpec:
    p50_in = rng.choice([200, 500, 1000, 2000, 4000])
    p50_out = rng.choice([100, 200, 400, 800])
    tiers: list[dict[str, Any]] = []
    for index, gpu in enumerate(rng.sample(GPUS, rng.randint(1, 4))):
        tiers.append({"name": f"t{index}", "gpu": gpu, "costPerGpuHour": round(rng.uniform(0.3, 4.0), 2)})
    return InferenceServiceSpec.model_validate(
        {
            "model": {"name": rng.choice(MODELS)},
            "workload": {
                "archetype": rng.choice(ARCHETYPES),
                "inputTokens": {"p50": p50_in, "p95": p50_in * 3, "p99": p50_in * 6},
                "outputTokens": {"p50": p50_out, "p95": p50_out * 3, "p99": p50_out * 5},
                "peakRequestsPerSecond": round(rng.uniform(0.5, 200), 1),
            },
            "quantization": rng.choice(["auto", "auto", "none", "fp8"]),
            "tiers": tiers,
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--specs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    catalogs = default_catalogs()
    spec = four_tier_spec()
    plan(spec, catalogs, "warm-up")
    samples_ms: list[float] = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plan(spec, catalogs, "four-tier")
        samples_ms.append((time.perf_counter() - start) * 1000)
    rng = random.Random(args.seed)
    specs = [random_spec(rng) for _ in range(args.specs)]
    start = time.perf_counter()
    tiers = infeasible = 0
    for index, each in enumerate(specs):
        result = plan(each, catalogs, f"s{index}")
        tiers += len(result.tiers)
        infeasible += sum(1 for tier in result.tiers if not tier.feasible)
    batch_s = time.perf_counter() - start
    median_ms = statistics.median(samples_ms)
    report = {
        "benchmark": "planner_speed",
        "fourTierSpec": {
            "runs": args.repeats,
            "medianMs": round(median_ms, 3),
            "p95Ms": round(sorted(samples_ms)[int(0.95 * (len(samples_ms) - 1))], 3),
            "targetMs": FOUR_TIER_TARGET_MS,
            "met": median_ms <= FOUR_TIER_TARGET_MS,
        },
        "manySpecs": {
            "specs": len(specs),
            "tiers": tiers,
            "infeasibleTiers": infeasible,
            "totalS": round(batch_s, 3),
            "targetS": THOUSAND_TARGET_S,
            "met": batch_s <= THOUSAND_TARGET_S,
        },
    }
    report["targetsMet"] = report["fourTierSpec"]["met"] and report["manySpecs"]["met"]
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
