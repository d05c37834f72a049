"""The replay engine: requests through replicas, the autoscaler called every sync period.

The model of a replica (one vLLM engine):
- it runs at most `slots` sequences at once (continuous batching bounded by the
  plan's concurrency, which holds a P95 context per slot; a longer request takes as many
  slots as its context fills); a request that finds every slot of its tier busy waits
  in the tier's FIFO queue;
- prefill is compute bound and serialized on the replica: a request's first token
  comes `input_tokens / prefillTokensPerSecond` after the replica's previous prefill
  (or its own start) ends; TTFT = queueing + prefill wait + prefill (a trace may say a
  request arrives prefilled elsewhere: a prefill/decode split's decode stage,
  simulate.disaggregated); a trace with prefix blocks (Mooncake's `hash_ids`) is
  first replayed through each tier's prefix caches, GPU and host tier
  (simulate.prefix_cache): a cached prefix is not prefilled, and a host-tier hit
  reloads its blocks over the host link before the rest is prefilled;
- decode then takes `(output_tokens - 1)` steps of `base + perSeq x batch` ms, the batch
  being what runs on the replica when the request starts (the planner's roofline);
- a new replica serves only after its cold start; a removed one takes no new work
  and is paid for until its in-flight requests finish;
- a prompt of `--max-model-len` tokens or more is answered HTTP 400 at once (vLLM
  refuses it before the engine sees it: never served, counted only as a 4xx), and an
  output is cut where prompt plus output reach max-model-len (vLLM's default
  `max_tokens`).

How requests reach a tier is what the cluster runs (render.frontdoor). With a front
door: the route's weights pick a pool (one pool when there are no routing shares); the
pool's endpoint picker drops the tiers whose max-model-len the prompt reaches (too long
for all: it reaches a longest tier, whose pods carry no range, and gets vLLM's 400), then
sends it to its own tier in a share pool (the
tightest overflow tier when its own cannot take it or has nothing Ready), or to the tier
whose earliest slot frees first in the one pool; with no pod Ready it holds the request
until one is (released at that moment) or the pool's hold runs out (a failure), and the
held count is the queue the autoscaler wakes a tier on. Its queue has a limit
(flowControl.maxRequests): what it holds with no pod Ready, or what waits beyond the
saturation detector's depth on each Ready pod, and the request past it is refused at once
(shed: 503 with no pod, 429 with busy ones). Without one: the `<service>`
Service spreads requests evenly over Ready pods (kube-proxy), shares unenforced, and a
prompt beyond a tier's max-model-len reaches it and gets vLLM's 400.

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
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from inferfleet.autoscaling.policy import (
    DoorPool,
    FrontDoorSignals,
    PolicyFunction,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierSignals,
)
from inferfleet.autoscaling.policy.capacity import MAX_PREFILL_SHARE
from inferfleet.autoscaling.policy.demand_placement import place
from inferfleet.autoscaling.policy.policy import plan_slot
from inferfleet.autoscaling.policy.readings import TierReadings, TokenQuantiles
from inferfleet.autoscaling.policy.window import SequenceWindow
from inferfleet.autoscaling.simulate import prefix_cache
from inferfleet.autoscaling.simulate.prefix_cache import KvCacheModel
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.design.policy_config import PolicyConfig

# Seconds from an arbitrary origin (time.perf_counter at the I/O edge): the replay reads
# no clock of its own, so it stays pure and replays the same way every time.
Clock = Callable[[], float]
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
    # The replica's KV cache divided among its slots (0: not modelled). A request whose
    # prompt plus output needs more takes as many slots as its context fills.
    kv_tokens_per_slot: float = 0.0
    # The replica's caches for prefixes, replayed when the trace has prefix blocks.
    kv_cache: KvCacheModel | None = None

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


@dataclass(frozen=True, slots=True)
class DoorPoolModel:
    """One InferencePool as rendered (render.frontdoor): its tiers (indexes into
    SimConfig.tiers; its own tier first, then overflow tiers), its route weight (None:
    the only pool) and how long its picker holds a request no pod can take."""

    name: str
    tiers: tuple[int, ...]
    own: int  # how many of `tiers` are its own (the rest are overflow, for long prompts)
    weight: float | None
    hold_s: float
    # The most requests its picker queues (0: no limit), and how many wait in vLLM on each
    # Ready pod before it queues any (its saturation detector's depth).
    queue_limit: int = 0
    saturated_depth: int = 0


@dataclass(frozen=True, slots=True)
class FrontDoorModel:
    """The front door the cluster would run: pools, route weights, holds; and the tiers
    whose nodes already hold the weights (what decide() prefers to wake)."""

    pools: tuple[DoorPoolModel, ...]
    cached_tiers: frozenset[str] = frozenset()


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
    # The rendered front door (None: plain Services; requests spread by Ready capacity,
    # no hold, no length filter before vLLM's own 400).
    front_door: FrontDoorModel | None = None


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
    wall_s: float | None  # how long the replay took, by the caller's clock (None: none given)
    ticks: int
    timeline: Timeline | None
    last_reason: str = ""
    rejected: int = 0  # answered 4xx: prompt at or beyond max-model-len
    # Per request, served with decode steps slower than the ITL SLO (None: not tracked).
    itl_late: np.ndarray | None = None
    # The front door: requests its pickers held while no pod could take them, and those
    # whose hold ran out before a pod was Ready (failures, like the rejected).
    held: int = 0
    held_expired: int = 0
    # Refused at once by a picker whose queue was at its limit (429, or 503 with no pod).
    shed: int = 0
    # Without a front door: requests that found no Ready pod behind the Service (refused).
    unroutable: int = 0
    # (tier, paid from s, paid until s, GPUs per replica) of every replica, for GPU-hours
    # over part of the span.
    replica_spans: tuple[tuple[str, float, float, int], ...] = ()
    # What the policy knew at the end (its state) and the last signals it was given:
    # the drift report of `inferfleet simulate` reads them.
    final_state: ScalingState | None = None
    final_signals: dict[str, TierSignals] = field(default_factory=dict)
    # Per tier, the prompt tokens its caches held (a trace with prefix blocks only).
    prefix_reuse: dict[str, prefix_cache.PrefixReuse] = field(default_factory=dict)


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


def head_rate_rps(trace: Trace, config: SimConfig) -> float:
    """The first five minutes' mean rate of the requests some tier serves: a prompt at or
    beyond every tier's max-model-len is answered 400 by vLLM and never runs, so a
    service that ran before t=0 was not sized for it."""
    head = trace.arrival_s < 300.0
    limits = [tier.max_model_len for tier in config.tiers]
    if limits and all(limits):
        head &= trace.input_tokens < max(limits)
    return float(np.count_nonzero(head)) / min(300.0, max(trace.span_s, 1.0))


def initial_replicas(trace: Trace, config: SimConfig, rate_rps: float | None = None) -> dict[str, int]:
    """The fleet every policy starts from: the first five minutes' mean rate of served
    requests (`rate_rps`, head_rate_rps when not given), with headroom, placed like the
    predictive target (as if the service ran before t=0)."""
    rate = head_rate_rps(trace, config) if rate_rps is None else rate_rps
    policy = config.policy
    slots = [
        plan_slot(_context(tier), policy, index, tier.figures.usable_rps)
        for index, tier in enumerate(config.tiers)
    ]
    demand = rate * (1.0 + policy.headroom)
    return place(demand, demand, slots).replicas


def _elapsed_s(clock: Clock | None, start_s: float | None) -> float | None:
    return None if clock is None or start_s is None else clock() - start_s


def _context(tier: SimTier) -> TierContext:
    return TierContext(tier.figures, TierSignals())


def simulate(
    trace: Trace,
    config: SimConfig,
    policy: PolicyFunction,
    policy_name: str,
    *,
    clock: Clock | None = None,
) -> SimResult:
    """Replay `trace` through a fleet scaled by `policy`; see the module docstring.

    `clock` (the caller's, e.g. time.perf_counter) times the replay for the report's
    wallSeconds; without one `wall_s` is None. Nothing the replay decides reads it.
    """
    # hot loop: one function on purpose. The per-request path (routing, `commit`) runs
    # a million times per replay and reads the fleet's lists through local names and
    # closure cells; split into functions or objects it would pay a call and attribute
    # lookups per request (hack/bench/simspeed.py). The per-tick and one-off steps are
    # named functions below (_warm_start, _observe, _scale, _Pickers, _bill).
    wall_start_s = None if clock is None else clock()
    tiers = config.tiers
    n_tiers = len(tiers)
    names = [tier.figures.name for tier in tiers]
    period = config.policy.sync_period_s
    arrivals: list[float] = trace.arrival_s.tolist()
    inputs: list[int] = trace.input_tokens.tolist()
    prefilled, reloads, reuse = _prompt_work(trace, tiers)
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
    kv_per_slot = [tier.kv_tokens_per_slot for tier in tiers]
    inv_prefill = [1.0 / tier.serving.prefill_tokens_per_s for tier in tiers]
    step_base = [tier.serving.decode_step_base_ms / 1000.0 for tier in tiers]
    step_per_seq = [tier.serving.decode_step_per_seq_ms / 1000.0 for tier in tiers]
    itl_limit = config.itl_slo_ms / 1000.0
    bounds = TTFT_BUCKETS_S
    max_model_len = [tier.max_model_len for tier in tiers]
    # Local names for the counters' lists: the hot loop below indexes them per request.
    counters = _TickCounters.of(config)
    hist_now = counters.hist_now
    started_now = counters.started
    prompt_now = counters.prompt
    generated_now = counters.generated
    rejected_now = counters.rejected
    rejected_total = 0
    prompt_hist_now = counters.prompt_hist
    output_hist_now = counters.output_hist
    token_bounds = [m.bounds for m in counters.meters]
    waiting: list[deque[int]] = [deque() for _ in tiers]
    ttft = array("d", [math.inf]) * n
    # The front door: per pool, the requests its picker holds (FIFO), and per tier when
    # its first replica is (or will be) Ready.
    door = config.front_door
    pickers = _Pickers(door, fleet, max_model_len) if door is not None else None
    door_queues: list[deque[int]] = [deque() for _ in door.pools] if door is not None else []
    pool_weights = _pool_weights(door)
    held_total = 0
    held_expired = 0
    shed = 0
    unroutable = 0
    # Per tier, when each request waiting for a slot starts (what a picker's queue counts;
    # kept only when a picker's queue has a limit, which is what reads it back).
    limited = door is not None and any(pool.queue_limit for pool in door.pools)
    slot_waits = pickers.slot_waits if pickers is not None and limited else None
    itl_ok = 0
    itl_late = bytearray(n)  # 1: served with decode steps slower than the ITL SLO
    served = 0

    def commit(i: int, k: int, horizon_s: float) -> bool:
        """Start request i on tier k if a slot frees by horizon_s; False: it waits."""
        # hot loop: runs once per request; one closure over local lists keeps it fast.
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
        if slot_waits is not None and free_s > arrival:
            heapq.heappush(slot_waits[k], start)
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
        # A host-tier hit reloads its prefix before the rest can be prefilled.
        ready = start if reloads is None else start + reloads[k][i]
        prefill_start = fleet.prefill_free[rid]
        if prefill_start < ready:  # noqa: PLR1730 (a branch is cheaper than max() in the hot loop)
            prefill_start = ready
        prefill_s = prefilled[k][i] * inv_prefill[k]
        first_token = prefill_start + prefill_s
        fleet.prefill_free[rid] = first_token
        if prefill_start > ready:
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
        share = kv_per_slot[k]
        if share > 0.0 and inputs[i] + output > share:
            # A long context fills the KV cache of several slots: the replica takes that
            # many fewer requests until this one ends (its next free entries are spent).
            extra = min(slot_counts[k], math.ceil((inputs[i] + output) / share)) - 1
            if extra > 0:
                debt[rid] += extra
                for _ in range(extra):
                    heapq.heappush(heap, (finish, rid))
        latency = first_token - arrival
        ttft[i] = latency
        hist_now[k][bisect.bisect_left(bounds, latency)] += 1
        if step <= itl_limit:
            itl_ok += 1
        else:
            itl_late[i] = 1
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
    state = _warm_start(trace, config, policy, fleet)
    if pickers is not None:
        pickers.refresh()
    timeline = _new_timeline(names) if config.timeline else None
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
            if door is not None and pickers is not None:
                p = (
                    0
                    if not pool_weights
                    else min(len(pool_weights) - 1, bisect.bisect_right(pool_weights, route_draws[i]))
                )
                pool = door.pools[p]
                fits = pickers.eligible(pool, inputs[i])
                if not fits:
                    # Too long for every tier: the longest tiers' pods carry no range, so
                    # the picker sends it to one and that vLLM answers 400 (and counts it).
                    longest = max(pool.tiers, key=lambda t: (max_model_len[t] or math.inf, -t))
                    rejected_now[longest] += 1
                    rejected_total += 1
                    i += 1
                    continue
                chosen = pickers.pick(pool, fits, arrival)
                if pool.queue_limit and pickers.full(pool, len(door_queues[p]), waiting, arrival):
                    shed += 1  # its queue is at the limit: refused at once, never served
                    i += 1
                    continue
                if chosen is None:
                    # No pod Ready: the picker holds it (released once one is, below).
                    door_queues[p].append(i)
                    held_total += 1
                    i += 1
                    continue
                k = chosen
            elif not weights:
                # No Ready pod behind the Service: the connection is refused at once (no
                # component holds it, no pod reports it: nothing wakes a tier on it).
                unroutable += 1
                i += 1
                continue
            elif n_tiers == 1:
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
        tier_contexts = _observe(counters, tiers, fleet, waiting, now_s=now, period_s=period)
        minutes_done = min(len(minute_rates), int(now // 60.0))
        ctx = ScalingContext(
            now_s=trace.epoch_s + now,
            policy=policy_config,
            tiers=tuple(tier_contexts),
            rate_history_rps=SequenceWindow.head(minute_rates, minutes_done),
            front_door=_door_signals(door, door_queues, names),
        )
        recommendation, state = policy(ctx, state)
        last_reason = recommendation.reason
        ups, downs = _scale(fleet, tiers, recommendation, now)
        scale_ups += ups
        scale_downs += downs
        if timeline is not None:
            _record(timeline, now, tier_contexts, recommendation, names)
        weights = _routing_weights(fleet, tiers, policy_config, now)

        # --- requests still waiting may start before the next tick -----------------------
        tick_s = now + period
        if door is not None and pickers is not None:
            pickers.refresh()
            held_expired += pickers.release_held(door_queues, waiting, arrivals, inputs, tick_s)
        for k in range(n_tiers):
            queue = waiting[k]
            while queue and commit(queue[0], k, tick_s):
                queue.popleft()
        if i >= n and ((not any(waiting) and not any(door_queues)) or now >= deadline_s):
            break

    spans = fleet.spans(end_s)
    gpu_hours, cost, replica_hours = _bill(spans, tiers)
    return SimResult(
        policy=policy_name,
        trace=trace.name,
        requests=n,
        ttft_s=np.frombuffer(ttft, dtype=np.float64),
        itl_ok=itl_ok,
        itl_late=np.frombuffer(itl_late, dtype=np.uint8).astype(bool),
        served=served,
        ttft_slo_ms=config.ttft_slo_ms,
        gpu_hours=gpu_hours,
        cost_usd=cost,
        replica_hours=replica_hours,
        peak_replicas={name: fleet.peak[k] for k, name in enumerate(names)},
        scale_ups=scale_ups,
        scale_downs=scale_downs,
        span_s=end_s,
        wall_s=_elapsed_s(clock, wall_start_s),
        ticks=ticks,
        timeline=timeline,
        last_reason=last_reason,
        rejected=rejected_total,
        held=held_total,
        held_expired=held_expired,
        shed=shed,
        unroutable=unroutable,
        replica_spans=tuple(
            (names[k], start, stop, tiers[k].figures.gpus_per_replica) for k, start, stop in spans
        ),
        final_state=state,
        final_signals={context.name: context.signals for context in tier_contexts},
        prefix_reuse=reuse,
    )


def _prompt_work(
    trace: Trace, tiers: Sequence[SimTier]
) -> tuple[list[list[int]], list[list[float]] | None, dict[str, prefix_cache.PrefixReuse]]:
    """Per tier, the prompt tokens each request's engine prefills and (None: none) the
    seconds its host-tier hit takes to reload; and each tier's cache totals. A trace that
    says what each engine prefills wins; prefix blocks are replayed through each tier's
    caches (prefix_cache: one replica's caches, every request); else every prompt token
    is prefilled."""
    if trace.prefill_tokens is not None:
        given: list[int] = trace.prefill_tokens.tolist()
        return [given] * len(tiers), None, {}
    inputs: list[int] = trace.input_tokens.tolist()
    if trace.prefix_blocks is None or all(tier.kv_cache is None for tier in tiers):
        return [inputs] * len(tiers), None, {}
    prefilled: list[list[int]] = []
    reloads: list[list[float]] = []
    reuse: dict[str, prefix_cache.PrefixReuse] = {}
    for tier in tiers:
        if tier.kv_cache is None:
            prefilled.append(inputs)
            reloads.append([0.0] * len(inputs))
            continue
        replayed = prefix_cache.replay(trace.prefix_blocks, trace.input_tokens, tier.kv_cache)
        reuse[tier.figures.name] = replayed
        prefilled.append(replayed.prefilled.tolist())
        reloads.append(replayed.reload_s.tolist())
    return prefilled, reloads, reuse


class _Pickers:
    """The front door's endpoint pickers: which tiers a prompt fits, which Ready tier
    takes it, and the held requests a tier turning Ready releases."""

    def __init__(self, door: FrontDoorModel, fleet: _Fleet, max_model_len: list[int]) -> None:
        self.door = door
        self.fleet = fleet
        self.max_model_len = max_model_len
        self.first_ready = [math.inf] * len(max_model_len)  # per tier: its first Ready time
        self.ready_times: list[list[float]] = [[] for _ in max_model_len]  # per tier, sorted
        self.slot_waits: list[list[float]] = [[] for _ in max_model_len]  # heaps of start times

    def refresh(self) -> None:
        fleet = self.fleet
        for k in range(len(self.first_ready)):
            self.ready_times[k] = sorted(fleet.ready_at[r] for r in fleet.active[k])
            self.first_ready[k] = self.ready_times[k][0] if self.ready_times[k] else math.inf

    def full(self, pool: DoorPoolModel, held: int, waiting: Sequence[deque[int]], now_s: float) -> bool:
        """Whether the pool's picker queue is at its limit at `now_s`: what it holds, plus
        what waits for a slot on its tiers beyond the detector's depth per Ready pod (below
        that depth the pool is not saturated and nothing queues in the picker)."""
        backlog = held
        for k in pool.tiers:
            starts = self.slot_waits[k]
            while starts and starts[0] <= now_s:
                heapq.heappop(starts)
            backlog += len(waiting[k]) + len(starts)
        if backlog < pool.queue_limit:
            return False
        ready = sum(bisect.bisect_right(self.ready_times[k], now_s) for k in pool.tiers)
        return backlog >= pool.queue_limit + pool.saturated_depth * ready

    def eligible(self, pool: DoorPoolModel, prompt_tokens: int) -> list[int]:
        """The pool's tiers whose max-model-len the prompt fits (the picker's filter)."""
        max_model_len = self.max_model_len
        return [k for k in pool.tiers if not max_model_len[k] or prompt_tokens < max_model_len[k]]

    def pick(self, pool: DoorPoolModel, tiers_ok: list[int], by_s: float) -> int | None:
        """The tier the picker sends a request to, among those Ready by `by_s`: in a share
        pool its own tier first, then the tightest overflow tier; in the one pool the tier
        whose earliest slot frees first (load), the tightest range on a tie."""
        first_ready = self.first_ready
        max_model_len = self.max_model_len
        ready = [k for k in tiers_ok if first_ready[k] <= by_s]
        if not ready:
            return None
        if pool.weight is not None:
            return ready[0]
        heaps = self.fleet.slot_heaps
        return min(
            ready,
            key=lambda k: (
                max(heaps[k][0][0], first_ready[k]) if heaps[k] else math.inf,
                max_model_len[k] or math.inf,
                k,
            ),
        )

    def release_held(
        self,
        door_queues: list[deque[int]],
        waiting: Sequence[deque[int]],
        arrivals: Sequence[float],
        inputs: Sequence[int],
        tick_s: float,
    ) -> int:
        """Move the held requests a Ready tier can take by `tick_s` to its queue; returns
        how many ran out of hold time first."""
        expired = 0
        for p, queue in enumerate(door_queues):
            pool = self.door.pools[p]
            kept: deque[int] = deque()
            for held in queue:
                deadline = arrivals[held] + pool.hold_s
                chosen = self.pick(pool, self.eligible(pool, inputs[held]), min(tick_s, deadline))
                if chosen is not None:
                    # Released when the pod turns Ready: vLLM starts it from then on.
                    waiting[chosen].append(held)
                elif deadline <= tick_s:
                    expired += 1  # the hold ran out before any pod was Ready
                else:
                    kept.append(held)
            door_queues[p] = kept
        return expired


def _pool_weights(door: FrontDoorModel | None) -> list[float]:
    """Cumulative route weights of the front door's pools (empty: one pool, no draw)."""
    pool_weights: list[float] = []
    if door is not None and len(door.pools) > 1:
        total_weight = sum(pool.weight or 0.0 for pool in door.pools) or 1.0
        running_weight = 0.0
        for pool in door.pools:
            running_weight += (pool.weight or 0.0) / total_weight
            pool_weights.append(running_weight)
    return pool_weights


def _warm_start(
    trace: Trace, config: SimConfig, policy: PolicyFunction, fleet: _Fleet
) -> ScalingState | None:
    """The common initial fleet, Ready at t=0, sized by one warm-up decision on the first
    five minutes' rate; returns the policy's state after it."""
    warm_rate = head_rate_rps(trace, config)
    start_fleet = initial_replicas(trace, config, warm_rate)
    warm_ctx = ScalingContext(
        now_s=trace.epoch_s,
        policy=config.policy,
        tiers=tuple(
            TierContext(
                tier.figures,
                TierSignals(
                    ready_replicas=start_fleet[tier.figures.name],
                    desired_replicas=start_fleet[tier.figures.name],
                    load=TierReadings(waiting=0.0, request_rate_rps=warm_rate if index == 0 else 0.0),
                ),
            )
            for index, tier in enumerate(config.tiers)
        ),
        rate_history_rps=None,
    )
    first, state = policy(warm_ctx, None)
    for k, tier in enumerate(config.tiers):
        name = tier.figures.name
        for _ in range(first.replicas.get(name, start_fleet[name])):
            fleet.add(k, 0.0, 0.0)
    return state


def _new_timeline(names: Sequence[str]) -> Timeline:
    timeline = Timeline()
    for name in names:
        timeline.desired[name] = []
        timeline.ready[name] = []
        timeline.waiting[name] = []
        timeline.ttft_p99_ms[name] = []
    return timeline


@dataclass
class _TickCounters:
    """What each tier's engines counted since the last tick (the hot loop adds to these
    lists in place) and the windows the autoscaler's signals are read over."""

    hist_now: list[list[int]]  # TTFT histogram of this tick
    hist_window: list[deque[list[int]]]  # the last TTFT window's histograms
    meters: list[_Meters]
    started: list[int]
    prompt: list[int]
    generated: list[int]
    rejected: list[int]
    prompt_hist: list[list[int]]
    output_hist: list[list[int]]

    @classmethod
    def of(cls, config: SimConfig) -> _TickCounters:
        tiers = config.tiers
        period = config.policy.sync_period_s
        n_buckets = len(TTFT_BUCKETS_S) + 1
        window_ticks = max(1, round(config.ttft_window_s / period))
        rate_ticks = max(1, round(config.rate_window_s / period))
        meters = [
            _Meters(
                token_buckets(tier.max_model_len), rate_ticks, max(1, round(config.mix_window_s / period))
            )
            for tier in tiers
        ]
        return cls(
            hist_now=[[0] * n_buckets for _ in tiers],
            hist_window=[deque(maxlen=window_ticks) for _ in tiers],
            meters=meters,
            started=[0] * len(tiers),
            prompt=[0] * len(tiers),
            generated=[0] * len(tiers),
            rejected=[0] * len(tiers),
            prompt_hist=[m.prompt_hist_now for m in meters],
            output_hist=[m.output_hist_now for m in meters],
        )


def _observe(
    counters: _TickCounters,
    tiers: Sequence[SimTier],
    fleet: _Fleet,
    waiting: Sequence[deque[int]],
    *,
    now_s: float,
    period_s: float,
) -> list[TierContext]:
    """Close the tick's counts into the windows and read each tier's signals as the
    autoscaler sees them in Prometheus; the counters start the next tick at zero."""
    bounds = TTFT_BUCKETS_S
    n_buckets = len(bounds) + 1
    tier_contexts = []
    for k, tier in enumerate(tiers):
        counters.hist_window[k].append(counters.hist_now[k])
        counters.hist_now[k] = [0] * n_buckets
        meter = counters.meters[k]
        meter.tick(counters.started[k], counters.prompt[k], counters.generated[k], counters.rejected[k])
        counters.started[k] = counters.prompt[k] = counters.generated[k] = counters.rejected[k] = 0
        counters.prompt_hist[k] = meter.prompt_hist_now
        counters.output_hist[k] = meter.output_hist_now
        merged = [sum(column) for column in zip(*counters.hist_window[k], strict=True)]
        p99 = histogram_quantile(0.99, merged, bounds)
        window_s = len(meter.rates) * period_s
        started, prompt_tokens, generated, rejected = meter.totals()
        running, queued = fleet.in_flight(k, now_s)
        tier_contexts.append(
            TierContext(
                tier.figures,
                TierSignals(
                    ready_replicas=fleet.ready_count(k, now_s),
                    desired_replicas=len(fleet.active[k]),
                    load=TierReadings(
                        waiting=float(len(waiting[k]) + queued),
                        running=float(running),
                        ttft_p99_s=p99,
                        request_rate_rps=started / window_s,
                        prompt_tokens_rps=prompt_tokens / window_s,
                        generation_tokens_rps=generated / window_s,
                        rejected_rps=rejected / window_s,
                        prompt_tokens=meter.quantiles(meter.prompt_hist),
                        generation_tokens=meter.quantiles(meter.output_hist),
                    ),
                ),
            )
        )
    return tier_contexts


def _door_signals(
    door: FrontDoorModel | None, door_queues: Sequence[deque[int]], names: Sequence[str]
) -> FrontDoorSignals | None:
    """The requests each pool's picker holds, as the autoscaler reads them."""
    if door is None:
        return None
    return FrontDoorSignals(
        tuple(
            DoorPool(tuple(names[k] for k in pool.tiers), float(len(door_queues[p])))
            for p, pool in enumerate(door.pools)
        ),
        door.cached_tiers,
    )


def _scale(
    fleet: _Fleet, tiers: Sequence[SimTier], recommendation: Recommendation, now_s: float
) -> tuple[int, int]:
    """Apply a decision to the fleet: new replicas Ready after their cold start, removed
    ones drained; returns (tiers scaled up, tiers scaled down)."""
    ups = downs = 0
    for k, tier in enumerate(tiers):
        current = len(fleet.active[k])
        target = recommendation.replicas.get(tier.figures.name, current)
        if target > current:
            ups += 1
            ready_at = now_s + tier.figures.cold_start_s
            for _ in range(target - current):
                fleet.add(k, now_s, ready_at)
        elif target < current:
            downs += 1
            fleet.remove(k, now_s, current - target)
    return ups, downs


def _bill(
    spans: Sequence[tuple[int, float, float]], tiers: Sequence[SimTier]
) -> tuple[float, float, dict[str, float]]:
    """(GPU hours, cost in USD, replica hours per tier) of the replicas' paid spans."""
    gpu_hours = 0.0
    cost = 0.0
    replica_hours: dict[str, float] = {}
    for k, tier in enumerate(tiers):
        seconds = sum(max(0.0, stop - start) for tier_index, start, stop in spans if tier_index == k)
        replica_hours[tier.figures.name] = seconds / 3600.0
        gpu = seconds / 3600.0 * tier.figures.gpus_per_replica
        gpu_hours += gpu
        cost += gpu * tier.cost_per_gpu_hour
    return gpu_hours, cost, replica_hours


def _routing_weights(
    fleet: _Fleet, tiers: Sequence[SimTier], policy: PolicyConfig, now_s: float
) -> list[float]:
    """Cumulative routing probabilities per tier without a front door: the `<service>`
    Service spreads connections evenly over every Ready serving pod (kube-proxy), so
    each tier gets its share of the Ready pods; routing shares are not enforced (only
    the front door's route weights do that). Tiers with nothing Ready get nothing."""
    del policy  # shares need the front door; kept in the signature for the callers
    ready = [fleet.ready_count(k, now_s) for k in range(len(tiers))]
    weights = [float(count) for count in ready]
    total = sum(weights)
    if total <= 0.0:
        return []  # the Service has no endpoint: a connection is refused
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
