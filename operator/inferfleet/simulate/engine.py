"""The replay engine: requests through replicas, the autoscaler called every sync period.

The model of a replica (one vLLM engine):
- it runs at most `slots` sequences at once (continuous batching bounded by the
  plan's concurrency); a request that finds every slot of its tier busy waits in the
  tier's FIFO queue (the router sends each request to a tier, any free slot takes it);
- prefill is compute bound and serialized on the replica: a request's first token
  comes `input_tokens / prefillTokensPerSecond` after the replica's previous prefill
  (or its own start) ends; TTFT = queueing + prefill wait + prefill;
- decode then takes `(output_tokens - 1)` steps of `base + perSeq x batch` ms, the batch
  being what runs on the replica when the request starts (the planner's roofline);
- a new replica serves only after its cold start; a removed one takes no new work
  and is paid for until its in-flight requests finish;
- a prompt of `--max-model-len` tokens or more is answered HTTP 400 at once (vLLM
  refuses it before the engine sees it: never served, counted only as a 4xx), and an
  output is cut where prompt plus output reach max-model-len (vLLM's default
  `max_tokens`).

How it stays fast (a million requests in well under a minute on two cores): capacity
only changes at autoscaler ticks, so between two ticks a request can be *committed*
as soon as it arrives whenever the earliest free slot frees before the next tick:
its whole life (start, first token, finish) is computed at once. Only requests that
would still wait at the next tick are held in the queue, because the decision taken
at that tick may add a replica that frees sooner. So there are no completion events:
one heap of slot free times per tier (FIFO multi-server recursion), one small heap of
finish times per replica (its batch size), a deque of waiting requests.

The autoscaler sees only what vLLM's metrics show. TTFT reaches it the way Prometheus
sees it: a histogram with vLLM's TTFT buckets, p99 by linear interpolation inside the
bucket (histogram_quantile) over the last window. Request, prompt-token and
output-token rates count the requests the engines take on (vLLM counts what it
serves, not what is still queued in front of it), and so does the per-minute history;
prompt and output lengths arrive as vLLM's `request_prompt_tokens` /
`request_generation_tokens` histograms (1-2-5 buckets up to max-model-len), read as
p50/p95/p99 over the mix window.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from inferfleet.scaling import (
    PolicyConfig,
    PolicyFunction,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierSignals,
)
from inferfleet.scaling.placement import TierSlot, place
from inferfleet.scaling.policy import MAX_PREFILL_SHARE, cost_rank, max_replicas_of, tier_policy_of
from inferfleet.scaling.types import TokenQuantiles
from inferfleet.scaling.window import SequenceWindow
from inferfleet.simulate.traces import Trace

# Prefill's share of GPU time is averaged over this window, and capped (MAX_PREFILL_SHARE,
# the same cap the policy's capacity estimate assumes) so decode always progresses.
PREFILL_LOAD_WINDOW_S = 10.0
# vLLM's vllm:time_to_first_token_seconds histogram buckets (seconds).
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ServingModel:
    prefill_tokens_per_s: float
    decode_step_base_ms: float
    decode_step_per_seq_ms: float


@dataclass(frozen=True, slots=True)
class SimTier:
    figures: TierFigures
    serving: ServingModel
    slots: int
    cost_per_gpu_hour: float = 0.0

    @property
    def max_model_len(self) -> int:
        return self.figures.max_model_len


def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's bucket bounds for the token-length histograms: 1, 2, 5, 10, 20, 50, ... up
    to max-model-len (its build_1_2_5_buckets)."""
    limit = max_model_len if max_model_len > 0 else 10**7
    bounds: list[float] = []
    base = 1
    while base <= limit:
        bounds.extend(float(base * m) for m in (1, 2, 5) if base * m <= limit)
        base *= 10
    return tuple(bounds)


@dataclass(frozen=True)
class SimConfig:
    tiers: tuple[SimTier, ...]
    policy: PolicyConfig
    ttft_slo_ms: float
    itl_slo_ms: float
    ttft_window_s: float = 60.0
    rate_window_s: float = 60.0
    # Token-length histograms are read over this window (the live loop's mix window).
    mix_window_s: float = 600.0
    seed: int = 0
    # After the trace ends, keep ticking until queues are empty, at most this long.
    max_drain_s: float = 3600.0
    timeline: bool = True


@dataclass
class Timeline:
    time_s: list[float] = field(default_factory=list)
    demand_rps: list[float] = field(default_factory=list)
    forecast_rps: list[float] = field(default_factory=list)
    desired: dict[str, list[int]] = field(default_factory=dict)
    ready: dict[str, list[int]] = field(default_factory=dict)
    waiting: dict[str, list[int]] = field(default_factory=dict)
    ttft_p99_ms: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class SimResult:
    policy: str
    trace: str
    requests: int
    ttft_s: np.ndarray  # per request, inf when never served
    itl_ok: int
    served: int
    ttft_slo_ms: float
    gpu_hours: float
    cost_usd: float
    replica_hours: dict[str, float]
    peak_replicas: dict[str, int]
    scale_ups: int
    scale_downs: int
    span_s: float
    wall_s: float
    ticks: int
    timeline: Timeline | None
    last_reason: str = ""
    rejected: int = 0  # answered 4xx: prompt at or beyond max-model-len
    # (tier, paid from s, paid until s, GPUs per replica) of every replica, for GPU-hours
    # over part of the span.
    replica_spans: tuple[tuple[str, float, float, int], ...] = ()
    # What the policy knew at the end (its state) and the last signals it was given:
    # the drift report of `inferfleet simulate` reads them.
    final_state: ScalingState | None = None
    final_signals: dict[str, TierSignals] = field(default_factory=dict)


def histogram_quantile(quantile: float, counts: Sequence[int], bounds: Sequence[float]) -> float | None:
    """Prometheus' histogram_quantile on per-bucket (not cumulative) counts; the last
    count is the +Inf bucket. None when there are no observations."""
    total = sum(counts)
    if total == 0:
        return None
    rank = quantile * total
    cumulative = 0
    for index, count in enumerate(counts):
        if cumulative + count >= rank and count > 0:
            if index >= len(bounds):
                return bounds[-1]
            lower = 0.0 if index == 0 else bounds[index - 1]
            return lower + (bounds[index] - lower) * (rank - cumulative) / count
        cumulative += count
    return bounds[-1]


_MIX_QUANTILES = (0.5, 0.95, 0.99)


class _Meters:
    """One tier's engine counters as Prometheus would window them: request, token and
    4xx counts over the rate window; token-length histograms over the mix window."""

    def __init__(self, bounds: tuple[float, ...], rate_ticks: int, mix_ticks: int) -> None:
        self.bounds = bounds
        self.rates: deque[tuple[int, int, int, int]] = deque(maxlen=rate_ticks)
        self._sums = [0, 0, 0, 0]
        self.prompt_hist_now = [0] * (len(bounds) + 1)
        self.output_hist_now = [0] * (len(bounds) + 1)
        self.prompt_hist = [0] * (len(bounds) + 1)
        self.output_hist = [0] * (len(bounds) + 1)
        self._hists: deque[tuple[list[int], list[int]]] = deque(maxlen=mix_ticks)

    def tick(self, started: int, prompt: int, generated: int, rejected: int) -> None:
        sample = (started, prompt, generated, rejected)
        if len(self.rates) == self.rates.maxlen:
            old = self.rates[0]
            self._sums = [a - b for a, b in zip(self._sums, old, strict=True)]
        self.rates.append(sample)
        self._sums = [a + b for a, b in zip(self._sums, sample, strict=True)]
        if len(self._hists) == self._hists.maxlen:
            old_prompt, old_output = self._hists[0]
            self._add(self.prompt_hist, old_prompt, -1)
            self._add(self.output_hist, old_output, -1)
        self._hists.append((self.prompt_hist_now, self.output_hist_now))
        self._add(self.prompt_hist, self.prompt_hist_now, 1)
        self._add(self.output_hist, self.output_hist_now, 1)
        self.prompt_hist_now = [0] * (len(self.bounds) + 1)
        self.output_hist_now = [0] * (len(self.bounds) + 1)

    @staticmethod
    def _add(total: list[int], counts: list[int], sign: int) -> None:
        for index, count in enumerate(counts):
            if count:
                total[index] += sign * count

    def totals(self) -> tuple[int, int, int, int]:
        started, prompt, generated, rejected = self._sums
        return started, prompt, generated, rejected

    def quantiles(self, counts: list[int]) -> TokenQuantiles | None:
        values = [histogram_quantile(q, counts, self.bounds) for q in _MIX_QUANTILES]
        if any(value is None for value in values):
            return None
        p50, p95, p99 = (float(v) for v in values if v is not None)
        return TokenQuantiles(p50, p95, p99)


class _Fleet:
    """Replicas of all tiers, in parallel lists indexed by replica id."""

    def __init__(self, tiers: Sequence[SimTier]) -> None:
        self.tiers = tiers
        self.tier_of: list[int] = []
        self.created: list[float] = []
        self.ready_at: list[float] = []
        self.removed: list[float] = []  # inf while serving
        self.busy_until: list[float] = []
        self.prefill_free: list[float] = []
        self.prefill_starts: list[deque[float]] = []  # of requests not yet in prefill at the last tick
        self.prefill_load: list[float] = []  # recent prefill seconds per second (decaying average)
        self.prefill_load_at: list[float] = []
        self.finishes: list[list[float]] = []
        self.draining: list[bool] = []
        self.debt: list[int] = []  # slots taken by the balancer, still to drop from the heap
        self.active: list[list[int]] = [[] for _ in tiers]
        self.slot_heaps: list[list[tuple[float, int]]] = [[] for _ in tiers]
        self.peak: list[int] = [0 for _ in tiers]

    def add(self, k: int, now_s: float, ready_at_s: float) -> None:
        rid = len(self.tier_of)
        self.tier_of.append(k)
        self.created.append(now_s)
        self.ready_at.append(ready_at_s)
        self.removed.append(math.inf)
        self.busy_until.append(ready_at_s)
        self.prefill_free.append(ready_at_s)
        self.prefill_starts.append(deque())
        self.prefill_load.append(0.0)
        self.prefill_load_at.append(ready_at_s)
        self.finishes.append([])
        self.draining.append(False)
        self.debt.append(0)
        self.active[k].append(rid)
        heap = self.slot_heaps[k]
        for _ in range(self.tiers[k].slots):
            heapq.heappush(heap, (ready_at_s, rid))
        self.peak[k] = max(self.peak[k], len(self.active[k]))

    def remove(self, k: int, now_s: float, count: int) -> None:
        """Scale down: cancel replicas still starting (newest first), then drain the
        Ready ones with the least work left."""
        active = self.active[k]
        starting = sorted((r for r in active if self.ready_at[r] > now_s), key=lambda r: -self.ready_at[r])
        serving = sorted((r for r in active if self.ready_at[r] <= now_s), key=lambda r: self.busy_until[r])
        for rid in (starting + serving)[:count]:
            self.draining[rid] = True
            self.removed[rid] = now_s
            active.remove(rid)

    def ready_count(self, k: int, now_s: float) -> int:
        ready_at = self.ready_at
        return sum(1 for r in self.active[k] if ready_at[r] <= now_s)

    def in_flight(self, k: int, now_s: float) -> tuple[int, int]:
        """(running, waiting for prefill) on the tier's replicas at now_s: vLLM counts a
        request scheduled behind other prefills as waiting, not running."""
        running = 0
        queued = 0
        for rid in self.active[k]:
            heap = self.finishes[rid]
            while heap and heap[0] <= now_s:
                heapq.heappop(heap)
            starts = self.prefill_starts[rid]
            while starts and starts[0] <= now_s:
                starts.popleft()
            queued += len(starts)
            running += len(heap) - len(starts)
        return running, queued

    def spans(self, end_s: float) -> list[tuple[int, float, float]]:
        """(tier, paid from, paid until) of every replica: from its request until it is
        removed, or, when it was drained, until its work ended; cut at `end_s`."""
        out = []
        for rid, tier in enumerate(self.tier_of):
            stop = self.removed[rid]
            if stop < math.inf and self.ready_at[rid] <= stop:
                stop = max(stop, self.busy_until[rid])  # drained: paid until work ends
            out.append((tier, self.created[rid], min(stop, end_s)))
        return out


def initial_replicas(trace: Trace, config: SimConfig) -> dict[str, int]:
    """The fleet every policy starts from: the first five minutes' mean rate, with
    headroom, placed like the predictive target (as if the service ran before t=0)."""
    head = trace.arrival_s[trace.arrival_s < 300.0]
    rate = float(head.shape[0]) / min(300.0, max(trace.span_s, 1.0))
    policy = config.policy
    slots = [
        TierSlot(
            name=tier.figures.name,
            usable_rps=tier.figures.usable_rps,
            min_replicas=tier_policy_of(policy, tier.figures.name).min_replicas,
            max_replicas=max_replicas_of(_context(tier), tier_policy_of(policy, tier.figures.name)),
            cost_rank=cost_rank(_context(tier), tier_policy_of(policy, tier.figures.name), index),
            spot=tier_policy_of(policy, tier.figures.name).capacity_type == "spot",
            share=tier_policy_of(policy, tier.figures.name).routing_share,
        )
        for index, tier in enumerate(config.tiers)
    ]
    demand = rate * (1.0 + policy.headroom)
    return place(demand, demand, slots).replicas


def _context(tier: SimTier) -> TierContext:
    return TierContext(tier.figures, TierSignals())


def simulate(trace: Trace, config: SimConfig, policy: PolicyFunction, policy_name: str) -> SimResult:
    """Replay `trace` through a fleet scaled by `policy`; see the module docstring."""
    wall_start = time.perf_counter()
    tiers = config.tiers
    n_tiers = len(tiers)
    names = [tier.figures.name for tier in tiers]
    period = config.policy.sync_period_s
    arrivals: list[float] = trace.arrival_s.tolist()
    inputs: list[int] = trace.input_tokens.tolist()
    outputs: list[int] = trace.output_tokens.tolist()
    n = len(arrivals)
    # The history the forecaster reads: requests the engines took on, per minute.
    minute_rates: list[float] = [0.0] * max(1, math.ceil(trace.span_s / 60.0))
    n_minutes = len(minute_rates)
    rng = np.random.default_rng(config.seed)
    route_draws: list[float] = rng.random(n).tolist() if n_tiers > 1 else []
    balance_draws: list[float] = rng.random(n).tolist()

    fleet = _Fleet(tiers)
    draining = fleet.draining
    debt = fleet.debt
    slot_counts = [tier.slots for tier in tiers]
    inv_prefill = [1.0 / tier.serving.prefill_tokens_per_s for tier in tiers]
    step_base = [tier.serving.decode_step_base_ms / 1000.0 for tier in tiers]
    step_per_seq = [tier.serving.decode_step_per_seq_ms / 1000.0 for tier in tiers]
    itl_limit = config.itl_slo_ms / 1000.0
    bounds = TTFT_BUCKETS_S
    n_buckets = len(bounds) + 1
    window_ticks = max(1, round(config.ttft_window_s / period))
    rate_ticks = max(1, round(config.rate_window_s / period))
    hist_now = [[0] * n_buckets for _ in tiers]
    hist_window: list[deque[list[int]]] = [deque(maxlen=window_ticks) for _ in tiers]
    max_model_len = [tier.max_model_len for tier in tiers]
    meters = [
        _Meters(token_buckets(tier.max_model_len), rate_ticks, max(1, round(config.mix_window_s / period)))
        for tier in tiers
    ]
    started_now = [0] * n_tiers
    prompt_now = [0] * n_tiers
    generated_now = [0] * n_tiers
    rejected_now = [0] * n_tiers
    rejected_total = 0
    prompt_hist_now = [m.prompt_hist_now for m in meters]
    output_hist_now = [m.output_hist_now for m in meters]
    token_bounds = [m.bounds for m in meters]
    waiting: list[deque[int]] = [deque() for _ in tiers]
    ttft = array("d", [math.inf]) * n
    itl_ok = 0
    served = 0

    def commit(i: int, k: int, horizon_s: float) -> bool:
        """Start request i on tier k if a slot frees by horizon_s; False: it waits."""
        nonlocal itl_ok, served
        heap = fleet.slot_heaps[k]
        while heap:
            rid = heap[0][1]
            if draining[rid]:
                heapq.heappop(heap)
            elif debt[rid]:
                # This replica took a request through the balancer below without
                # giving back its earliest slot; that slot is this entry.
                debt[rid] -= 1
                heapq.heappop(heap)
            else:
                break
        if not heap:
            return False
        free_s, rid = heap[0]
        if free_s > horizon_s:
            return False
        arrival = arrivals[i]
        start = free_s if free_s > arrival else arrival
        active = fleet.active[k]
        balanced = False
        if free_s <= arrival and len(active) > 1:
            # Idle slots exist: balance like a least-outstanding-work router with two
            # random choices (the heap's pick and one other Ready replica with room).
            other = active[int(balance_draws[i] * len(active))]
            if (
                other != rid
                and fleet.prefill_free[other] < fleet.prefill_free[rid]
                and fleet.ready_at[other] <= arrival
            ):
                others = fleet.finishes[other]
                while others and others[0] <= arrival:
                    heapq.heappop(others)
                if len(others) < slot_counts[k]:
                    debt[other] += 1
                    rid = other
                    balanced = True
        prefill_start = fleet.prefill_free[rid]
        if prefill_start < start:  # noqa: PLR1730 (a branch is cheaper than max() in the hot loop)
            prefill_start = start
        prefill_s = inputs[i] * inv_prefill[k]
        first_token = prefill_start + prefill_s
        fleet.prefill_free[rid] = first_token
        if prefill_start > start:
            fleet.prefill_starts[rid].append(prefill_start)
        # The GPU does prefill and decode in turn (chunked prefill shares each step), so
        # decode runs slower by the share of time recent prefills take: the planner's
        # roofline adds the two times the same way, so saturation here matches its figure.
        since = start - fleet.prefill_load_at[rid]
        load = fleet.prefill_load[rid]
        if since > 0.0:
            load *= math.exp(-since / PREFILL_LOAD_WINDOW_S)
            fleet.prefill_load_at[rid] = start
        load += prefill_s / PREFILL_LOAD_WINDOW_S
        fleet.prefill_load[rid] = load
        decode_share = 1.0 - load if load < MAX_PREFILL_SHARE else 1.0 - MAX_PREFILL_SHARE
        running = fleet.finishes[rid]
        while running and running[0] <= start:
            heapq.heappop(running)
        step = (step_base[k] + step_per_seq[k] * (len(running) + 1)) / decode_share
        output = outputs[i]
        limit = max_model_len[k]
        if limit and inputs[i] + output > limit:
            output = limit - inputs[i]  # vLLM's default max_tokens: what fits the context
        finish = first_token + (output - 1) * step
        heapq.heappush(running, finish)
        if finish > fleet.busy_until[rid]:  # noqa: PLR1730 (hot loop)
            fleet.busy_until[rid] = finish
        if balanced:
            heapq.heappush(heap, (finish, rid))
        else:
            heapq.heapreplace(heap, (finish, rid))  # the top entry was this slot
        latency = first_token - arrival
        ttft[i] = latency
        hist_now[k][bisect.bisect_left(bounds, latency)] += 1
        if step <= itl_limit:
            itl_ok += 1
        served += 1
        started_now[k] += 1
        prompt_now[k] += inputs[i]
        generated_now[k] += output
        prompt_hist_now[k][bisect.bisect_left(token_bounds[k], inputs[i])] += 1
        output_hist_now[k][bisect.bisect_left(token_bounds[k], output)] += 1
        minute = int(start // 60.0)
        if minute < n_minutes:
            minute_rates[minute] += 1.0 / 60.0
        return True

    # --- start: the common initial fleet, Ready at t=0; one warm-up decision ----------
    policy_config = config.policy
    state: ScalingState | None = None
    start_fleet = initial_replicas(trace, config)
    warm_rate = float(trace.arrival_s[trace.arrival_s < 300.0].shape[0]) / 300.0
    warm_ctx = ScalingContext(
        now_s=trace.epoch_s,
        policy=policy_config,
        tiers=tuple(
            TierContext(
                tier.figures,
                TierSignals(
                    ready_replicas=start_fleet[tier.figures.name],
                    desired_replicas=start_fleet[tier.figures.name],
                    waiting=0.0,
                    request_rate_rps=warm_rate if index == 0 else 0.0,
                ),
            )
            for index, tier in enumerate(tiers)
        ),
        rate_history_rps=None,
    )
    first, state = policy(warm_ctx, None)
    for k, name in enumerate(names):
        for _ in range(first.replicas.get(name, start_fleet[name])):
            fleet.add(k, 0.0, 0.0)

    timeline = Timeline() if config.timeline else None
    if timeline is not None:
        for name in names:
            timeline.desired[name] = []
            timeline.ready[name] = []
            timeline.waiting[name] = []
            timeline.ttft_p99_ms[name] = []
    weights = _routing_weights(fleet, tiers, policy_config, 0.0)
    scale_ups = 0
    scale_downs = 0
    ticks = 0
    last_reason = ""
    end_s = trace.span_s
    deadline_s = end_s + config.max_drain_s
    i = 0
    tick_s = period
    while True:
        # --- arrivals up to this tick --------------------------------------------------
        horizon = tick_s
        while i < n:
            arrival = arrivals[i]
            if arrival > horizon:
                break
            if n_tiers == 1:
                k = 0
            else:
                k = bisect.bisect_right(weights, route_draws[i])
                if k >= n_tiers:
                    k = n_tiers - 1
            limit = max_model_len[k]
            if limit and inputs[i] >= limit:
                # vLLM answers 400 before the engine sees it: never served, never queued.
                rejected_now[k] += 1
                rejected_total += 1
                i += 1
                continue
            queue = waiting[k]
            # FIFO: behind anyone already waiting, else start now if a slot frees in time.
            if queue or not commit(i, k, horizon):
                queue.append(i)
            i += 1

        # --- the autoscaler's tick -------------------------------------------------------
        now = tick_s
        ticks += 1
        tier_contexts = []
        for k, tier in enumerate(tiers):
            hist_window[k].append(hist_now[k])
            hist_now[k] = [0] * n_buckets
            meter = meters[k]
            meter.tick(started_now[k], prompt_now[k], generated_now[k], rejected_now[k])
            started_now[k] = prompt_now[k] = generated_now[k] = rejected_now[k] = 0
            prompt_hist_now[k] = meter.prompt_hist_now
            output_hist_now[k] = meter.output_hist_now
            merged = [sum(column) for column in zip(*hist_window[k], strict=True)]
            p99 = histogram_quantile(0.99, merged, bounds)
            window_s = len(meter.rates) * period
            started, prompt_tokens, generated, rejected = meter.totals()
            running, queued = fleet.in_flight(k, now)
            tier_contexts.append(
                TierContext(
                    tier.figures,
                    TierSignals(
                        ready_replicas=fleet.ready_count(k, now),
                        desired_replicas=len(fleet.active[k]),
                        waiting=float(len(waiting[k]) + queued),
                        running=float(running),
                        ttft_p99_ms=None if p99 is None else p99 * 1000.0,
                        request_rate_rps=started / window_s,
                        prompt_tokens_rps=prompt_tokens / window_s,
                        generation_tokens_rps=generated / window_s,
                        rejected_rps=rejected / window_s,
                        prompt_tokens=meter.quantiles(meter.prompt_hist),
                        generation_tokens=meter.quantiles(meter.output_hist),
                    ),
                )
            )
        minutes_done = min(len(minute_rates), int(now // 60.0))
        ctx = ScalingContext(
            now_s=trace.epoch_s + now,
            policy=policy_config,
            tiers=tuple(tier_contexts),
            rate_history_rps=SequenceWindow.head(minute_rates, minutes_done),
        )
        recommendation, state = policy(ctx, state)
        last_reason = recommendation.reason
        for k, name in enumerate(names):
            current = len(fleet.active[k])
            target = recommendation.replicas.get(name, current)
            if target > current:
                scale_ups += 1
                ready_at = now + tiers[k].figures.cold_start_s
                for _ in range(target - current):
                    fleet.add(k, now, ready_at)
            elif target < current:
                scale_downs += 1
                fleet.remove(k, now, current - target)
        if timeline is not None:
            _record(timeline, now, tier_contexts, recommendation, names)
        weights = _routing_weights(fleet, tiers, policy_config, now)

        # --- requests still waiting may start before the next tick -----------------------
        tick_s = now + period
        for k in range(n_tiers):
            queue = waiting[k]
            while queue and commit(queue[0], k, tick_s):
                queue.popleft()
        if i >= n and (not any(waiting) or now >= deadline_s):
            break

    gpu_hours = 0.0
    cost = 0.0
    replica_hours: dict[str, float] = {}
    spans = fleet.spans(end_s)
    for k, tier in enumerate(tiers):
        seconds = sum(max(0.0, stop - start) for tier_index, start, stop in spans if tier_index == k)
        replica_hours[tier.figures.name] = seconds / 3600.0
        gpu = seconds / 3600.0 * tier.figures.gpus_per_replica
        gpu_hours += gpu
        cost += gpu * tier.cost_per_gpu_hour
    return SimResult(
        policy=policy_name,
        trace=trace.name,
        requests=n,
        ttft_s=np.frombuffer(ttft, dtype=np.float64),
        itl_ok=itl_ok,
        served=served,
        ttft_slo_ms=config.ttft_slo_ms,
        gpu_hours=gpu_hours,
        cost_usd=cost,
        replica_hours=replica_hours,
        peak_replicas={name: fleet.peak[k] for k, name in enumerate(names)},
        scale_ups=scale_ups,
        scale_downs=scale_downs,
        span_s=end_s,
        wall_s=time.perf_counter() - wall_start,
        ticks=ticks,
        timeline=timeline,
        last_reason=last_reason,
        rejected=rejected_total,
        replica_spans=tuple(
            (names[k], start, stop, tiers[k].figures.gpus_per_replica) for k, start, stop in spans
        ),
        final_state=state,
        final_signals={context.name: context.signals for context in tier_contexts},
    )


def _routing_weights(
    fleet: _Fleet, tiers: Sequence[SimTier], policy: PolicyConfig, now_s: float
) -> list[float]:
    """Cumulative routing probabilities per tier: the spec's fixed shares first, the rest
    in proportion to each tier's Ready capacity; tiers with nothing Ready get nothing."""
    ready = [fleet.ready_count(k, now_s) for k in range(len(tiers))]
    shares = [tier_policy_of(policy, tier.figures.name).routing_share for tier in tiers]
    weights = [0.0] * len(tiers)
    fixed = 0.0
    for k, share in enumerate(shares):
        if share is not None and ready[k] > 0:
            weights[k] = share
            fixed += share
    free = [k for k, share in enumerate(shares) if share is None and ready[k] > 0]
    capacity = sum(ready[k] * tiers[k].figures.usable_rps for k in free)
    rest = max(0.0, 1.0 - fixed)
    for k in free:
        weights[k] = rest * ready[k] * tiers[k].figures.usable_rps / capacity if capacity > 0 else 0.0
    total = sum(weights)
    if total <= 0.0:
        # Nothing Ready anywhere: queue at the tier with the most replicas on the way.
        target = max(range(len(tiers)), key=lambda k: (len(fleet.active[k]), -k))
        weights = [1.0 if k == target else 0.0 for k in range(len(tiers))]
        total = 1.0
    cumulative: list[float] = []
    running = 0.0
    for weight in weights:
        running += weight / total
        cumulative.append(running)
    return cumulative


def _record(
    timeline: Timeline,
    now_s: float,
    contexts: Sequence[TierContext],
    recommendation: Recommendation,
    names: Sequence[str],
) -> None:
    timeline.time_s.append(now_s)
    timeline.demand_rps.append(sum(c.signals.request_rate_rps or 0.0 for c in contexts))
    timeline.forecast_rps.append(
        math.nan if recommendation.forecast_rps is None else recommendation.forecast_rps
    )
    for context, name in zip(contexts, names, strict=True):
        timeline.desired[name].append(
            recommendation.replicas.get(name, context.signals.desired_replicas or 0)
        )
        timeline.ready[name].append(context.signals.ready_replicas or 0)
        timeline.waiting[name].append(int(context.signals.waiting or 0))
        p99 = context.signals.ttft_p99_ms
        timeline.ttft_p99_ms[name].append(math.nan if p99 is None else p99)
