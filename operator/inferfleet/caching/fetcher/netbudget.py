"""A byte budget and a total deadline for one thread's network reads. I/O.

The client libraries the sources use (huggingface_hub's httpx, boto3's urllib3,
google-cloud-storage's requests) read a whole answer (a listing, a JSON document, an
error body) before the caller sees any of it, so a cap in our own code comes too late
for a 300 MB error body or an endless trickle. The budget is charged underneath all of
them, at the socket: while a thread holds a `Budget`, each of its socket reads (plain
`recv`/`recv_into`, and TLS reads in `ssl.SSLSocket`) counts its bytes

- per response: the bytes received on one socket since this thread last sent on it
  (HTTP/1.1 sends a request, then reads its answer), at most `max_response_bytes`;
- in total, at most `max_total_bytes`;

and no read blocks past the deadline (the socket's timeout is cut to the time left).
The read that would go past a limit raises `BudgetSpent` instead of returning; the
client library wraps it as it likes, and `run_bounded` reports the limit that was hit
(`Budget.spent`) whatever the wrapping. `run_bounded` also runs the read in a worker
thread and stops waiting at the deadline, so DNS lookups and connects, which no
socket read covers, cannot outlast it either.

`install()` patches the socket classes once per process; threads without a budget
read exactly as before.
"""

from __future__ import annotations

import functools
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

T = TypeVar("T")

# How long `run_bounded` still waits for the worker once the deadline passed: its next
# socket operation raises at once, so a worker that can stop, stops within this.
STOP_GRACE_S: Final = 0.5


class BudgetSpent(Exception):
    """A socket read past the thread's byte budget or deadline.

    Not an OSError on purpose: clients retry OSErrors as dropped connections."""


@dataclass
class Budget:
    """Limits for the reads of one thread; `spent` says which one was hit."""

    max_response_bytes: int
    max_total_bytes: int
    deadline: float  # time.monotonic() value
    received_bytes: int = 0
    largest_response_bytes: int = 0
    spent: str | None = None  # "response", "total" or "deadline"
    _per_socket: weakref.WeakKeyDictionary[Any, int] = field(default_factory=weakref.WeakKeyDictionary)

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        if self.spent is None and self.remaining_s() <= 0:
            self.spent = "deadline"
        if self.spent is not None:
            raise BudgetSpent(self.describe())

    def sent(self, sock: Any) -> None:
        """A request went out on `sock`: what it receives next is a new response."""
        self._per_socket[sock] = 0

    def charge(self, sock: Any, count: int) -> None:
        self.received_bytes += count
        this = self._per_socket.get(sock, 0) + count
        self._per_socket[sock] = this
        self.largest_response_bytes = max(self.largest_response_bytes, this)
        if this > self.max_response_bytes:
            self.spent = "response"
        elif self.received_bytes > self.max_total_bytes:
            self.spent = "total"
        if self.spent is not None:
            raise BudgetSpent(self.describe())

    def describe(self) -> str:
        if self.spent == "response":
            return f"a response of more than {self.max_response_bytes} bytes"
        if self.spent == "total":
            return f"more than {self.max_total_bytes} bytes in all"
        if self.spent == "deadline":
            return "the deadline passed"
        return "within budget"


_local = threading.local()
_installed = threading.Lock()
_INSTALLED: dict[str, bool] = {}


def current() -> Budget | None:
    budget: Budget | None = getattr(_local, "budget", None)
    return budget


def _limit_timeout(sock: Any, budget: Budget) -> None:
    """Never block past the deadline: cut a longer (or no) timeout to the time left."""
    left = max(budget.remaining_s(), 0.001)
    timeout = sock.gettimeout()
    if timeout is None or timeout > left:
        sock.settimeout(left)


def _reader(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        if budget is None or getattr(_local, "inside", False):
            return original(self, *args, **kwargs)
        budget.check()
        _limit_timeout(self, budget)
        _local.inside = True  # an SSLSocket without TLS reads through socket.recv: count once
        try:
            result = original(self, *args, **kwargs)
        except TimeoutError:
            budget.check()  # past the deadline: say so, not "timed out"
            raise
        finally:
            _local.inside = False
        budget.charge(self, result if isinstance(result, int) else len(result))
        return result

    return read


def _sender(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        if budget is not None and not getattr(_local, "inside", False):
            budget.check()
            _limit_timeout(self, budget)
            budget.sent(self)
        return original(self, *args, **kwargs)

    return send


def install() -> None:
    """Patch the socket classes' read and send methods (once per process)."""
    with _installed:
        if _INSTALLED.get("done"):
            return
        for cls in (socket.socket, ssl.SSLSocket):
            for name in ("recv", "recv_into"):
                setattr(cls, name, _reader(getattr(cls, name)))
            for name in ("send", "sendall"):
                setattr(cls, name, _sender(getattr(cls, name)))
        _INSTALLED["done"] = True


@dataclass(frozen=True)
class Limits:
    """What one bounded read may take."""

    deadline_s: float
    max_response_bytes: int
    max_total_bytes: int


@dataclass
class BoundedRun:
    """What `run_bounded` saw: the value or the error, and the budget as spent."""

    budget: Budget
    value: Any = None
    error: BaseException | None = None
    finished: bool = False


def run_bounded(work: Callable[[], T], limits: Limits) -> BoundedRun:
    """Run `work` in a worker thread holding a budget; wait until it ends or the deadline
    passes (then the worker's next socket operation raises, and it is left behind as a
    daemon thread). Never raises `work`'s error: the outcome carries it."""
    install()
    budget = Budget(
        max_response_bytes=limits.max_response_bytes,
        max_total_bytes=limits.max_total_bytes,
        deadline=time.monotonic() + limits.deadline_s,
    )
    outcome = BoundedRun(budget)

    def worker() -> None:
        _local.budget = budget
        try:
            outcome.value = work()
        except BaseException as error:  # handed to the caller as it is
            outcome.error = error
        finally:
            _local.budget = None
            outcome.finished = True

    thread = threading.Thread(target=worker, name="bounded-read", daemon=True)
    thread.start()
    thread.join(max(limits.deadline_s, 0.0))
    if thread.is_alive():
        if budget.spent is None:
            budget.spent = "deadline"
        thread.join(STOP_GRACE_S)
    return outcome
