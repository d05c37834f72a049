"""The autoscaler's one background loop for every InferenceService.

One thread, started by the kopf startup handler and stopped by the cleanup handler
(like `controller.resync`), not a kopf timer per object: kopf protects every object
that has a timer or daemon with a finalizer, so deleting an InferenceService would
hang whenever the operator is not running.

Every `tick_s` the loop asks the leader gate; on the leader replica it runs
`Autoscaler.run_once`: one listing of the InferenceServices, one batched Prometheus
read, and a decision for each object whose own sync period has passed. A standby
replica reads nothing and forgets the states it kept in memory, since the leader now
writes its own.
"""

from __future__ import annotations

import logging

from inferfleet.autoscaling.loop.runner import Autoscaler, LoopReport
from inferfleet.cluster import ApiError
from inferfleet.controller.leader import Gate
from inferfleet.controller.periodic import PeriodicThread

logger = logging.getLogger(__name__)


class AutoscalerLoop:
    """Runs `autoscaler.run_once` every `tick_s` while this replica leads."""

    def __init__(self, autoscaler: Autoscaler, *, tick_s: float, is_leader: Gate | None = None) -> None:
        self.autoscaler = autoscaler
        self.tick_s = tick_s
        self.is_leader = is_leader
        self._thread = PeriodicThread("inferfleet-autoscaler", tick_s, self.tick)

    def tick(self, now_s: float | None = None) -> LoopReport | None:
        """One tick; None when standby or when the API server could not be read."""
        if self.is_leader is not None and not self.is_leader():
            self.autoscaler.forget_unwritten()
            return None
        try:
            report = self.autoscaler.run_once(now_s)
        except ApiError as error:
            # The world's error (listing failed): nothing decided, the next tick retries.
            logger.warning("autoscaler: cannot list InferenceServices or workloads now: %s", error)
            return None
        except Exception:  # the loop must outlive any one bad tick
            logger.exception("autoscaler: tick failed")
            return None
        for problem in report.errors:
            logger.warning("autoscaler: %s", problem)
        if report.scaled:
            logger.info("autoscaler scaled %d tier(s)", report.scaled)
        return report

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
