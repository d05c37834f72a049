"""Unit constants shared by the planner (GiB = 2^30 bytes, as vLLM logs it)."""

from __future__ import annotations

GIB = float(1 << 30)
GB = 1e9


def to_gib(value_bytes: float) -> float:
    return value_bytes / GIB


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def round_up(value: int, multiple: int) -> int:
    return ceil_div(value, multiple) * multiple
