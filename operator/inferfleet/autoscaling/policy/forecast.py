"""Request-rate forecaster: the rate one cold start ahead, from a per-minute history.

A replica asked for now serves only after its cold start (2-5 minutes for LLM
serving), so the predictive target needs the demand at
`now + lead time`, not the demand now. Methods:

- `naive`: the last minute. The yardstick every method must beat.
- `trend`: recent level (mean of the last few minutes) plus a damped trend taken
  from the medians of the two halves of the last half hour. Needs 10 minutes.
- `seasonal`: the recent level times how traffic moved over the same stretch of
  time one day (and one week) earlier: ratio of the mean around `t - P + h` to the
  mean just before `t - P`, median over the periods available. Needs a full period
  of history with coverage; falls back to `trend` otherwise.
- `hybrid` (the default): the larger of `seasonal` and `trend`. Under-forecasting
  costs SLO violations during a cold start, over-forecasting costs a few replica
  minutes that the slow scale-down returns, so the forecast errs upwards.

Bursty traffic (`burst_level_rps`): when the minutes swing far more than Poisson noise
explains (bursts that end before a replica could start), no forecast of the next minutes
follows them, and the requests are in the bursts: a fleet sized at the forecast level
misses most of them and chases each burst a cold start late. The level to hold is then
the rate at or below which BURST_QUANTILE of the last half hour's requests arrived.

Guardrails, whatever the method: too few data points or too little coverage gives
no forecast (the caller falls back to the reactive signals), and the forecast never
exceeds `growth_cap` times the recent typical level, so one spike cannot ask for an
unbounded fleet. Traffic that falls off a cliff to nothing (an upstream outage, a
router change) is forecast at its level from before for up to half an hour, since it
comes back all at once and a fleet scaled to its warm minimum meets it a cold start
late; a slide to zero, or silence longer than the hold, is a real change in demand.
`hack/bench/forecast.py` measures the methods on the traces; its
numbers chose the default (docs/benchmarks/forecast.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from inferfleet.autoscaling.policy.window import SequenceWindow

Method = Literal["naive", "trend", "seasonal", "hybrid"]
Seasonality = Literal["auto", "daily", "weekly", "none"]

DAY_MIN = 1440
WEEK_MIN = 7 * DAY_MIN


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    method: Method = "hybrid"
    seasonality: Seasonality = "auto"
    level_window_min: int = 5
    trend_window_min: int = 30
    # A trend is extrapolated with this damping: a half-hour slope rarely lasts a whole lead time.
    trend_damping: float = 0.5
    # Seasonal reference: mean over a window this wide around the same time one period ago.
    seasonal_window_min: int = 10
    max_daily_periods: int = 7
    max_weekly_periods: int = 2
    min_points: int = 10
    min_coverage: float = 0.8
    # The forecast never exceeds this multiple of the recent typical level (last-hour median).
    growth_cap: float = 2.0
    history_window_min: int = 14 * DAY_MIN
    # Traffic that falls off a cliff to (almost) nothing is an interruption (an upstream
    # outage, a router or DNS change) more often than a change in demand, and it comes
    # back all at once: the level from before the cliff is kept for this long.
    interruption_hold_min: int = 30


@dataclass(frozen=True, slots=True)
class Forecast:
    rate_rps: float | None  # None: guardrails refused (too little or too sparse history)
    method: str
    level_rps: float | None
    capped: bool = False
    reason: str = ""


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v) and v >= 0.0]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def _slice(history: Sequence[float], start: int, stop: int) -> list[float]:
    """Finite values of history[start:stop], clipped to the available range."""
    start = max(0, start)
    stop = min(len(history), stop)
    if stop <= start:
        return []
    return _finite(history[start:stop])


def level_rps(history: Sequence[float], config: ForecastConfig = ForecastConfig()) -> float | None:
    recent = _slice(history, len(history) - config.level_window_min, len(history))
    return _mean(recent) if recent else None


def _trend(history: Sequence[float], horizon_min: float, config: ForecastConfig) -> float | None:
    n = len(history)
    level_values = _slice(history, n - config.level_window_min, n)
    if not level_values:
        return None
    level = _mean(level_values)
    half = config.trend_window_min // 2
    newer = _slice(history, n - half, n)
    older = _slice(history, n - 2 * half, n - half)
    if len(newer) < half * config.min_coverage or len(older) < half * config.min_coverage:
        return level
    slope_per_min = (_median(newer) - _median(older)) / half
    # The level is the mean of the last `level_window_min` minutes, centred that far back.
    ahead_min = horizon_min + (len(level_values) - 1) / 2.0
    return max(0.0, level + config.trend_damping * slope_per_min * ahead_min)


def _seasonal_ratios(
    history: Sequence[float], horizon_min: float, period_min: int, periods: int, config: ForecastConfig
) -> list[float]:
    """How traffic moved from just before `t - kP` to around `t - kP + h`, for k = 1..periods."""
    n = len(history)
    half = config.seasonal_window_min // 2
    ratios: list[float] = []
    h = round(horizon_min)
    for k in range(1, periods + 1):
        then = n - k * period_min
        if then - config.seasonal_window_min < 0:
            break
        before = _slice(history, then - config.seasonal_window_min, then)
        after = _slice(history, then + h - half, then + h + half)
        enough = config.min_coverage * config.seasonal_window_min
        if len(before) < enough or len(after) < enough:
            continue  # a gap in that day's data: skip it rather than trust it
        base = _mean(before)
        if base <= 0.0:
            continue
        ratios.append(_mean(after) / base)
    return ratios


def _seasonal(
    history: Sequence[float], horizon_min: float, config: ForecastConfig
) -> tuple[float | None, str]:
    level = level_rps(history, config)
    if level is None:
        return None, "seasonal"
    ratios: list[float] = []
    label = "seasonal"
    if config.seasonality in ("auto", "weekly"):
        ratios = _seasonal_ratios(history, horizon_min, WEEK_MIN, config.max_weekly_periods, config)
        label = "seasonal-weekly"
    if not ratios and config.seasonality in ("auto", "daily"):
        ratios = _seasonal_ratios(history, horizon_min, DAY_MIN, config.max_daily_periods, config)
        label = "seasonal-daily"
    if not ratios:
        return None, "seasonal"
    ratio = min(config.growth_cap, max(1.0 / config.growth_cap, _median(ratios)))
    return level * ratio, label


# A minute under this share of the median of the hold plus an hour counts as silent;
# the hour before the silence must have carried at least this many requests a minute,
# so a cliff is not Poisson noise
# (at 20 expected requests a minute, an empty minute has probability e^-20).
INTERRUPTION_SHARE = 0.1
INTERRUPTION_MIN_REQUESTS_PER_MIN = 20.0
INTERRUPTION_CLIFF_SHARE = 0.5


def interrupted_level_rps(
    history: Sequence[float], config: ForecastConfig = ForecastConfig()
) -> float | None:
    """The level from before a cliff when the last minutes are silent, else None."""
    n = len(history)
    hold = config.interruption_hold_min
    last = history[n - 1] if n else math.nan
    recent = _slice(history, n - hold - 1, n)
    # Cheap test first (this runs every tick): a busy last minute is no cliff, and
    # neither is a hold's worth of silence.
    if not math.isfinite(last) or not recent or last >= INTERRUPTION_SHARE * max(recent):
        return None
    reference = _slice(history, n - hold - 60, n)
    if len(reference) < 60:
        return None
    threshold = INTERRUPTION_SHARE * _median(reference)
    silent_min = 0
    while silent_min < min(n, hold + 1):
        value = history[n - 1 - silent_min]
        if not math.isfinite(value) or value >= threshold:
            break
        silent_min += 1
    if silent_min == 0 or silent_min > hold:
        return None  # no cliff, or silent for longer than the hold: the demand has gone
    before = _slice(history, n - silent_min - 60, n - silent_min)
    if len(before) < 30:
        return None
    pre = _median(before)
    if pre * 60.0 < INTERRUPTION_MIN_REQUESTS_PER_MIN:
        return None
    # A cliff, not a slide: one of the two minutes before the silence still carried
    # at least half the level (the fall may land mid-minute).
    if max(before[-2:]) < INTERRUPTION_CLIFF_SHARE * pre:
        return None
    return pre


# Bursty: the minute counts swing from one minute to the next, beyond Poisson noise, by
# at least this share of their mean. Successive differences, not the spread around the
# mean: a level that stepped down (a batch job ended) or a diurnal slope has a wide
# spread and small differences, and the forecast follows it. (Over half an hour a smooth
# curve stays near 0.1; the Azure 2023 code hour, bursts of 1-2 minutes every few
# minutes, is near 1.)
BURSTY_CV = 0.5
BURST_WINDOW_MIN = 30
# Known minutes the burst level needs: three, two swings from one minute to the next.
# Calling traffic bursty on little evidence costs a few replica-minutes (the level is a
# real minute's rate); waiting for more lets a new service shed its fleet between its
# first bursts (the Azure 2023 code hour on an 8B model: 13 L4 down to 9 at minute 9, as
# its second burst came). Smooth needs as many known minutes as a forecast: it speeds the
# learned capacity.
BURST_MIN_POINTS = 3
SMOOTH_MIN_POINTS = ForecastConfig().min_points
# The rate that covers this share of the window's requests (request-weighted): chosen on
# the Azure 2023 code hour (0.9 and 0.95 gave the same verdicts, 0.8 fewer), the
# smooth traces never reach BURSTY_CV.
BURST_QUANTILE = 0.9


def _recent_counts(history: Sequence[float], min_points: int) -> list[float] | None:
    """Requests per minute over the last BURST_WINDOW_MIN minutes; None when fewer than
    `min_points` are known or none of them had a request (nothing to judge)."""
    recent = _slice(history, len(history) - BURST_WINDOW_MIN, len(history))
    if len(recent) < min_points:
        return None
    counts = [rate * 60.0 for rate in recent]
    return counts if _mean(counts) > 0.0 else None


def _swings(counts: Sequence[float]) -> bool:
    """Whether minute counts swing from one minute to the next by BURSTY_CV of their
    mean, beyond Poisson noise. Half the mean squared successive difference estimates the
    minute-to-minute variance whatever the level does; Poisson noise alone has a
    variance equal to the mean (a small service's quiet minutes are not bursts). A
    product, not a power: a float power raises on overflow, a product is inf."""
    mean = _mean(counts)
    swing = _mean([(b - a) * (b - a) for a, b in itertools.pairwise(counts)]) / 2.0
    return math.sqrt(max(0.0, swing - mean)) >= BURSTY_CV * mean


def smooth(history: Sequence[float]) -> bool:
    """Whether the last BURST_WINDOW_MIN minutes are known to be smooth: at least
    SMOOTH_MIN_POINTS known minutes with requests, and no bursts among them. False while
    too little is known to tell."""
    counts = _recent_counts(history, SMOOTH_MIN_POINTS)
    return counts is not None and not _swings(counts)


def burst_level_rps(history: Sequence[float]) -> float | None:
    """The rate BURST_QUANTILE of the last BURST_WINDOW_MIN minutes' requests arrived at
    or below, when those minutes are bursty; None when they are not (or fewer than
    BURST_MIN_POINTS are known). The level is a real minute's rate: the history is the
    service's own, so a hostile value can raise only its own fleet, within its
    maxReplicas."""
    counts = _recent_counts(history, BURST_MIN_POINTS)
    if counts is None or not _swings(counts):
        return None
    total = sum(counts)
    covered = 0.0
    for count in sorted(counts):
        covered += count
        if covered >= BURST_QUANTILE * total:
            return count / 60.0
    return max(counts) / 60.0


def forecast(
    history: Sequence[float], horizon_min: float, config: ForecastConfig = ForecastConfig()
) -> Forecast:
    """Predict the request rate `horizon_min` minutes after the last complete minute."""
    if len(history) > config.history_window_min:
        # A view, not a copy: only the tail is read below, so slicing lazily is cheap.
        history = SequenceWindow.tail(history, config.history_window_min)
    n = len(history)
    recent = _slice(history, n - config.trend_window_min, n)
    if len(recent) < config.min_points or len(recent) < config.min_coverage * min(n, config.trend_window_min):
        return Forecast(None, config.method, None, reason=f"{len(recent)} data points in the last half hour")
    level = _mean(recent[-config.level_window_min :])

    method: str = config.method
    value: float | None
    if config.method == "naive":
        value = recent[-1]
    elif config.method == "trend":
        value = _trend(history, horizon_min, config)
    else:
        seasonal, label = (
            (None, "trend") if config.seasonality == "none" else _seasonal(history, horizon_min, config)
        )
        trend = _trend(history, horizon_min, config)
        if seasonal is None:
            value, method = trend, "trend"
        elif config.method == "seasonal":
            value, method = seasonal, label
        else:
            value = max(seasonal, trend if trend is not None else 0.0)
            method = f"hybrid({label})"
    if value is None:
        return Forecast(None, method, level, reason="no level")
    held = interrupted_level_rps(history, config)
    if held is not None and held > value:
        # A median of real minutes, not a spike: the growth cap does not apply.
        return Forecast(held, "interrupted", level, reason="traffic stopped dead: level from before kept")

    hour = _slice(history, n - 60, n)
    typical = _median(hour) if hour else level
    # Medians, so one spike minute neither raises the cap nor passes under it.
    cap = config.growth_cap * max(typical, _median(recent[-config.level_window_min :]))
    capped = value > cap
    return Forecast(
        min(value, cap), method, level, capped=capped, reason="capped by growth guardrail" if capped else ""
    )
