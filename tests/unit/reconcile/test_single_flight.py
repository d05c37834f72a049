"""Passes of one service never overlap, and triggers that may coalesce do not pile up."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import pytest

from inferfleet.controller.passes import run_pass
from inferfleet.controller.single_flight import Coalesced, SingleFlight
from tests.unit.reconcile.fixtures import NAME, NAMESPACE, Control, example

KEY = ("team", "chat")
WAIT_S = 5.0


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


class Blocker:
    """Work that holds its pass until released, recording overlap."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.running = 0
        self.most_at_once = 0
        self.runs: list[str] = []
        self._lock = threading.Lock()

    def work(self, label: str, *, hold: bool = False) -> Callable[[], str]:
        def run() -> str:
            with self._lock:
                self.running += 1
                self.most_at_once = max(self.most_at_once, self.running)
            self.started.set()
            if hold:
                assert self.release.wait(WAIT_S)
            time.sleep(0.002)  # widen any overlap
            with self._lock:
                self.running -= 1
                self.runs.append(label)
            return label

        return run


def in_thread(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_one_pass_at_a_time_per_service_and_a_queued_pass_absorbs_coalescing_triggers() -> None:
    flight = SingleFlight()
    blocker = Blocker()
    first = in_thread(lambda: flight.run(KEY, blocker.work("first", hold=True), may_coalesce=False))
    assert blocker.started.wait(WAIT_S)
    # A child event while the first pass runs: it queues behind it.
    queued = in_thread(lambda: flight.run(KEY, blocker.work("child"), may_coalesce=True))
    wait_until(lambda: flight.queued(KEY) == 1)
    # Another child event, and the resync: the queued pass will read what they would.
    with pytest.raises(Coalesced):
        flight.run(KEY, blocker.work("resync"), may_coalesce=True)
    # The resource's own handler never coalesces (kopf retries its failures): it queues too.
    own = in_thread(lambda: flight.run(KEY, blocker.work("spec change"), may_coalesce=False))
    wait_until(lambda: flight.queued(KEY) == 2)
    # Another service is not held up by this one.
    assert flight.run(("team", "other"), lambda: "other", may_coalesce=True) == "other"
    blocker.release.set()
    for thread in (first, queued, own):
        thread.join(WAIT_S)
    assert sorted(blocker.runs) == ["child", "first", "spec change"]
    assert blocker.runs[0] == "first"
    assert blocker.most_at_once == 1
    assert len(flight) == 0


def test_a_failed_pass_frees_its_service() -> None:
    flight = SingleFlight()

    def fail() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        flight.run(KEY, fail, may_coalesce=False)
    assert len(flight) == 0
    assert flight.run(KEY, lambda: 1, may_coalesce=True) == 1


def test_many_triggers_of_one_service_never_overlap() -> None:
    flight = SingleFlight()
    blocker = Blocker()
    threads = [
        in_thread(lambda i=i: _ignore_coalesced(flight, blocker.work(f"t{i}"), i % 2 == 0)) for i in range(24)
    ]
    for thread in threads:
        thread.join(WAIT_S)
    assert blocker.most_at_once == 1
    assert len(blocker.runs) >= 12  # every non-coalescing trigger ran its own pass
    assert len(flight) == 0


def _ignore_coalesced(flight: SingleFlight, work: Callable[[], str], may_coalesce: bool) -> None:
    with contextlib.suppress(Coalesced):
        flight.run(KEY, work, may_coalesce=may_coalesce)


def test_run_pass_skips_a_coalesced_trigger_without_touching_the_cluster() -> None:
    control = Control()
    control.submit(example())
    reconciler = control.memo["reconciler"]
    blocker = Blocker()
    key = (NAMESPACE, NAME)
    holder = in_thread(
        lambda: reconciler.in_flight.run(key, blocker.work("running", hold=True), may_coalesce=False)
    )
    assert blocker.started.wait(WAIT_S)
    waiter = in_thread(lambda: run_pass(reconciler, NAMESPACE, NAME, None, may_coalesce=True))
    wait_until(lambda: reconciler.in_flight.queued(key) == 1)
    calls_before = len(control.cluster.calls)
    assert run_pass(reconciler, NAMESPACE, NAME, None, may_coalesce=True) is None
    assert len(control.cluster.calls) == calls_before
    blocker.release.set()
    holder.join(WAIT_S)
    waiter.join(WAIT_S)
    # The queued trigger's pass did the work: the service is planned.
    assert control.condition("Planned")["status"] == "True"
