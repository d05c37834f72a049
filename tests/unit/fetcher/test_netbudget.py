"""The socket-level budget under every client library: per response, in all, on time."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from inferfleet.caching.fetcher.netbudget import BudgetSpent, Limits, install, run_bounded

MIB = 1024 * 1024


def send(sock: socket.socket, data: bytes) -> None:
    """The peer's side; it may find the reader gone (the point of the test)."""
    with contextlib.suppress(OSError):
        sock.sendall(data)


def drain(sock: socket.socket, count: int) -> int:
    got = 0
    while got < count:
        piece = sock.recv(64 * 1024)
        if not piece:
            break
        got += len(piece)
    return got


def test_a_response_past_its_cap_stops_the_read_and_says_so() -> None:
    ours, theirs = socket.socketpair()
    threading.Thread(target=send, args=(theirs, b"x" * (4 * MIB)), daemon=True).start()

    def work() -> int:
        ours.sendall(b"GET /")  # a request: what arrives next is its answer
        return drain(ours, 4 * MIB)

    run = run_bounded(work, Limits(deadline_s=10, max_response_bytes=MIB, max_total_bytes=100 * MIB))
    assert isinstance(run.error, BudgetSpent) and run.budget.spent == "response"
    assert run.budget.received_bytes <= MIB + 64 * 1024
    ours.close()
    theirs.close()


def test_small_responses_add_up_to_the_total_cap() -> None:
    ours, theirs = socket.socketpair()

    def server() -> None:
        with contextlib.suppress(OSError):
            while theirs.recv(16):
                theirs.sendall(b"y" * (256 * 1024))

    threading.Thread(target=server, daemon=True).start()

    def work() -> None:
        for _ in range(100):
            ours.sendall(b"GET /")
            drain(ours, 256 * 1024)

    run = run_bounded(work, Limits(deadline_s=10, max_response_bytes=MIB, max_total_bytes=2 * MIB))
    assert run.budget.spent == "total" and isinstance(run.error, BudgetSpent)
    ours.close()
    theirs.close()


def test_a_read_that_would_block_ends_at_the_deadline() -> None:
    ours, theirs = socket.socketpair()
    started = time.monotonic()
    run = run_bounded(
        lambda: ours.recv(10), Limits(deadline_s=0.5, max_response_bytes=MIB, max_total_bytes=MIB)
    )
    assert time.monotonic() - started < 2.0
    assert run.budget.spent == "deadline" and isinstance(run.error, BudgetSpent)
    ours.close()
    theirs.close()


def test_threads_without_a_budget_read_as_before() -> None:
    install()
    ours, theirs = socket.socketpair()
    threading.Thread(target=send, args=(theirs, b"z" * (8 * MIB)), daemon=True).start()
    assert drain(ours, 8 * MIB) == 8 * MIB
    assert ours.gettimeout() is None
    ours.close()
    theirs.close()
