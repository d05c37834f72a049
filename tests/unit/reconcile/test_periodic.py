"""The shared background-loop lifecycle: period, run-first, stop and restart."""

from __future__ import annotations

import threading

from inferfleet.controller.periodic import PeriodicThread


def test_run_first_calls_before_the_first_wait_and_stop_joins() -> None:
    called = threading.Event()
    loop = PeriodicThread("test-run-first", 3600.0, called.set, run_first=True)
    loop.start()
    assert called.wait(5.0), "run_first must not wait a whole period"
    loop.stop()
    assert not loop.running


def test_a_stopped_loop_can_start_again() -> None:
    calls: list[int] = []
    ticked = threading.Event()

    def body() -> None:
        calls.append(1)
        ticked.set()

    loop = PeriodicThread("test-restart", 0.01, body)
    loop.start()
    assert ticked.wait(5.0)
    loop.stop()
    ticked.clear()
    loop.start()
    assert ticked.wait(5.0), "start after stop must run the body again"
    loop.stop()
    assert not loop.running
