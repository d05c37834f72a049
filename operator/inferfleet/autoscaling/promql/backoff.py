"""Exponential backoff with the clock passed in (pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    """After `failures` consecutive failures, wait base × 2^(failures-1), capped.

    The autoscaler holds replica counts while Prometheus is down, so waiting longer
    between attempts costs nothing but spares a struggling Prometheus a query storm.
    """

    base_s: float = 5.0
    max_s: float = 300.0
    failures: int = 0
    next_attempt_s: float = 0.0

    def ready(self, now_s: float) -> bool:
        return now_s >= self.next_attempt_s

    def delay_s(self) -> float:
        if self.failures == 0:
            return 0.0
        return float(min(self.max_s, self.base_s * 2 ** min(self.failures - 1, 30)))

    def failed(self, now_s: float) -> None:
        self.failures += 1
        self.next_attempt_s = now_s + self.delay_s()

    def succeeded(self) -> None:
        self.failures = 0
        self.next_attempt_s = 0.0
