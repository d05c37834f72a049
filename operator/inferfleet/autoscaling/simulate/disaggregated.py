"""A prefill/decode split replayed, to set beside the colocated fleet (pure).

`inferfleet simulate --compare-disaggregated` asks: does the split pay on my traffic?
The split is replayed as its two pools, each through the same engine (simulate.engine)
with the same autoscaler, each scaled from its own engines' signals:

1. the prefill pool: every request whose prompt has at least the picker's split
   threshold of tokens (design.pd_split.SPLIT_MIN_UNCACHED_TOKENS; every prompt counted
   uncached, which errs toward more prefill work) arrives at the prefill tier as a
   one-token request, so its first token is when its KV cache is ready;
2. the KV transfer: a prompt's KV bytes over the slower GPU's network (the plan's
   `transferMs` per mean prompt, scaled by the prompt's length);
3. the decode pool: each split request arrives at the decode tier when its KV has moved,
   prefilling nothing itself; every shorter request arrives as it came, prefilled where
   it decodes (the picker's decode-only path).

A request's TTFT is its prefill pool's TTFT plus the transfer plus its decode pool's
wait for a slot; a request the prefill pool never served (shed, held past its hold,
too long) is a failure; its ITL is the decode pool's. GPU-hours and cost are both
pools'. What it leaves out: the decode pool's picker falling back to a local prefill when
no prefill pod is Ready (a held or shed prefill here), and prefix-cache hits that keep a
prompt from being split.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferfleet.api.plan import DisaggregationPlan, TierPlan
from inferfleet.autoscaling.policy import PolicyFunction
from inferfleet.autoscaling.simulate.engine import (
    Clock,
    DoorPoolModel,
    FrontDoorModel,
    SimConfig,
    SimResult,
    simulate,
)
from inferfleet.autoscaling.simulate.report import summarize
from inferfleet.autoscaling.simulate.setup import SetupError, sim_tier
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.design import Design
from inferfleet.design.pd_split import SPLIT_MIN_UNCACHED_TOKENS, roles
from inferfleet.design.policy_config import mean_input_tokens, mean_output_tokens
from inferfleet.render import frontdoor


@dataclass(frozen=True)
class SplitReplay:
    """Both pools' replays and the requests' end-to-end figures, in the trace's order."""

    prefill: SimResult
    decode: SimResult
    ttft_s: np.ndarray  # per request; inf when never served
    itl_late: np.ndarray  # per request, bool
    split: np.ndarray  # per request, bool: prefilled on the prefill pool
    transfer_s: np.ndarray  # per request (0 where not split)
    split_plan: DisaggregationPlan


def _stage(
    designed: Design, tier_plan: TierPlan, mean_out: float, *, seed: int, picker_queue: bool
) -> SimConfig:
    """One pool as its own service: its tier, its policy bounds, a pool that holds. The
    picker's queue limit sheds whole requests at the front door (`picker_queue`: the
    decode pool's arrivals); a prefill reaches its pod from the decode pod's sidecar,
    past the picker's flow control, and waits in vLLM's own queue."""
    spec = designed.service.spec
    costs = {tier.name: tier.cost_per_gpu_hour for tier in spec.tiers}
    tier = sim_tier(tier_plan, costs.get(tier_plan.name), mean_input_tokens(spec), mean_out)
    policy = designed.policy
    policy = dataclasses.replace(
        policy, split=None, tiers=tuple(t for t in policy.tiers if t.name == tier_plan.name)
    )
    front = designed.front_door
    pool = front.pools[0] if front is not None and front.pools else None
    door = None
    if pool is not None:
        limit = pool.queue_limit if picker_queue else 0
        model = DoorPoolModel(
            pool.name, (0,), 1, None, float(pool.hold_s), limit, frontdoor.DETECTOR_QUEUE_DEPTH
        )
        door = FrontDoorModel((model,), frozenset({tier_plan.name}))
    return SimConfig(
        tiers=(tier,),
        policy=policy,
        ttft_slo_ms=spec.workload.slo.ttft_p99_ms,
        itl_slo_ms=spec.workload.slo.itl_p99_ms,
        seed=seed,
        timeline=False,
        front_door=door,
    )


def _prefill_trace(trace: Trace, split: np.ndarray) -> Trace:
    idx = np.flatnonzero(split)
    return dataclasses.replace(
        trace,
        name=f"{trace.name} (prefill pool)",
        arrival_s=trace.arrival_s[idx],
        input_tokens=trace.input_tokens[idx],
        output_tokens=np.ones(len(idx), dtype=np.int64),
        prefill_tokens=None,
        prefix_blocks=None if trace.prefix_blocks is None else trace.prefix_blocks.of(idx),
    )


def _decode_trace(
    trace: Trace, arrival_s: np.ndarray, prefilled_elsewhere: np.ndarray
) -> tuple[Trace, np.ndarray]:
    """The decode pool's arrivals, sorted; and each of its requests' index in `trace`."""
    keep = np.isfinite(arrival_s)
    idx = np.flatnonzero(keep)
    order = idx[np.argsort(arrival_s[idx], kind="stable")]
    arrivals = arrival_s[order]
    prefill_tokens = np.where(prefilled_elsewhere[order], 0, trace.input_tokens[order]).astype(np.int64)
    span_s = max(trace.span_s, float(arrivals[-1]) if len(arrivals) else 0.0)
    staged = dataclasses.replace(
        trace,
        name=f"{trace.name} (decode pool)",
        arrival_s=arrivals,
        input_tokens=trace.input_tokens[order],
        output_tokens=trace.output_tokens[order],
        span_s=span_s,
        prefill_tokens=prefill_tokens,
        prefix_blocks=None,  # prefill_tokens says what it prefills
    )
    return staged, order


def replay(
    trace: Trace,
    designed: Design,
    policy: PolicyFunction,
    *,
    seed: int = 0,
    clock: Clock | None = None,
) -> SplitReplay:
    """The design's deployed split replayed as its two pools (see the module docstring)."""
    plan = designed.plan
    pair = roles(plan)
    if plan is None or pair is None or plan.disaggregation is None:
        raise SetupError(f"{designed.source}: no prefill/decode split is deployed to replay")
    split_plan = plan.disaggregation
    prefill_plan, decode_plan = plan.tier(pair.prefill), plan.tier(pair.decode)
    mean_in = mean_input_tokens(designed.service.spec) or 1.0
    per_token_s = (split_plan.transfer_ms or 0.0) / 1000.0 / mean_in
    split = trace.input_tokens >= SPLIT_MIN_UNCACHED_TOKENS
    prefill = simulate(
        _prefill_trace(trace, split),
        _stage(designed, prefill_plan, 1.0, seed=seed, picker_queue=False),
        policy,
        "inferfleet",
        clock=clock,
    )
    transfer_s = np.where(split, trace.input_tokens * per_token_s, 0.0)
    arrival_s = trace.arrival_s.astype(np.float64).copy()
    arrival_s[split] = trace.arrival_s[split] + prefill.ttft_s + transfer_s[split]
    decode_trace, order = _decode_trace(trace, arrival_s, split)
    mean_out = mean_output_tokens(designed.service.spec) or 1.0
    decode_config = _stage(designed, decode_plan, mean_out, seed=seed, picker_queue=True)
    decode = simulate(decode_trace, decode_config, policy, "inferfleet", clock=clock)
    ttft_s = np.full(len(trace), math.inf)
    ttft_s[order] = decode.ttft_s + (arrival_s[order] - trace.arrival_s[order])
    itl_late = np.zeros(len(trace), dtype=bool)
    if decode.itl_late is not None:
        itl_late[order] = decode.itl_late.astype(bool)
    return SplitReplay(prefill, decode, ttft_s, itl_late, split, transfer_s, split_plan)


def summarize_split(result: SplitReplay, trace: Trace) -> dict[str, Any]:
    """The split's report, in the keys of simulate -o json's contract (report.summarize)
    plus each pool's own."""
    prefill, decode = result.prefill, result.decode
    combined = dataclasses.replace(
        decode,
        policy="inferfleet (prefill/decode split)",
        trace=trace.name,
        requests=len(trace),
        ttft_s=result.ttft_s,
        itl_late=result.itl_late,
        itl_ok=int(np.count_nonzero(np.isfinite(result.ttft_s) & ~result.itl_late)),
        served=int(np.count_nonzero(np.isfinite(result.ttft_s))),
        gpu_hours=prefill.gpu_hours + decode.gpu_hours,
        cost_usd=prefill.cost_usd + decode.cost_usd,
        replica_hours={**prefill.replica_hours, **decode.replica_hours},
        peak_replicas={**prefill.peak_replicas, **decode.peak_replicas},
        scale_ups=prefill.scale_ups + decode.scale_ups,
        scale_downs=prefill.scale_downs + decode.scale_downs,
        span_s=trace.span_s,
        rejected=prefill.rejected + decode.rejected,
        held=prefill.held + decode.held,
        held_expired=prefill.held_expired + decode.held_expired,
        shed=prefill.shed + decode.shed,
        unroutable=prefill.unroutable + decode.unroutable,
        ticks=max(prefill.ticks, decode.ticks),
        wall_s=None if prefill.wall_s is None or decode.wall_s is None else prefill.wall_s + decode.wall_s,
    )
    document = summarize(combined)
    split_plan = result.split_plan
    document["split"] = {
        "prefillTier": split_plan.prefill_tier,
        "decodeTier": split_plan.decode_tier,
        "splitRequests": int(np.count_nonzero(result.split)),
        "thresholdTokens": SPLIT_MIN_UNCACHED_TOKENS,
        "meanTransferMs": round(float(result.transfer_s[result.split].mean()) * 1000.0, 1)
        if result.split.any()
        else 0.0,
        "prefillPool": {"gpuHours": round(prefill.gpu_hours, 3), "costUsd": round(prefill.cost_usd, 2)},
        "decodePool": {"gpuHours": round(decode.gpu_hours, 3), "costUsd": round(decode.cost_usd, 2)},
    }
    return document


def verdict(colocated: dict[str, Any], split: dict[str, Any]) -> str:
    """Whether the split paid on this trace: SLO attainment (both SLOs) and cost."""
    within_c, within_s = colocated["sloAttainmentWithItl"], split["sloAttainmentWithItl"]
    cost_c, cost_s = colocated["costUsd"], split["costUsd"]
    key = "costUsd" if cost_c or cost_s else "gpuHours"
    spent_c, spent_s = colocated[key], split[key]
    unit = "$" if key == "costUsd" else "GPU-hours"
    money = f"{spent_s:,.2f} {unit} split against {spent_c:,.2f} colocated"
    within = f"{within_s:.2%} of requests within both SLOs split against {within_c:.2%} colocated"
    if within_s >= within_c and spent_s < spent_c:
        return f"the split pays on this trace: {within}, for {money}"
    if within_s < within_c and spent_s >= spent_c:
        return f"the split does not pay on this trace: {within}, for {money}"
    return f"a trade: {within}, for {money}"
