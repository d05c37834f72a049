"""Just enough cron to answer one question: is a pre-warm window open at time t?

A window opens at each time the 5-field expression matches (minute hour day-of-month
month day-of-week, in the window's time zone) and stays open for its duration. Fields
take `*`, numbers, ranges `a-b`, lists `a,b`, steps `*/n` and `a-b/n`, and three-letter
month and day names; day-of-week 0 and 7 are Sunday. As in classic cron, when both
day-of-month and day-of-week are restricted a day matches if either does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
_DAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


class CronInvalid(ValueError):
    """The expression cannot be parsed."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    minutes: tuple[int, ...]  # sorted
    hours: tuple[int, ...]  # sorted
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday
    dom_restricted: bool
    dow_restricted: bool

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days_of_month
        dow = (day.isoweekday() % 7) in self.days_of_week
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow


def _field(text: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int]:
    values: set[int] = set()
    for item in text.lower().split(","):
        step = 1
        part = item
        if "/" in item:
            part, step_text = item.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronInvalid(f"bad step in {text!r}")
            step = int(step_text)
        if part == "*":
            start, stop = low, high
        elif "-" in part:
            first, last = part.split("-", 1)
            start, stop = _value(first, names), _value(last, names)
        else:
            start = _value(part, names)
            stop = high if step > 1 else start
        if not low <= start <= high or not low <= stop <= high or start > stop:
            raise CronInvalid(f"{text!r} is outside {low}-{high}")
        values.update(range(start, stop + 1, step))
    return values


def _value(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text in names:
        return names[text]
    if not text.isdigit():
        raise CronInvalid(f"{text!r} is not a number")
    return int(text)


@lru_cache(maxsize=256)
def parse(expression: str) -> CronSchedule:
    fields = expression.split()
    if len(fields) != 5:
        raise CronInvalid(f"{expression!r}: expected 5 fields")
    minute, hour, dom, month, dow = fields
    days_of_week = {d % 7 for d in _field(dow, 0, 7, _DAYS)}
    return CronSchedule(
        minutes=tuple(sorted(_field(minute, 0, 59))),
        hours=tuple(sorted(_field(hour, 0, 23))),
        days_of_month=frozenset(_field(dom, 1, 31)),
        months=frozenset(_field(month, 1, 12, _MONTHS)),
        days_of_week=frozenset(days_of_week),
        dom_restricted=dom != "*",
        dow_restricted=dow != "*",
    )


@lru_cache(maxsize=64)
def _zone(name: str | None) -> dt.tzinfo:
    return dt.UTC if name is None else ZoneInfo(name)


def last_start_s(
    expression: str, at_s: float, lookback_s: float, time_zone: str | None = None
) -> float | None:
    """The latest time <= at_s (Unix seconds) the expression fires, if within lookback_s."""
    schedule = parse(expression)
    zone = _zone(time_zone)
    local = dt.datetime.fromtimestamp(at_s, zone)
    earliest = at_s - lookback_s
    day = local.date()
    # Walk back day by day; each day's candidate times are few (hours x minutes).
    for _ in range(int(lookback_s // 86_400) + 2):
        if schedule.day_matches(day):
            for hour in reversed(schedule.hours):
                for minute in reversed(schedule.minutes):
                    start = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone).timestamp()
                    if start <= at_s:
                        return start if start >= earliest else None
        day -= dt.timedelta(days=1)
        if dt.datetime(day.year, day.month, day.day, 23, 59, tzinfo=zone).timestamp() < earliest:
            return None
    return None


def window_open(expression: str, duration_s: float, at_s: float, time_zone: str | None = None) -> bool:
    """Whether a window that opens at each firing and lasts duration_s covers at_s."""
    start = last_start_s(expression, at_s, duration_s, time_zone)
    return start is not None and at_s < start + duration_s
