"""A perfect-foresight oracle: the limit beside the baselines (pure).

What no autoscaler can know, the oracle is given: every request of the trace ahead of
time (its arrival, prompt and output lengths) and each tier's cold start. It is a policy
function like the baselines (`PolicyFunction`), built for one trace and one replay
configuration by `perfect_foresight`, and the replay judges it like any other policy.

How it sizes the fleet:

1. **Demand per bin.** The trace is cut into bins (`bin_s`, a minute by default). For
   each tier, the requests arriving in a bin that the tier can serve (prompt under its
   max-model-len; the output cut where the context is full) give the bin's rate and its
   mix: the mean prefill seconds per request (prompt / the tier's prefill tokens/s), the
   mean decode steps (output - 1) and the KV slots each request holds (a context longer
   than a slot's share of the KV cache holds several) — the simulator's own model of a
   replica (autoscaling.simulate.engine).
2. **What one replica carries.** At r requests/s on one replica, prefill takes a share
   `s = r x prefill` of the GPU, each decode step lasts `(base + perSeq x batch) / (1 - s)`
   and Little's law gives the batch (sequences in flight) and the busy KV slots. The
   replica's capacity in that bin is the largest r with prefill at most
   MAX_PREFILL_SHARE of the GPU and the busy slots at most its slots; with `keep_itl`,
   also a decode step (one more sequence joining the batch) within the ITL SLO.
3. **Replicas per bin.** The bin's demand divided by `utilization` (the knob: 1 sizes
   at the limit, lower keeps a margin for the queueing inside a bin, higher sizes past
   it) is placed across
   tiers like every other policy's demand (`place`: cheapest per request first, on-demand
   before spot, within each tier's minReplicas and maxReplicas).
4. **Cold starts.** A replica asked for at `t` serves from `t + cold start`, and one
   removed at `t` is gone. So at each tick the oracle holds, per tier, the most replicas
   any bin needs from now until the tick after its cold start ends: never fewer (a
   replica removed now could not be back in time for a bin it is needed in), never more.
   Given the bins' needs this is the cheapest schedule there is: any schedule that meets
   them holds at least as many replicas at every moment.

What it is not: a proof that nothing can do better. Within a bin it knows only the mix
and the count, not the order (a burst inside a minute queues); the capacity is the
simulator's roofline, not a search over replays; and its demand is placed by the same
cost rule as ours. The benchmark therefore sweeps `utilization` and takes the lower
envelope of the oracle's replays (within-SLO share against GPU-hours) as the frontier
of what perfect foresight reaches.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inferfleet.autoscaling.policy import (
    SIGNAL_PREDICTIVE,
    PolicyFunction,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierRecommendation,
    TierSignals,
)
from inferfleet.autoscaling.policy.capacity import MAX_PREFILL_SHARE
from inferfleet.autoscaling.policy.demand_placement import place
from inferfleet.autoscaling.policy.policy import plan_slot
from inferfleet.autoscaling.simulate.engine import SimConfig, SimTier
from inferfleet.autoscaling.simulate.traces import Trace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_BIN_S = 60.0
# Above 1 the oracle sizes past the limit (a queue in every bin): the cheap end of its
# frontier, where a policy that misses more requests than it at 1 is compared.
MAX_UTILIZATION = 2.0
# Bisection steps for a replica's capacity (relative precision 2^-40).
_BISECT_STEPS = 40


@dataclass(frozen=True, slots=True)
class BinMix:
    """One tier's demand per bin: the rate it can serve and that traffic's mix."""

    rate_rps: FloatArray  # requests/s the tier can serve (prompt under max-model-len)
    prefill_s: FloatArray  # mean prefill seconds per request on one replica
    steps: FloatArray  # mean decode steps per request (output - 1)
    slot_prefill_s: FloatArray  # mean of KV slots held x prefill seconds
    slot_steps: FloatArray  # mean of KV slots held x decode steps


def bin_mix(trace: Trace, tier: SimTier, bin_s: float = DEFAULT_BIN_S) -> BinMix:
    """The requests of each bin of `trace` as `tier` would serve them (see the module)."""
    n_bins = max(1, math.ceil(trace.span_s / bin_s))
    prompt = trace.input_tokens.astype(np.float64)
    output = trace.output_tokens.astype(np.float64)
    limit = tier.max_model_len
    served = np.ones(prompt.shape, dtype=bool) if not limit else prompt < limit
    if limit:
        output = np.minimum(output, limit - prompt)  # vLLM's default max_tokens
    index = np.minimum((trace.arrival_s // bin_s).astype(np.int64), n_bins - 1)[served]
    prefill = prompt[served] / tier.serving.prefill_tokens_per_s
    steps = np.maximum(0.0, output[served] - 1.0)
    held = np.ones(prefill.shape)
    if tier.kv_tokens_per_slot > 0.0:
        context = prompt[served] + output[served]
        held = np.clip(np.ceil(context / tier.kv_tokens_per_slot), 1.0, float(tier.slots))
    count = np.bincount(index, minlength=n_bins).astype(np.float64)
    safe = np.maximum(count, 1.0)

    def mean(values: FloatArray) -> FloatArray:
        return np.bincount(index, weights=values, minlength=n_bins) / safe

    return BinMix(
        rate_rps=count / bin_s,
        prefill_s=mean(prefill),
        steps=mean(steps),
        slot_prefill_s=mean(held * prefill),
        slot_steps=mean(held * steps),
    )


def _load(tier: SimTier, mix: BinMix, rate: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """At `rate` requests/s on one replica: (prefill share, sequences in flight, busy KV
    slots), from the roofline; the batch is infinite where decode cannot keep up."""
    base_s = tier.serving.decode_step_base_ms / 1000.0
    per_seq_s = tier.serving.decode_step_per_seq_ms / 1000.0
    share = rate * mix.prefill_s
    decode = 1.0 - np.minimum(share, MAX_PREFILL_SHARE)
    # batch = rate x (prefill + steps x (base + perSeq x batch) / decode), solved for batch
    room = 1.0 - rate * mix.steps * per_seq_s / decode
    batch = np.where(
        room > 0.0, rate * (mix.prefill_s + mix.steps * base_s / decode) / np.maximum(room, 1e-12), np.inf
    )
    step_s = (base_s + per_seq_s * batch) / decode
    slots = rate * (mix.slot_prefill_s + mix.slot_steps * step_s)
    return share, batch, slots


def replica_capacity_rps(tier: SimTier, mix: BinMix, *, itl_slo_ms: float | None = None) -> FloatArray:
    """Per bin, the most requests/s one replica of `tier` carries at the limit: prefill
    within MAX_PREFILL_SHARE of the GPU, busy KV slots within its slots, and with
    `itl_slo_ms` a decode step (one more sequence joining) within it. Where no rate
    keeps the ITL SLO (a step over it at an almost empty batch), the capacity without
    it: no replica count would help."""
    capacity = _bisect(tier, mix, None)
    if itl_slo_ms is None:
        return capacity
    within_itl = _bisect(tier, mix, itl_slo_ms)
    return np.where(within_itl > 0.0, within_itl, capacity)


def _bisect(tier: SimTier, mix: BinMix, itl_slo_ms: float | None) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        high = np.where(mix.prefill_s > 0.0, MAX_PREFILL_SHARE / mix.prefill_s, 1e6)
        low = np.zeros_like(high)
        for _ in range(_BISECT_STEPS):
            middle = (low + high) / 2.0
            fits = _fits(tier, mix, middle, itl_slo_ms)
            low = np.where(fits, middle, low)
            high = np.where(fits, high, middle)
    return low


def _fits(tier: SimTier, mix: BinMix, rate: FloatArray, itl_slo_ms: float | None) -> npt.NDArray[np.bool_]:
    share, batch, slots = _load(tier, mix, rate)
    fits = (share <= MAX_PREFILL_SHARE) & (slots <= tier.slots) & np.isfinite(batch)
    if itl_slo_ms is not None:
        base_ms = tier.serving.decode_step_base_ms
        per_seq_ms = tier.serving.decode_step_per_seq_ms
        step_ms = (base_ms + per_seq_ms * (batch + 1.0)) / (1.0 - np.minimum(share, MAX_PREFILL_SHARE))
        fits &= step_ms <= itl_slo_ms
    return fits


def replicas_needed(
    trace: Trace,
    config: SimConfig,
    *,
    utilization: float = 1.0,
    keep_itl: bool = False,
    bin_s: float = DEFAULT_BIN_S,
) -> dict[str, IntArray]:
    """Per tier, the replicas each bin needs (step 3 of the module): the demand the
    widest tier can serve, over `utilization`, placed by cost on the tiers' capacities."""
    if not 0.0 < utilization <= MAX_UTILIZATION:
        raise ValueError(f"utilization must be in (0, {MAX_UTILIZATION:g}], not {utilization}")
    tiers = config.tiers
    itl = config.itl_slo_ms if keep_itl else None
    mixes = [bin_mix(trace, tier, bin_s) for tier in tiers]
    capacity = [
        replica_capacity_rps(tier, mix, itl_slo_ms=itl) for tier, mix in zip(tiers, mixes, strict=True)
    ]
    widest = max(range(len(tiers)), key=lambda k: tiers[k].max_model_len or math.inf)
    demand = mixes[widest].rate_rps / utilization
    # The slots from the plan and the spec once; each bin only changes their capacity.
    plan_slots = [
        plan_slot(TierContext(tier.figures, TierSignals()), config.policy, k, 0.0)
        for k, tier in enumerate(tiers)
    ]
    needed = {tier.figures.name: np.zeros(demand.shape, dtype=np.int64) for tier in tiers}
    for j, rate in enumerate(demand.tolist()):
        slots = [
            dataclasses.replace(slot, usable_rps=float(capacity[k][j])) for k, slot in enumerate(plan_slots)
        ]
        placement = place(rate, rate, slots)
        for name, replicas in placement.replicas.items():
            needed[name][j] = replicas
    return needed


def hold_for(needed: Sequence[int], bin_s: float, now_s: float, horizon_s: float) -> int:
    """The most replicas any bin overlapping [now_s, now_s + horizon_s] needs."""
    if not needed:
        return 0
    first = min(len(needed) - 1, max(0, int(now_s // bin_s)))
    last = min(len(needed) - 1, max(first, int((now_s + horizon_s) // bin_s)))
    return max(needed[first : last + 1])


def perfect_foresight(
    trace: Trace,
    config: SimConfig,
    *,
    utilization: float = 1.0,
    keep_itl: bool = False,
    bin_s: float = DEFAULT_BIN_S,
) -> PolicyFunction:
    """The oracle for replaying `trace` under `config`, as a policy function: each tick
    it holds per tier the most replicas any bin needs until the tick after a replica
    asked for now would be Ready (step 4 of the module). Its state carries nothing."""
    needed = {name: counts.tolist() for name, counts in replicas_needed(
        trace, config, utilization=utilization, keep_itl=keep_itl, bin_s=bin_s
    ).items()}  # fmt: skip
    period_s = config.policy.sync_period_s
    epoch_s = trace.epoch_s

    def oracle(ctx: ScalingContext, state: ScalingState | None = None) -> tuple[Recommendation, ScalingState]:
        state = ScalingState() if state is None else state.copy()
        now_s = ctx.now_s - epoch_s
        results = []
        for tier in ctx.tiers:
            replicas = hold_for(needed.get(tier.name, []), bin_s, now_s, tier.figures.cold_start_s + period_s)
            current = tier.signals.desired_replicas
            results.append(
                TierRecommendation(
                    name=tier.name,
                    replicas=replicas,
                    current=current,
                    signal=SIGNAL_PREDICTIVE,
                    reason=f"the most any bin needs in the next {tier.figures.cold_start_s + period_s:.0f} s",
                    targets={"oracle": replicas},
                )
            )
            state.tier(tier.name).last_desired = replicas
        state.last_decision_s = ctx.now_s
        return (
            Recommendation(
                now_s=ctx.now_s,
                tiers=tuple(results),
                signal=SIGNAL_PREDICTIVE,
                reason="oracle: " + "; ".join(f"{r.name} {r.current}->{r.replicas}" for r in results),
            ),
            state,
        )

    return oracle
