#!/usr/bin/env python3
"""Simulator speed: wall time to replay one million requests through `inferfleet`.

Two shapes: the Azure conversation hour scaled to 1M requests (a big fleet, many
requests per tick) and the 14-day ServeGen series scaled to 1M requests (few
requests, 80,000 autoscaler ticks). Prints one JSON document.

    python hack/bench/simspeed.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from inferfleet.api import load_all
from inferfleet.autoscaling.policy import POLICIES
from inferfleet.autoscaling.simulate.engine import simulate
from inferfleet.autoscaling.simulate.setup import build_config
from inferfleet.autoscaling.tracefiles.read import load_trace
from inferfleet.config import OperatorSettings
from inferfleet.design import design

# The published traces, one folder each as their publishers ship them (azure-llm-2023/,
# servegen-language-m-small/), under INFERFLEET_TRACE_DIR (docs/benchmarks/index.md).
TRACES = Path(os.environ.get("INFERFLEET_TRACE_DIR") or "traces")
SPEC = Path(__file__).resolve().parent / "specs" / "llama-70b-h100.yaml"
TARGET_REQUESTS = 1_000_000


def main() -> int:
    service = load_all(SPEC.read_text(encoding="utf-8"))[0]
    tiers = [tier.model_copy(update={"max_replicas": 1000}) for tier in service.spec.tiers]
    spec = service.spec.model_copy(update={"tiers": tiers})
    service = service.model_copy(update={"spec": spec})
    config = build_config(design(service, OperatorSettings()), timeline=False)
    cases = {
        "azure-conv-hour": (
            TRACES / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv",
            TARGET_REQUESTS / 19_366,
        ),
        "servegen-14-days": (
            TRACES / "servegen-language-m-small" / "language_m-small_aggregate_rate.csv",
            TARGET_REQUESTS / 1_420_000_000,
        ),
    }
    rows = []
    for name, (path, scale) in cases.items():
        load_started = time.perf_counter()
        trace = load_trace(
            path,
            rate_scale=scale,
            input_tokens=spec.workload.input_tokens,
            output_tokens=spec.workload.output_tokens,
        )
        load_s = time.perf_counter() - load_started
        result = simulate(trace, config, POLICIES["inferfleet"], "inferfleet", clock=time.perf_counter)
        rows.append(
            {
                "case": name,
                "requests": result.requests,
                "ticks": result.ticks,
                "loadSeconds": round(load_s, 2),
                "simulateSeconds": round(result.wall_s, 2),
                "requestsPerSecond": round(result.requests / result.wall_s),
                "peakReplicas": result.peak_replicas,
            }
        )
        print(f"{name}: {rows[-1]}", file=sys.stderr)
    json.dump({"benchmark": "simspeed", "cases": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
