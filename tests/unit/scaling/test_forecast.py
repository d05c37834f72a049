"""Forecaster: methods on shapes whose answer is known, and the guardrails."""

from __future__ import annotations

import math

import pytest

from inferfleet.autoscaling.policy.forecast import (
    DAY_MIN,
    ForecastConfig,
    Method,
    burst_level_rps,
    forecast,
    interrupted_level_rps,
    smooth,
)


def daily_wave(days: float, base: float = 100.0, amplitude: float = 50.0) -> list[float]:
    return [base + amplitude * math.sin(2 * math.pi * m / DAY_MIN) for m in range(int(days * DAY_MIN))]


def test_too_little_history_gives_no_forecast() -> None:
    result = forecast([5.0] * 5, 3.0)
    assert result.rate_rps is None
    assert "data points" in result.reason


def test_sparse_history_gives_no_forecast() -> None:
    history = [5.0 if m % 3 == 0 else math.nan for m in range(60)]  # a third of the minutes
    assert forecast(history, 3.0).rate_rps is None


def test_flat_history_forecasts_its_level() -> None:
    methods: tuple[Method, ...] = ("naive", "trend", "seasonal", "hybrid")
    for method in methods:
        result = forecast([7.0] * 120, 5.0, ForecastConfig(method=method))
        assert result.rate_rps == pytest.approx(7.0)


def test_trend_extrapolates_a_ramp_damped() -> None:
    ramp = [10.0 + 0.5 * m for m in range(60)]  # +0.5 req/s per minute
    result = forecast(ramp, 10.0, ForecastConfig(method="trend"))
    assert result.rate_rps is not None
    last = ramp[-1]
    assert last < result.rate_rps < last + 0.5 * 12  # ahead of the level, not the full slope


def test_seasonal_anticipates_the_morning_ramp_from_yesterday() -> None:
    history = daily_wave(3.0)
    # Now is the trough of a cycle where the curve rises; ask 60 minutes ahead.
    cut = 2 * DAY_MIN + int(0.75 * DAY_MIN)  # 18:00: sin at its minimum, about to rise
    past = history[:cut]
    truth = 100.0 + 50.0 * math.sin(2 * math.pi * (cut - 1 + 60) / DAY_MIN)
    seasonal = forecast(past, 60.0, ForecastConfig(method="seasonal"))
    naive = forecast(past, 60.0, ForecastConfig(method="naive"))
    assert seasonal.rate_rps is not None and naive.rate_rps is not None
    assert abs(seasonal.rate_rps - truth) < abs(naive.rate_rps - truth) / 2
    assert seasonal.method.startswith("seasonal-daily")


def test_a_single_spike_cannot_ask_for_an_unbounded_fleet() -> None:
    history = [10.0] * 59 + [10_000.0]
    result = forecast(history, 5.0)
    assert result.rate_rps is not None
    # Capped at growth_cap x the recent typical level (median of the last hour = 10).
    assert result.rate_rps <= 2.0 * max(10.0, sum(history[-5:]) / 5) + 1e-9
    assert result.capped


def test_growth_cap_bounds_a_seasonal_ratio() -> None:
    history = [1.0] * DAY_MIN + [1.0] * 30
    history[5 : 5 + 20] = [500.0] * 20  # yesterday, just after this time: an outlier
    result = forecast(history, 10.0, ForecastConfig(method="seasonal"))
    assert result.rate_rps is not None
    assert result.rate_rps <= 2.0 * 1.0 + 1e-9


def test_gaps_in_a_reference_day_are_skipped_not_trusted() -> None:
    history = daily_wave(2.0)
    # Wipe yesterday's reference window: the seasonal method must fall back.
    now = len(history)
    for m in range(now - DAY_MIN - 20, now - DAY_MIN + 40):
        history[m] = math.nan
    result = forecast(history, 10.0, ForecastConfig(method="seasonal", max_daily_periods=1))
    assert result.method == "trend"


# --- interruptions: traffic that stops dead comes back all at once -------------------


def test_traffic_that_stops_dead_keeps_its_level_for_the_hold() -> None:
    history = [5.0] * 120 + [0.0] * 10
    result = forecast(history, 2.0)
    assert result.method == "interrupted"
    assert result.rate_rps == pytest.approx(5.0)


def test_a_cliff_that_lands_mid_minute_is_still_a_cliff() -> None:
    history = [5.0] * 120 + [2.0] + [0.0] * 10
    assert interrupted_level_rps(history) == pytest.approx(5.0)


def test_silence_longer_than_the_hold_means_the_demand_has_gone() -> None:
    hold = ForecastConfig().interruption_hold_min
    assert interrupted_level_rps([5.0] * 120 + [0.0] * hold) == pytest.approx(5.0)
    result = forecast([5.0] * 120 + [0.0] * (hold + 1), 2.0)
    assert result.method != "interrupted"
    assert result.rate_rps == pytest.approx(0.0)


def test_a_slide_to_zero_is_a_change_in_demand_not_an_interruption() -> None:
    slide = [5.0 - 0.3 * m for m in range(1, 17)] + [0.0] * 3  # 16 minutes down, then quiet
    history = [5.0] * 120 + [max(0.0, v) for v in slide]
    assert interrupted_level_rps(history) is None


def test_empty_minutes_of_a_quiet_service_are_not_an_interruption() -> None:
    # 0.2 req/s is 12 requests a minute: an empty minute is rare but not a cliff.
    assert interrupted_level_rps([0.2] * 120 + [0.0] * 3) is None


def test_missing_minutes_are_not_silence() -> None:
    assert interrupted_level_rps([5.0] * 120 + [math.nan] * 3) is None
    assert interrupted_level_rps([5.0] * 120 + [0.0, math.nan]) is None


def test_traffic_that_is_back_ends_the_interruption() -> None:
    assert interrupted_level_rps([5.0] * 120 + [0.0] * 10 + [4.0]) is None


# --- bursty traffic -------------------------------------------------------------------------


def bursts(minutes: int, *, quiet_rps: float, burst_rps: float, every: int) -> list[float]:
    """A burst minute every `every` minutes on a quiet floor."""
    return [burst_rps if m % every == 0 else quiet_rps for m in range(minutes)]


def test_bursts_are_held_at_the_rate_most_requests_came_at() -> None:
    # 6 burst minutes at 60 req/s carry 6 x 60 / (6 x 60 + 24 x 5) = 75 % of the requests:
    # the rate that covers 90 % of them is the bursts' own.
    history = bursts(60, quiet_rps=5.0, burst_rps=60.0, every=5)
    assert burst_level_rps(history) == pytest.approx(60.0)
    # Bursts of a third more than the floor, every other minute: bursty (the swings are
    # far beyond Poisson noise at these rates), but the last tenth of the requests came
    # in burst minutes, so the level is the bursts': the quantile is request-weighted.
    mild = bursts(60, quiet_rps=30.0, burst_rps=90.0, every=2)
    assert burst_level_rps(mild) == pytest.approx(90.0)
    # One lone spike in half an hour is not bursty: the forecast's guardrails handle it.
    spike = [5.0] * 60
    spike[45] = 12.0
    assert burst_level_rps(spike) is None


def test_a_level_that_steps_or_slopes_is_not_bursty() -> None:
    # A batch job ended ten minutes ago: a wide spread, one big difference. The forecast
    # follows it; holding the old level for half an hour would waste it.
    stepped = [20.0] * 50 + [4.0] * 10
    assert burst_level_rps(stepped) is None
    ramp = [1.0 + 0.5 * m for m in range(60)]
    assert burst_level_rps(ramp) is None
    assert burst_level_rps(daily_wave(1.0)) is None


def test_poisson_noise_of_a_small_service_is_not_bursty() -> None:
    import random

    draw = random.Random(7)
    # About 3 requests a minute: empty minutes and minutes of 6 are Poisson, not bursts.
    quiet = [sum(draw.random() < 0.05 for _ in range(60)) / 60.0 for _ in range(60)]
    assert burst_level_rps(quiet) is None


def test_the_burst_level_needs_three_known_minutes_and_smooth_ten() -> None:
    # A new service's first burst is held from its third known minute on (two swings),
    # so its fleet does not shed between its first bursts; calling traffic smooth, which
    # speeds the learned capacity, waits for as many minutes as a forecast.
    history = bursts(60, quiet_rps=5.0, burst_rps=60.0, every=5)
    assert burst_level_rps(history[:2]) is None
    assert burst_level_rps(history[:3]) == pytest.approx(60.0)
    holed = [math.nan] * 27 + history[:3]  # 3 of the last 30 known
    assert burst_level_rps(history[:30] + holed) == pytest.approx(60.0)
    fewer = [math.nan] * 28 + history[:2]  # 2 of the last 30 known
    assert burst_level_rps(history[:30] + fewer) is None
    assert burst_level_rps([0.0] * 60) is None
    steady = [20.0] * 60
    assert burst_level_rps(steady[:3]) is None
    assert not smooth(steady[:9])
    assert smooth(steady[:10])


@pytest.mark.parametrize(
    "history",
    [
        [1e308] * 30,
        [1e300, 0.0] * 15,
        [1e154, 0.0] * 15,
        [math.inf, 1.0] * 15,
        [-5.0, 3.0] * 15,
        [math.nan] * 30,
        [1e-300, 0.0] * 15,
        [1e308, 1e308, 0.0] * 10,
    ],
)
def test_hostile_rates_never_raise_and_give_a_real_minute_or_nothing(history: list[float]) -> None:
    # The rates are the service's own metrics: whatever they say, the answer is one of
    # its finite, non-negative minutes (the tier's maxReplicas bounds what it asks) or
    # None; an overflow is not an exception.
    level = burst_level_rps(history)
    assert level is None or (math.isfinite(level) and level in history)
    smooth(history)  # a verdict, never an exception


def test_smooth_is_known_free_of_bursts_and_never_bursty_at_once() -> None:
    # What the learned capacity rises fast on: traffic that is known, has requests, and
    # does not burst. Steps, slopes, the daily wave and Poisson noise are smooth.
    assert smooth([20.0] * 60)
    assert smooth([20.0] * 50 + [4.0] * 10)
    assert smooth(daily_wave(1.0))
    assert not smooth(bursts(60, quiet_rps=5.0, burst_rps=60.0, every=5))
    # Too little known to tell, or no requests at all: not smooth (the slow pace).
    assert not smooth([20.0] * 9)
    assert not smooth([])
    assert not smooth([math.nan] * 21 + [20.0] * 9)
    assert not smooth([0.0] * 60)
    # Whatever the history, bursty and smooth are never both true.
    for history in ([20.0] * 60, bursts(60, quiet_rps=30.0, burst_rps=90.0, every=2), [20.0] * 9, [0.0] * 30):
        assert not (smooth(history) and burst_level_rps(history) is not None)
