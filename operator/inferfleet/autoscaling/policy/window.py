"""A read-only window onto a sequence, without copying it.

The simulator hands the policy "the minutes completed so far" of a trace's rate
series at every tick, and the forecaster reads only the tail of a two-week history:
both are windows that would otherwise copy up to 20,160 floats per decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload


class SequenceWindow(Sequence[float]):
    """`base[start:stop]` as a view: indexing and slicing read through to `base`."""

    __slots__ = ("_base", "_size", "_start")

    def __init__(self, base: Sequence[float], start: int, stop: int) -> None:
        if not 0 <= start <= stop <= len(base):
            raise ValueError(f"window [{start}, {stop}) outside a sequence of {len(base)}")
        self._base = base
        self._start = start
        self._size = stop - start

    @classmethod
    def head(cls, base: Sequence[float], size: int) -> SequenceWindow:
        return cls(base, 0, size)

    @classmethod
    def tail(cls, base: Sequence[float], size: int) -> SequenceWindow:
        return cls(base, len(base) - size, len(base))

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._size)
            if step == 1:  # the hot path: one slice of the base, no per-item work
                return self._base[self._start + start : self._start + max(start, stop)]
            return [self._base[self._start + i] for i in range(start, stop, step)]
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(index)
        return self._base[self._start + index]
