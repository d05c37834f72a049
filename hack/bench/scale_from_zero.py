#!/usr/bin/env python3
"""Scale from zero through the front door, on bursts of a real trace separated by idle.

Three five-minute slices of Azure's code trace (minutes 0-5, 20-25, 40-45, arrivals and
token counts as published, `--rate-scale` thinning them) are replayed with `--idle-h`
hours of silence before each, through the 8B example (which names a Gateway) with both
tiers allowed to stand at zero. With its front door, the endpoint picker holds what arrives
while no pod is Ready and decide() wakes a tier on that queue; behind plain Services the
same requests find no endpoint. Two front-door runs: `gateway` (a first start: no node has
shown the tiers' compile caches) and `gateway-warm` (every eligible node has: the plan the
autoscaler reads from status then says the warm-cache start, and the hold follows it).
Both replay the plan as the autoscaler reads it from status (design on the deployed,
reported plan), so the replayed pods start in the figure the hold and the lead time count
on. Prints one JSON document: per run the cold start and hold, the first request's time to
first token after each idle; held, expired, shed (refused by a picker whose queue was
full), refused (no endpoint) and served counts.

    python hack/bench/scale_from_zero.py [--rate-scale 0.2] [--idle-h 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from inferfleet.api import InferenceService, labels, load_all
from inferfleet.api.frontdoor_spec import FrontDoorSpec
from inferfleet.autoscaling.policy import POLICIES
from inferfleet.autoscaling.simulate.engine import simulate
from inferfleet.autoscaling.simulate.setup import build_config
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.autoscaling.tracefiles.read import load_trace
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache import workloads as objects
from inferfleet.config import OperatorSettings
from inferfleet.design import Design, Observations, design

REPO = Path(__file__).resolve().parents[2]
# Azure's code hour as published, bundled with the package.
TRACE = REPO / "operator" / "inferfleet" / "autoscaling" / "simulate" / "data"
EXAMPLE = REPO / "manifests" / "examples" / "llama-8b-chat.yaml"
SLICES_S = ((0.0, 300.0), (1200.0, 1500.0), (2400.0, 2700.0))


def bursty(source: Trace, idle_s: float) -> tuple[Trace, list[float]]:
    """The slices of `source`, each after `idle_s` of silence; and where each starts."""
    arrivals, inputs, outputs, starts = [], [], [], []
    offset = 0.0
    for start, stop in SLICES_S:
        offset += idle_s
        keep = (source.arrival_s >= start) & (source.arrival_s < stop)
        starts.append(offset + float(source.arrival_s[keep][0] - start))
        arrivals.append(source.arrival_s[keep] - start + offset)
        inputs.append(source.input_tokens[keep])
        outputs.append(source.output_tokens[keep])
        offset += stop - start
    trace = Trace(
        "azure-code-bursts",
        source.format,
        np.concatenate(arrivals),
        np.concatenate(inputs),
        np.concatenate(outputs),
        offset + idle_s,
        source.epoch_s,
    )
    return trace, starts


def warm_everywhere(service: InferenceService, settings: OperatorSettings) -> Observations:
    """What the cluster shows once every eligible node of every tier holds the tier's
    compile cache: each node's pre-cache pod Ready, then a serving pod there that restored
    the tier's key (one node per tier)."""
    designed = design(service, settings)
    plan, images = designed.plan, designed.tier_images
    assert plan is not None
    since, later = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"
    revision = objects.revision_label(service)
    cache_pods, serving = [], []
    for tier in plan.feasible_tiers:
        ref = objects.compile_cache_ref(service, tier, images.get(tier.name))
        if ref is None:
            continue
        node = f"{tier.name}-node"
        cache_pods.append(
            {
                "metadata": {
                    "labels": {labels.LABEL_TIER: tier.name, objects.LABEL_CACHE_REVISION: revision},
                    "creationTimestamp": since,
                },
                "spec": {"nodeName": node},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}]},
            }
        )
        restored = compile_cache.encode_restore(compile_cache.Restore(True, ref.key, "rev", 1))
        serving.append(
            {
                "metadata": {"labels": {labels.LABEL_TIER: tier.name}},
                "spec": {"nodeName": node},
                "status": {
                    "initContainerStatuses": [
                        {
                            "name": compile_cache.VERIFY_CONTAINER,
                            "state": {"terminated": {"startedAt": later}},
                        },
                        {
                            "name": compile_cache.RESTORE_CONTAINER,
                            "state": {"terminated": {"exitCode": 0, "message": restored}},
                        },
                    ]
                },
            }
        )
    eligible = {tier.name: 1 for tier in plan.feasible_tiers}
    return Observations(cache_pods=cache_pods, serving_pods=serving, eligible_nodes=eligible)


def as_autoscaler_reads_it(
    service: InferenceService, settings: OperatorSettings, seen: Observations
) -> Design:
    """The design the autoscaler runs: on the plan status reports (measurements and the
    compile caches' state folded in), as `inferfleet simulate` does with a deployed plan."""
    reported = design(service, settings, seen).reported_plan
    return design(service, settings, Observations(deployed_plan=reported))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate-scale", type=float, default=0.2)
    parser.add_argument("--idle-h", type=float, default=2.0)
    parser.add_argument("--trace", type=Path, default=TRACE / "azure-llm-2023-code.csv")
    args = parser.parse_args(argv)
    service = load_all(EXAMPLE.read_text(encoding="utf-8"))[0]
    tiers = [tier.model_copy(update={"min_replicas": 0}) for tier in service.spec.tiers]
    spec = service.spec.model_copy(update={"tiers": tiers})
    service = service.model_copy(update={"spec": spec})
    source = load_trace(args.trace, rate_scale=args.rate_scale)
    trace, starts = bursty(source, args.idle_h * 3600.0)
    out: dict[str, Any] = {
        "trace": f"{args.trace.name} minutes 0-5, 20-25, 40-45",
        "rateScale": args.rate_scale,
        "idleHours": args.idle_h,
        "requests": len(trace),
        "runs": {},
    }
    plain = spec.model_copy(update={"front_door": FrontDoorSpec(mode="service")})
    settings = OperatorSettings()
    runs = (("gateway", spec, False), ("gateway-warm", spec, True), ("services", plain, False))
    for label, run_spec, warm in runs:
        run_service = service.model_copy(update={"spec": run_spec})
        seen = warm_everywhere(run_service, settings) if warm else Observations()
        designed = as_autoscaler_reads_it(run_service, settings, seen)
        config = build_config(designed, timeline=False)
        result = simulate(trace, config, POLICIES["inferfleet"], "inferfleet")
        first = np.searchsorted(trace.arrival_s, starts)
        cold = {tier.figures.name: tier.figures.cold_start_s for tier in config.tiers}
        holds = [pool.hold_s for pool in config.front_door.pools] if config.front_door else []
        ttft = result.ttft_s
        out["runs"][label] = {
            "coldStartCase": "warm compile cache on every node" if warm else "first start",
            "coldStartS": cold,
            "holdS": holds,
            "coldStartMarginS": config.policy.cold_start_margin_s,
            "firstAfterIdleTtftS": [
                None if not np.isfinite(ttft[i]) else round(float(ttft[i]), 1) for i in first
            ],
            "held": result.held,
            "heldExpired": result.held_expired,
            "shed": result.shed,
            "unroutable": result.unroutable,
            "rejected": result.rejected,
            "served": result.served,
            "withinSlo": round(float(np.count_nonzero(ttft <= config.ttft_slo_ms / 1000.0)) / len(trace), 4),
            "gpuHours": round(result.gpu_hours, 2),
        }
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
