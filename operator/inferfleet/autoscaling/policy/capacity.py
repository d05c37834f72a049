"""The learned capacity (pure): how far the plan's requests/s per replica sit from what
the engines measure for the traffic they really get."""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferfleet.autoscaling.policy import mix
from inferfleet.autoscaling.policy.reactive import TTFT_WINDOW_S, queue_allowance
from inferfleet.autoscaling.policy.types import TierContext, TierFigures, TierState
from inferfleet.design.policy_config import PolicyConfig

# Learned capacity: the plan's usable RPS is a roofline estimate for the declared
# workload; what the fleet measures says how far off it is for the traffic it gets.
# Little's law gives the measurement: a request holds a slot for busy slots / arrival
# rate seconds. The plan's roofline carries that hold time from the load it was seen
# at to a full replica (decode steps slow as the batch grows and as prefill takes a
# larger share of the GPU), which gives the requests/s that fill a replica to its
# target batch; prefill itself is kept under CAPACITY_PREFILL_TARGET. The correction
# factor follows that estimate quickly down, and up slowly unless the traffic is known
# to be smooth; a breach under load cuts it at once.
# Square-root staffing (Halfin-Whitt): c slots at c - beta*sqrt(c) busy keep the
# chance that an arrival finds them all busy small whatever c is, so big batches run
# fuller than small ones.
CAPACITY_SLOT_BETA = 0.5
CAPACITY_SLOT_TARGET_MIN = 0.5
CAPACITY_PREFILL_TARGET = 0.8
MAX_PREFILL_SHARE = 0.9  # decode always keeps some of the GPU (chunked prefill)
CAPACITY_RISE_S = 600.0
CAPACITY_FALL_S = 120.0
# On smooth traffic (forecast.smooth: ten or more of the last 30 minutes known, with
# requests and free of bursts) the estimate rises as fast as it falls. Little's law
# measures a steady hold time there, and the slow rise held fleets ~10 % too large for
# the quarter hour it took (issue 34: the mis-declared Azure conv hour, 70B). Under
# bursts a lull's measurement says more than the next burst finds, and before ten
# minutes are known nobody can tell: those rise slowly.
CAPACITY_RISE_SMOOTH_S = CAPACITY_FALL_S
CAPACITY_MIN_BATCH = 1.0  # busy slots per replica for a hold time to mean anything
CAPACITY_AVG_S = 180.0  # averaging window of busy slots and arrivals: one scrape is noise
CAPACITY_CUT = 0.9
CAPACITY_MIN = 0.5
CAPACITY_MAX = 4.0
CAPACITY_EVIDENCE_LOAD = 0.7
# Slots this full while carrying no more than the estimate count as a breach.
CAPACITY_SLOT_FULL = 0.8
# With an ITL SLO to keep (spec.scaling.capacitySlos ttftAndItl), prefill may take what
# the decode step at the target batch leaves within it, and never less than this share
# (a replica must still take new requests).
ITL_MIN_PREFILL_SHARE = 0.05


def measured_capacity_rps(
    state: TierState,
    figures: TierFigures,
    ready: int,
    service: mix.ServiceMix = mix.NO_SERVICE_MIX,
    itl_target_ms: float | None = None,
) -> float | None:
    """Requests/s one replica takes at its target batch, from Little's law and the
    roofline; None while there is too little load to measure a hold time. With
    `itl_target_ms`, also what keeps the roofline's decode step within it with the batch
    busy: prefill at most the share the step at that batch leaves, at the batch where
    that budget and the slots give the same rate (a larger batch serves more per step
    but leaves prefill less of the GPU), never one past what leaves prefill
    ITL_MIN_PREFILL_SHARE."""
    running, rate = state.running_avg, state.rate_avg
    if running is None or rate is None or rate <= 0.0 or running / ready < CAPACITY_MIN_BATCH:
        return None
    slots = figures.max_concurrency
    batch_target = max(1.0, slots * CAPACITY_SLOT_TARGET_MIN, slots - CAPACITY_SLOT_BETA * math.sqrt(slots))
    # Prefill seconds per request on one replica: the observed mean prompt once there is
    # evidence, the declared one until then.
    prefill_s = 0.0
    if figures.prefill_tokens_per_s > 0.0:
        prompt = mix.mean_prompt_tokens(state, figures, service)
        if prompt:
            prefill_s = prompt / figures.prefill_tokens_per_s
    seen = _Measured(
        figures, running / rate, running / ready, min(MAX_PREFILL_SHARE, rate / ready * prefill_s), prefill_s
    )
    if itl_target_ms is None or figures.decode_step_per_seq_ms <= 0.0:
        return seen.capacity(batch_target, itl_target_ms)
    step_room_ms = itl_target_ms * (1.0 - ITL_MIN_PREFILL_SHARE) - figures.decode_step_base_ms
    return seen.best_capacity(
        max(1.0, min(batch_target, step_room_ms / figures.decode_step_per_seq_ms)), itl_target_ms
    )


_BATCH_BISECT_STEPS = 30


@dataclass(frozen=True, slots=True)
class _Measured:
    """What Little's law measured on a tier (a request's slot hold time at the batch it
    ran, prefill's share of the GPU then) and the roofline that carries it to a batch."""

    figures: TierFigures
    hold_s: float
    batch_now: float
    share_now: float
    prefill_s: float

    def step_ms(self, batch: float) -> float:
        return self.figures.decode_step_base_ms + self.figures.decode_step_per_seq_ms * batch

    def slot_rate(self, batch: float) -> float:
        """Requests/s that keep `batch` slots busy: hold(x) = base / (1 - x*prefill_s),
        base being the hold at that batch free of prefill's share, and x * hold(x) =
        batch solves to the expression below."""
        hold_s = self.hold_s
        step_now_ms = self.step_ms(self.batch_now)
        if step_now_ms > 0.0:
            hold_s *= self.step_ms(batch) / step_now_ms
        return batch / (hold_s * (1.0 - self.share_now) + batch * self.prefill_s)

    def prefill_rate(self, batch: float, itl_target_ms: float | None) -> float:
        if self.prefill_s <= 0.0:
            return math.inf
        return _prefill_share_limit(self.step_ms(batch), itl_target_ms) / self.prefill_s

    def capacity(self, batch: float, itl_target_ms: float | None) -> float:
        return min(self.slot_rate(batch), self.prefill_rate(batch, itl_target_ms))

    def best_capacity(self, top_batch: float, itl_target_ms: float) -> float:
        """The most requests/s over batches up to `top_batch`: the slots' rate rises with
        the batch and the ITL's prefill budget falls, so the best is where they meet."""
        if self.slot_rate(top_batch) <= self.prefill_rate(top_batch, itl_target_ms):
            return self.capacity(top_batch, itl_target_ms)
        low, high = 1.0, top_batch
        if self.slot_rate(low) >= self.prefill_rate(low, itl_target_ms):
            return self.capacity(low, itl_target_ms)
        for _ in range(_BATCH_BISECT_STEPS):
            middle = (low + high) / 2.0
            if self.slot_rate(middle) < self.prefill_rate(middle, itl_target_ms):
                low = middle
            else:
                high = middle
        return self.capacity(low, itl_target_ms)


def _prefill_share_limit(step_target_ms: float, itl_target_ms: float | None) -> float:
    """The share of the GPU prefill may take: the target, or with an ITL SLO what the
    decode step at the batch leaves within it (a step lasts step / (1 - share)). The
    whole batch busy is the worst case the SLO's 99th percentile must cover."""
    if itl_target_ms is None or step_target_ms <= 0.0:
        return CAPACITY_PREFILL_TARGET
    return min(CAPACITY_PREFILL_TARGET, max(ITL_MIN_PREFILL_SHARE, 1.0 - step_target_ms / itl_target_ms))


def learn_capacity(
    state: TierState,
    tier: TierContext,
    ready: int | None,
    config: PolicyConfig,
    *,
    dt_s: float,
    prior_rps: float,
    now_s: float,
    service: mix.ServiceMix = mix.NO_SERVICE_MIX,
    mix_settling: bool = False,
    smooth_traffic: bool = False,
) -> float:
    """Update and return the tier's capacity factor: how far the engines' measured
    capacity sits from `prior_rps`, the plan's usable RPS rescaled to the observed mix.
    `smooth_traffic`: the service's recent minutes are known to be free of bursts, so a
    higher measurement is followed at CAPACITY_RISE_SMOOTH_S."""
    factor = state.capacity_factor
    signals = tier.signals
    figures = tier.figures
    usable = prior_rps
    if (
        ready is None
        or ready <= 0
        or usable <= 0
        or signals.request_rate_rps is None
        or signals.waiting is None
    ):
        return factor
    weight = min(1.0, dt_s / CAPACITY_AVG_S)
    if signals.running is not None and figures.max_concurrency > 0:
        state.running_avg = mix.average(state.running_avg, signals.running, weight)
        sample = signals.running / (ready * figures.max_concurrency)
        state.slot_use_avg = mix.average(state.slot_use_avg, sample, weight)
    load = signals.request_rate_rps / ready / (usable * factor)
    p99 = signals.ttft_p99_ms
    allowance = queue_allowance(config, usable * factor)
    breach = (
        (p99 is not None and p99 > config.ttft_target_ms)
        or signals.waiting > allowance * ready
        or (state.slot_use_avg is not None and state.slot_use_avg >= CAPACITY_SLOT_FULL)
    )
    state.breach_streak = state.breach_streak + 1 if breach else 0
    if mix_settling and breach:
        # The request mix the engines report is heavier than the plan's and its factor is
        # still on the way down: that explains the breach, and cutting this factor too
        # would count the heavier mix twice (a fleet held ~1.5x too large for the half
        # hour this factor takes to rise back). Escalation and the reactive rules carry
        # the breach meanwhile.
        state.breach_streak = 0
    elif state.breach_streak >= 2 and CAPACITY_EVIDENCE_LOAD <= load <= 1.0:
        # A sustained breach while carrying about what the estimate says a replica can:
        # the estimate is wrong. (Above it, or for one tick, it is a burst: the
        # reactive path acts and the estimate stays.) Once per time a cut can show in
        # the fleet: while the replicas the last cut asked for are starting, or the p99
        # window still remembers the minutes before them, the breach is the evidence
        # already acted on, and cutting again would compound one burst into several
        # cuts (a fleet held too large for the ten minutes the factor takes to rise
        # back).
        if cut_can_show(state, figures, now_s):
            factor = max(CAPACITY_MIN, factor * CAPACITY_CUT)
            state.capacity_cut_s = now_s
        state.breach_streak = 0
    elif not breach and signals.request_rate_rps > 0.0:
        # Only while requests arrive: when arrivals stop (a minute without one), the
        # averages drain at their own pace and their ratio is no hold time (a fleet idle
        # in a traffic gap would learn a capacity it never measured).
        measured = measured_capacity_rps(state, figures, ready, service, config.itl_target_ms)
        if measured is not None:
            goal = min(CAPACITY_MAX, max(CAPACITY_MIN, measured / usable))
            if goal <= factor:
                pace_s = CAPACITY_FALL_S
            else:
                pace_s = CAPACITY_RISE_SMOOTH_S if smooth_traffic else CAPACITY_RISE_S
            factor += (goal - factor) * min(1.0, dt_s / pace_s)
    state.capacity_factor = factor
    return factor


def cut_can_show(state: TierState, figures: TierFigures, now_s: float) -> bool:
    """Whether a breach now is fresh evidence about the capacity estimate: the replicas
    the last cut asked for had time to start and the TTFT window to see them."""
    settle_s = figures.cold_start_s + TTFT_WINDOW_S
    return state.capacity_cut_s is None or now_s - state.capacity_cut_s >= settle_s
