"""Cron expressions and time zones of pre-warm windows: syntax and validity. Pure.

The API validates `spec.scaling.prewarm[].schedule` and `.timeZone` with these (the
CLI, the webhook and the operator alike), and the policy (`autoscaling.policy.prewarm_windows`) evaluates
windows with the same parser, so a schedule admitted is a schedule that runs.

Fields take `*`, numbers, ranges `a-b`, lists `a,b`, steps `*/n` and `a-b/n`, and
three-letter month and day names; day-of-week 0 and 7 are Sunday. As in classic cron,
when both day-of-month and day-of-week are restricted a day matches if either does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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


def _field(what: str, text: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int]:
    values: set[int] = set()
    for item in text.lower().split(","):
        step = 1
        part = item
        if "/" in item:
            part, step_text = item.split("/", 1)
            if not _is_number(step_text) or int(step_text) == 0:
                raise CronInvalid(f"{what}: bad step in {text!r}")
            step = int(step_text)
        if part == "*":
            start, stop = low, high
        elif "-" in part:
            first, last = part.split("-", 1)
            start, stop = _value(what, first, names), _value(what, last, names)
        else:
            start = _value(what, part, names)
            stop = high if step > 1 else start
        if not low <= start <= high or not low <= stop <= high or start > stop:
            raise CronInvalid(f"{what} {text!r} is outside {low}-{high}")
        values.update(range(start, stop + 1, step))
    return values


def _is_number(text: str) -> bool:
    # ASCII only: str.isdigit() also accepts other scripts' digits and superscripts.
    return text.isascii() and text.isdigit() and len(text) <= 4


def _value(what: str, text: str, names: dict[str, int] | None) -> int:
    if names is not None and text in names:
        return names[text]
    if not _is_number(text):
        raise CronInvalid(f"{what}: {text!r} is not a number")
    return int(text)


@lru_cache(maxsize=256)
def parse(expression: str) -> CronSchedule:
    fields = expression.split()
    if len(fields) != 5:
        raise CronInvalid(f"{expression!r}: expected 5 fields (minute hour day-of-month month day-of-week)")
    minute, hour, dom, month, dow = fields
    minutes = tuple(sorted(_field("minute", minute, 0, 59)))
    hours = tuple(sorted(_field("hour", hour, 0, 23)))
    days_of_month = frozenset(_field("day-of-month", dom, 1, 31))
    months = frozenset(_field("month", month, 1, 12, _MONTHS))
    days_of_week = {d % 7 for d in _field("day-of-week", dow, 0, 7, _DAYS)}
    return CronSchedule(
        minutes=minutes,
        hours=hours,
        days_of_month=days_of_month,
        months=months,
        days_of_week=frozenset(days_of_week),
        dom_restricted=dom != "*",
        dow_restricted=dow != "*",
    )


@lru_cache(maxsize=64)
def zone(name: str | None) -> dt.tzinfo:
    """The tzinfo of an IANA zone name (None: UTC); raises CronInvalid for an unknown one."""
    if name is None:
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as error:
        raise CronInvalid(
            f"{name!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York)"
        ) from error


def checked_schedule(expression: str) -> str:
    """`expression` unchanged, or ValueError saying what is wrong (pydantic validators)."""
    parse(expression)
    return expression


def checked_zone(name: str | None) -> str | None:
    zone(name)
    return name
