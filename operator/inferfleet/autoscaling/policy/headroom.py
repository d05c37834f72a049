"""Headroom from the forecaster's measured error, not a flat share (pure).

The predictive target is the forecast demand one lead time ahead times (1 + headroom).
What the headroom has to cover is how far above its forecast demand turns out, which
differs by service: a smooth diurnal curve needs little, a service whose traffic
steps every ten minutes needs more, a small one whose minutes are Poisson noise more
again. So every decision files its forecast with the time it is for; once that minute
has been observed, the ratio of what came to what was forecast updates a running
estimate of a high quantile of that ratio (stochastic approximation in log space:
step up by `q * STEP` when demand beat the estimate, down by `(1 - q) * STEP`
otherwise, which settles where a share `q` of minutes fall below it). The headroom is
that quantile minus one. Until `MIN_SAMPLES` forecasts have been checked, it is blended
with the configured headroom (the prior), and it stays within [0, `MAX_HEADROOM`].

In `fixed` mode (`spec.scaling.headroom` set, or the operator's `headroomMode`), the
configured share is used as it is and the error is still measured, for the record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferfleet.autoscaling.policy.types import ScalingState
from inferfleet.design.policy_config import PolicyConfig

# Share of minutes whose demand should fall within forecast x (1 + headroom).
QUANTILE = 0.8
STEP = 0.02  # log units per checked forecast
MIN_SAMPLES = 60  # an hour of minutes
MAX_HEADROOM = 1.0
# One forecast per this many seconds is filed (the history has one point a minute).
FILE_EVERY_S = 60.0
# At most this many forecasts wait for their minute (the longest lead is minutes).
MAX_DUE = 64


def file_forecast(state: ScalingState, now_s: float, lead_s: float, forecast_rps: float) -> None:
    """Remember the forecast made now for `now_s + lead_s`."""
    due_s = now_s + lead_s
    if state.forecasts_due and due_s - state.forecasts_due[-1][0] < FILE_EVERY_S:
        return
    state.forecasts_due.append((due_s, forecast_rps))
    del state.forecasts_due[:-MAX_DUE]


def check_forecasts(
    state: ScalingState, now_s: float, history: Sequence[float] | None, prior_headroom: float
) -> None:
    """Score every filed forecast whose minute the history now holds; the estimate
    starts from the configured headroom."""
    if not history:
        return
    kept: list[tuple[float, float]] = []
    for due_s, forecast_rps in state.forecasts_due:
        back = math.floor((now_s - due_s) / 60.0)
        if back < 1:
            kept.append((due_s, forecast_rps))
            continue
        if back > len(history):
            continue  # older than the history: drop it
        actual = history[len(history) - back]
        if not math.isfinite(actual) or actual < 0.0 or forecast_rps <= 0.0:
            continue  # a gap in the history, or nothing forecast: nothing to learn
        if state.forecast_error is None:
            state.forecast_error = math.log1p(prior_headroom)
        _update(state, math.log(max(actual, 1e-9) / forecast_rps))
    state.forecasts_due = kept


def _update(state: ScalingState, log_ratio: float) -> None:
    estimate = state.forecast_error or 0.0
    if log_ratio > estimate:
        estimate += STEP * QUANTILE
    else:
        estimate -= STEP * (1.0 - QUANTILE)
    state.forecast_error = estimate
    state.forecast_errors_seen += 1


def measured_headroom(state: ScalingState) -> float | None:
    """The headroom the measured error asks for alone; None before any check."""
    if state.forecast_error is None:
        return None
    return min(MAX_HEADROOM, max(0.0, math.exp(state.forecast_error) - 1.0))


def headroom(config: PolicyConfig, state: ScalingState) -> float:
    """The headroom this decision uses."""
    if config.headroom_mode == "fixed":
        return config.headroom
    measured = measured_headroom(state)
    if measured is None:
        return config.headroom
    trust = min(1.0, state.forecast_errors_seen / MIN_SAMPLES)
    return trust * measured + (1.0 - trust) * config.headroom
