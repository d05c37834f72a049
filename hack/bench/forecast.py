#!/usr/bin/env python3
"""Forecaster comparison: each method on each trace, at the lead times that matter.

For every minute of a trace (after the first half hour) the forecaster sees the
per-minute request rate so far and predicts the rate `h` minutes ahead; the truth is
the rate of that minute. Reported per (trace, method, horizon):

- `wape`: sum |forecast - actual| / sum actual (lower is better);
- `underRate`: share of minutes where actual > forecast x 1.2, i.e. where even 20 %
  headroom would not have covered the demand (each one risks SLO violations);
- `provisionRatio`: mean forecast / mean actual (what the forecast would cost).

Traces: the Azure hour-long traces as published; the ServeGen 14-day rate series
both as its exact 10-minute rates and as Poisson counts at ~20 req/s mean (what a
live loop sees). Prints one JSON document; docs/benchmarks/forecast.md quotes its numbers.

    python hack/bench/forecast.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from inferfleet.autoscaling.policy.forecast import ForecastConfig, Method, forecast
from inferfleet.autoscaling.policy.window import SequenceWindow
from inferfleet.autoscaling.tracefiles.read import load_trace, read_rate_series

# The published traces, one folder each as their publishers ship them (azure-llm-2023/,
# servegen-language-m-small/), under INFERFLEET_TRACE_DIR (docs/benchmarks/index.md).
TRACES = Path(os.environ.get("INFERFLEET_TRACE_DIR") or "traces")
METHODS: tuple[Method, ...] = ("naive", "trend", "seasonal", "hybrid")
HORIZONS_MIN = (3, 5, 10)
WARMUP_MIN = 30


def series() -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for path in sorted((TRACES / "azure-llm-2023").glob("*.csv")):
        out[path.stem] = load_trace(path).per_minute_rps().tolist()
    rates = read_rate_series(TRACES / "servegen-language-m-small" / "language_m-small_aggregate_rate.csv")
    per_minute = np.repeat(rates.rate_rps, (rates.window_s // 60).astype(int))
    out["servegen-exact"] = per_minute.tolist()
    scale = 20.0 / float(per_minute.mean())
    rng = np.random.default_rng(0)
    out["servegen-poisson-20rps"] = (rng.poisson(per_minute * scale * 60.0) / 60.0).tolist()
    return out


def evaluate(values: list[float], method: Method, horizon: int) -> dict[str, Any]:
    config = ForecastConfig(method=method)
    predicted: list[float] = []
    actual: list[float] = []
    for now in range(WARMUP_MIN, len(values) - horizon):
        result = forecast(SequenceWindow.head(values, now), float(horizon), config)
        if result.rate_rps is None:
            continue
        predicted.append(result.rate_rps)
        actual.append(values[now - 1 + horizon])
    p = np.asarray(predicted)
    a = np.asarray(actual)
    return {
        "method": method,
        "horizonMin": horizon,
        "points": int(p.size),
        "wape": round(float(np.abs(p - a).sum() / max(a.sum(), 1e-9)), 4),
        "underRate": round(float(np.mean(a > p * 1.2)), 4),
        "provisionRatio": round(float(p.mean() / max(a.mean(), 1e-9)), 4),
    }


def main() -> int:
    started = time.perf_counter()
    results = []
    for name, values in series().items():
        for horizon in HORIZONS_MIN:
            for method in METHODS:
                row = evaluate(values, method, horizon)
                row["trace"] = name
                results.append(row)
                print(f"{name} h={horizon} {method}: {row}", file=sys.stderr)
    json.dump(
        {"benchmark": "forecast", "wallSeconds": round(time.perf_counter() - started, 1), "results": results},
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
