"""Just enough cron to answer one question: is a pre-warm window open at time t?

A window opens at each time the 5-field expression matches (minute hour day-of-month
month day-of-week, in the window's time zone) and stays open for its duration. The
syntax and the zone lookup live in `api.cron`, which the API's validation shares.
"""

from __future__ import annotations

import datetime as dt

from inferfleet.api.cron import CronInvalid, CronSchedule, parse, zone

__all__ = ["CronInvalid", "CronSchedule", "last_start_s", "parse", "window_open"]


def last_start_s(
    expression: str, at_s: float, lookback_s: float, time_zone: str | None = None
) -> float | None:
    """The latest time <= at_s (Unix seconds) the expression fires, if within lookback_s."""
    schedule = parse(expression)
    tz = zone(time_zone)
    local = dt.datetime.fromtimestamp(at_s, tz)
    earliest = at_s - lookback_s
    day = local.date()
    # Walk back day by day; each day's candidate times are few (hours x minutes).
    for _ in range(int(lookback_s // 86_400) + 2):
        if schedule.day_matches(day):
            for hour in reversed(schedule.hours):
                for minute in reversed(schedule.minutes):
                    start = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz).timestamp()
                    if start <= at_s:
                        return start if start >= earliest else None
        day -= dt.timedelta(days=1)
        if dt.datetime(day.year, day.month, day.day, 23, 59, tzinfo=tz).timestamp() < earliest:
            return None
    return None


def window_open(expression: str, duration_s: float, at_s: float, time_zone: str | None = None) -> bool:
    """Whether a window that opens at each firing and lasts duration_s covers at_s."""
    start = last_start_s(expression, at_s, duration_s, time_zone)
    return start is not None and at_s < start + duration_s
