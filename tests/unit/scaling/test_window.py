"""SequenceWindow: a view reads through to its base and never past its bounds."""

from __future__ import annotations

import pytest

from inferfleet.autoscaling.policy.window import SequenceWindow


def test_head_and_tail_read_through_without_copying() -> None:
    base = [float(i) for i in range(10)]
    head = SequenceWindow.head(base, 4)
    tail = SequenceWindow.tail(base, 3)
    assert list(head) == [0.0, 1.0, 2.0, 3.0] and len(head) == 4
    assert list(tail) == [7.0, 8.0, 9.0]
    assert head[-1] == 3.0 and tail[0] == 7.0
    base[2] = 42.0  # a view, not a copy
    assert head[2] == 42.0


def test_slices_stay_inside_the_window() -> None:
    window = SequenceWindow([float(i) for i in range(10)], 2, 6)  # 2, 3, 4, 5
    assert list(window[1:3]) == [3.0, 4.0]
    assert list(window[-2:]) == [4.0, 5.0]
    assert list(window[:100]) == [2.0, 3.0, 4.0, 5.0]  # clipped to the window, not the base
    assert list(window[3:1]) == []
    assert list(window[::2]) == [2.0, 4.0]
    assert list(window[::-1]) == [5.0, 4.0, 3.0, 2.0]
    with pytest.raises(IndexError):
        window[4]
    with pytest.raises(IndexError):
        window[-5]
    with pytest.raises(ValueError, match="outside"):
        SequenceWindow([1.0], 0, 2)
