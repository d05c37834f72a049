"""One background thread that calls a function every period until stopped.

The resync loop, the autoscaler loop and the Lease elector all run this way; they share
this one start/stop lifecycle instead of each keeping its own thread and event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class PeriodicThread:
    """Calls `body` every `period_s` on a daemon thread (its result is ignored).

    `run_first` calls it once before the first wait.
    """

    def __init__(
        self, name: str, period_s: float, body: Callable[[], object], *, run_first: bool = False
    ) -> None:
        self.name = name
        self.period_s = period_s
        self.body = body
        self.run_first = run_first
        # Set while stopping, so a long body can give up early.
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        if self.run_first:
            self.body()
        while not self.stopping.wait(self.period_s):
            self.body()

    def start(self) -> None:
        """Start the thread; a no-op while it runs."""
        if self._thread is not None:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the thread to stop and wait up to `timeout_s` for it; idempotent."""
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
