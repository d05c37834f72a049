"""What a simulation reports: the JSON contract of `inferfleet simulate -o json`.

Keys `policy, requests, sloAttainment, ttftP50Ms, ttftP99Ms, gpuHours, costUsd,
scaleUps, scaleDowns` are the stable contract (other tools read them;
docs/concepts/autoscaling.md); the others are extra detail and may grow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from inferfleet.autoscaling.simulate.engine import SimResult


def _ms(value: float) -> float | None:
    return None if not math.isfinite(value) else round(value * 1000.0, 1)


def _percentiles(ttft_s: np.ndarray, quantiles: list[float]) -> list[float]:
    """Percentiles of TTFTs where a never-served request is infinite (no NaN warnings:
    infinities are ranked above every real value and come back infinite)."""
    finite = np.isfinite(ttft_s)
    if finite.all():
        return [float(v) for v in np.percentile(ttft_s, quantiles)]
    high = float(ttft_s[finite].max()) * 2.0 + 1.0 if finite.any() else 1.0
    values = np.percentile(np.where(finite, ttft_s, high), quantiles)
    return [math.inf if v >= high else float(v) for v in values]


def _within_both(result: SimResult, within_ttft: np.ndarray, mask: np.ndarray | None = None) -> int:
    """Requests within the TTFT SLO whose decode steps also met the ITL SLO."""
    if result.itl_late is None:
        return int(np.count_nonzero(within_ttft))
    late = result.itl_late if mask is None else result.itl_late[mask]
    return int(np.count_nonzero(within_ttft & ~late))


def window(result: SimResult, arrival_s: np.ndarray, start_s: float, end_s: float) -> dict[str, Any]:
    """SLO attainment of the requests arriving in [start_s, end_s) and the GPU-hours paid
    in it: a held-out part of one run."""
    mask = (arrival_s >= start_s) & (arrival_s < end_s)
    ttft = result.ttft_s[mask]
    requests = int(ttft.shape[0])
    within_ttft = ttft <= result.ttft_slo_ms / 1000.0
    within = int(np.count_nonzero(within_ttft))
    within_both = _within_both(result, within_ttft, mask)
    gpu_s = sum(
        max(0.0, min(stop, end_s) - max(start, start_s)) * gpus
        for _, start, stop, gpus in result.replica_spans
    )
    return {
        "startS": start_s,
        "endS": end_s,
        "requests": requests,
        "sloAttainment": round(within / requests, 6) if requests else 1.0,
        "sloViolations": requests - within,
        "sloAttainmentWithItl": round(within_both / requests, 6) if requests else 1.0,
        "sloViolationsWithItl": requests - within_both,
        "gpuHours": round(gpu_s / 3600.0, 3),
    }


def summarize(result: SimResult) -> dict[str, Any]:
    ttft = result.ttft_s
    slo_s = result.ttft_slo_ms / 1000.0
    requests = result.requests
    within_ttft = ttft <= slo_s
    within = int(np.count_nonzero(within_ttft)) if requests else 0
    within_both = _within_both(result, within_ttft) if requests else 0
    p50, p99 = _percentiles(ttft, [50, 99]) if requests else (0.0, 0.0)
    span_h = result.span_s / 3600.0 if result.span_s > 0 else 0.0
    return {
        "policy": result.policy,
        "trace": result.trace,
        "requests": requests,
        "sloAttainment": round(within / requests, 6) if requests else 1.0,
        "sloViolations": requests - within,
        "ttftP50Ms": _ms(p50),
        "ttftP99Ms": _ms(p99),
        "gpuHours": round(result.gpu_hours, 3),
        "costUsd": round(result.cost_usd, 2),
        "scaleUps": result.scale_ups,
        "scaleDowns": result.scale_downs,
        "itlAttainment": round(result.itl_ok / requests, 6) if requests else 1.0,
        # Within both SLOs the spec declares: TTFT, and decode steps within the ITL SLO.
        "sloAttainmentWithItl": round(within_both / requests, 6) if requests else 1.0,
        "sloViolationsWithItl": requests - within_both,
        "unserved": requests - result.served,
        # Prompts at or beyond max-model-len: vLLM's 400, or the front door's length
        # filter when no tier of the pool can take them. Failures, counted in unserved.
        "rejected": result.rejected,
        # The front door: requests held while no pod could take them, those whose hold
        # ran out (failures), and without one, requests refused for want of a Ready pod.
        "heldRequests": result.held,
        "heldExpired": result.held_expired,
        # Refused at once by a picker whose queue was at its limit (429; 503 with no pod).
        "shed": result.shed,
        "unroutable": result.unroutable,
        "ttftSloMs": result.ttft_slo_ms,
        "spanHours": round(span_h, 3),
        "meanReplicas": {
            name: round(hours / span_h, 2) if span_h else 0.0 for name, hours in result.replica_hours.items()
        },
        "peakReplicas": dict(result.peak_replicas),
        "ticks": result.ticks,
        "wallSeconds": None if result.wall_s is None else round(result.wall_s, 2),
        **({"prefixCache": prefix_cache_figures(result)} if result.prefix_reuse else {}),
    }


def prefix_cache_figures(result: SimResult) -> dict[str, dict[str, Any]]:
    """Per tier, the prompt tokens its replayed caches held (simulate.prefix_cache): the
    share found in GPU memory, in the host tier, and the host hits' reload time."""
    figures: dict[str, dict[str, Any]] = {}
    for name, reuse in result.prefix_reuse.items():
        prompt = max(1, reuse.prompt_tokens)
        reloads = reuse.reload_s[reuse.reload_s > 0]
        figures[name] = {
            "promptTokens": reuse.prompt_tokens,
            "gpuHitTokens": reuse.gpu_hit_tokens,
            "hostHitTokens": reuse.host_hit_tokens,
            "gpuHitShare": round(reuse.gpu_hit_tokens / prompt, 4),
            "hostHitShare": round(reuse.host_hit_tokens / prompt, 4),
            "prefilledShare": round(1.0 - (reuse.gpu_hit_tokens + reuse.host_hit_tokens) / prompt, 4),
            "hostHitRequests": int(reloads.shape[0]),
            "reloadP99Ms": _ms(float(np.percentile(reloads, 99))) if reloads.size else None,
        }
    return figures


TABLE_COLUMNS = (
    ("policy", "POLICY"),
    ("requests", "REQUESTS"),
    ("sloAttainment", "WITHIN SLO"),
    ("ttftP50Ms", "TTFT P50 MS"),
    ("ttftP99Ms", "TTFT P99 MS"),
    ("gpuHours", "GPU-HOURS"),
    ("costUsd", "COST USD"),
    ("scaleUps", "UPS"),
    ("scaleDowns", "DOWNS"),
)


# `simulate --compare-disaggregated`: the split's case is the ITL, so both SLOs are shown.
COMPARE_COLUMNS = (
    *TABLE_COLUMNS[:3],
    ("sloAttainmentWithItl", "WITHIN BOTH SLOS"),
    *TABLE_COLUMNS[3:],
)
# `simulate --compare-host-kv-cache`: the tier's case is prefill saved, so the share of
# prompt tokens prefilled and the host hits are shown.
HOST_KV_COLUMNS = (
    *COMPARE_COLUMNS[:4],
    ("prefilledShare", "PREFILLED"),
    ("hostHitShare", "FROM HOST TIER"),
    *TABLE_COLUMNS[3:7],
)
_PERCENT_KEYS = ("sloAttainment", "sloAttainmentWithItl", "prefilledShare", "hostHitShare")


def table_rows(
    summaries: list[dict[str, Any]], columns: tuple[tuple[str, str], ...] = TABLE_COLUMNS
) -> list[list[str]]:
    rows = []
    for summary in summaries:
        row = []
        for key, _ in columns:
            value = summary.get(key)
            if key in _PERCENT_KEYS and isinstance(value, float):
                row.append(f"{value:.2%}")
            else:
                row.append("-" if value is None else str(value))
        rows.append(row)
    return rows
