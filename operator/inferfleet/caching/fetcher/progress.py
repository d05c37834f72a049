"""Progress of a fetch: one thread-safe byte counter, a line every few seconds.

The lines go to the pre-cache pod's log (`kubectl logs ds/<service>-<tier>-cache`), which
is where a person looks when CacheReady stays False.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

GIB = 1024**3


def format_rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:.0f} MB/s"


class Progress:
    def __init__(
        self,
        label: str,
        total_bytes: int,
        emit: Callable[[str], None],
        interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total_bytes = total_bytes
        self._emit = emit
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self.done_bytes = 0
        self.transferred_bytes = 0
        self._started_s = clock()
        self._last_emit_s = self._started_s

    def already_present(self, count_bytes: int) -> None:
        """Bytes found on disk from an earlier run: done, but not transferred now."""
        with self._lock:
            self.done_bytes += count_bytes

    def discard(self, count_bytes: int) -> None:
        """Bytes counted as done that must be fetched again (checksum mismatch, range ignored)."""
        with self._lock:
            self.done_bytes -= count_bytes

    def add(self, count_bytes: int) -> None:
        line = None
        with self._lock:
            self.done_bytes += count_bytes
            self.transferred_bytes += count_bytes
            now = self._clock()
            if now - self._last_emit_s >= self._interval_s:
                self._last_emit_s = now
                line = self._line(now)
        if line is not None:
            self._emit(line)

    def elapsed_s(self) -> float:
        return self._clock() - self._started_s

    def rate_bytes_per_s(self) -> float:
        elapsed = self.elapsed_s()
        return self.transferred_bytes / elapsed if elapsed > 0 else 0.0

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started_s, 1e-9)
        rate = self.transferred_bytes / elapsed
        left = max(self.total_bytes - self.done_bytes, 0)
        eta = f", eta {left / rate:.0f}s" if rate > 0 else ""
        pct = 100.0 * self.done_bytes / self.total_bytes if self.total_bytes else 100.0
        return (
            f"{self.label}: {self.done_bytes / GIB:.2f}/{self.total_bytes / GIB:.2f} GiB ({pct:.1f}%), "
            f"{format_rate(rate)}{eta}"
        )

    def summary(self) -> str:
        return self._line(self._clock())
