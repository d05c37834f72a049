"""Leader election among the operator's replicas with a coordination.k8s.io/v1 Lease.

The one election of the operator: the Lease holder runs kopf's handlers (the others'
watch streams are paused, controller.kopf_gate) and the background loops (the
autoscaler and the resync), which ask `LeaderElector.is_leader()` before each tick. So
with two replicas exactly one reconciles and scales, and a standby does not double the
Prometheus and API-server load; every replica serves the admission webhook.

The protocol is client-go's, reduced to what the operator needs:
- the Lease names its holder (`holderIdentity`), how long a holder's claim lasts
  without renewal (`leaseDurationSeconds`) and when it last renewed (`renewTime`);
- the holder renews every `retry_period_s`; every write is a whole-object PUT carrying
  the resourceVersion it read, so of two replicas racing for the Lease one gets 409
  Conflict and stays standby;
- a standby takes over once the Lease has not changed for `lease_duration_s`, measured
  on its own clock from when it first saw that version: the holder's clock, written in
  `renewTime`, is never compared with ours, so clock skew between nodes cannot make
  two replicas leaders at once;
- the holder acts only while its last successful renewal is younger than
  `renew_deadline_s` (< `lease_duration_s`): it stops acting before any standby may
  start, even when it cannot reach the API server to learn that it lost;
- on a clean shutdown the holder empties `holderIdentity`, so the standby takes over
  on its next attempt instead of waiting out the duration.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.cluster import ApiError, Cluster, Conflict, access
from inferfleet.controller.periodic import PeriodicThread
from inferfleet.kubedata import ObjectRef

logger = logging.getLogger(__name__)

Clock = Callable[[], float]
# Whether this replica may act now; None where no election runs (a single replica).
Gate = Callable[[], bool]


@dataclass(frozen=True)
class LeaseConfig:
    """Where the Lease lives, who we are, and the timing.

    Shorter than client-go's 15/10/2 s so that an edit made after the leader died is
    handled within 15 s: a standby takes over at most `lease_duration_s` plus two retry
    periods after the last renewal (10 s), and kopf then lists and handles at once. The
    holder stops acting `lease_duration_s - renew_deadline_s` = 3 s before any standby
    may start. A renewal a second is a GET and a PUT of one small object."""

    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 8.0
    renew_deadline_s: float = 5.0
    retry_period_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")

    @classmethod
    def from_environment(cls, name: str, environ: Mapping[str, str] | None = None) -> LeaseConfig:
        """The pod's namespace and name (downward API) as the Lease's namespace and holder.

        Outside a pod the host name plus a random suffix keeps two local runs apart.
        """
        source = os.environ if environ is None else environ
        namespace = source.get("POD_NAMESPACE") or "default"
        identity = source.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        return cls(namespace=namespace, name=name, identity=identity)


def micro_time(moment_s: float) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, UTC."""
    return dt.datetime.fromtimestamp(moment_s, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and renews one Lease; `is_leader()` is cheap and thread-safe."""

    def __init__(self, cluster: Cluster, config: LeaseConfig, clock: Clock = time.time) -> None:
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.ref = ObjectRef(access.LEASE.api_version, access.LEASE.kind, config.namespace, config.name)
        self._lock = threading.Lock()
        self._renewed_at_s: float | None = None
        # The Lease version we last saw someone else hold, and when we first saw it.
        self._observed: tuple[Any, ...] | None = None
        # Whether another replica ever held the Lease while we ran: then we lead (if at
        # all) by taking over from a replica that had reconciled everything.
        self.followed_another = False
        self._observed_at_s = 0.0
        self._thread = PeriodicThread(
            "inferfleet-leader", config.retry_period_s, self.try_acquire_or_renew, run_first=True
        )

    # --- the decision loops ask this --------------------------------------------------

    def is_leader(self) -> bool:
        with self._lock:
            renewed = self._renewed_at_s
        return renewed is not None and self.clock() - renewed < self.config.renew_deadline_s

    # --- one attempt ------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One election round: create, renew or take over the Lease. True when we hold it."""
        now = self.clock()
        try:
            lease = self.cluster.get(self.ref)
            if lease is None:
                self.cluster.create(self._lease(None, now, acquired=True, transitions=0))
                return self._won(now, "created the lease")
            spec: Mapping[str, Any] = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            if holder and holder != self.config.identity:
                self.followed_another = True
                version = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
                if version != self._observed:
                    self._observed, self._observed_at_s = version, now
                duration_s = float(spec.get("leaseDurationSeconds") or self.config.lease_duration_s)
                if now - self._observed_at_s < duration_s:
                    return self._lost(f"{holder} holds the lease")
            ours = holder == self.config.identity
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
            self.cluster.replace(self._lease(lease, now, acquired=not ours, transitions=transitions))
            return self._won(now, "renewed" if ours else f"took the lease over from {holder or 'nobody'}")
        except Conflict:
            # Another replica wrote the Lease between our read and our write: it won.
            return self._lost("another replica wrote the lease first")
        except ApiError as error:
            # Cannot tell now; is_leader() runs out at the renew deadline on its own.
            logger.warning("leader election: %s: %s", self.ref, error)
            return self.is_leader()

    def release(self) -> None:
        """Give the Lease up (clean shutdown) so a standby need not wait out the duration."""
        with self._lock:
            held = self._renewed_at_s is not None
            self._renewed_at_s = None
        if not held:
            return
        try:
            lease = self.cluster.get(self.ref)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.config.identity:
                return
            released = {**lease, "spec": {**spec, "holderIdentity": "", "leaseDurationSeconds": 1}}
            self.cluster.replace(released)
            logger.info("leader election: released %s", self.ref)
        except ApiError as error:
            logger.warning("leader election: could not release %s: %s", self.ref, error)

    def _lease(
        self, current: Mapping[str, Any] | None, now_s: float, *, acquired: bool, transitions: int
    ) -> dict[str, Any]:
        spec: dict[str, Any] = dict((current or {}).get("spec") or {})
        spec.update(
            holderIdentity=self.config.identity,
            leaseDurationSeconds=round(self.config.lease_duration_s),
            renewTime=micro_time(now_s),
            leaseTransitions=transitions,
        )
        if acquired:
            spec["acquireTime"] = micro_time(now_s)
        metadata: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if current is not None:
            # The write is conditional on the version read: of two racers, one gets 409.
            metadata["resourceVersion"] = current["metadata"].get("resourceVersion")
        return {"apiVersion": self.ref.api_version, "kind": self.ref.kind, "metadata": metadata, "spec": spec}

    def _won(self, now_s: float, what: str) -> bool:
        with self._lock:
            was = self._renewed_at_s is not None
            self._renewed_at_s = now_s
        self._observed = None
        if not was:
            logger.info("leader election: %s is now the leader (%s)", self.config.identity, what)
        return True

    def _lost(self, why: str) -> bool:
        with self._lock:
            was = self._renewed_at_s is not None
            self._renewed_at_s = None
        if was:
            logger.warning("leader election: %s lost the lease: %s", self.config.identity, why)
        return False

    # --- the background thread ---------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop renewing and release the Lease; idempotent."""
        self._thread.stop(timeout_s)
        self.release()


_memo_lock = threading.Lock()


def from_memo(memo: Any) -> LeaderElector | None:
    """The one elector of this process, created and started on first use.

    The autoscaler's and the reconciler's startup handlers both call this; whichever
    runs first creates it. `memo["leader_election"]` (a LeaseConfig, set by `inferfleet
    run`) is None for a standalone replica, which always acts.
    """
    with _memo_lock:
        elector: LeaderElector | None = memo.get("leader")
        if elector is not None:
            return elector
        config: LeaseConfig | None = memo.get("leader_election")
        if config is None:
            return None
        cluster = memo.get("cluster")
        if cluster is None:
            from inferfleet.cluster import KubernetesCluster

            cluster = KubernetesCluster.from_environment()
        elector = LeaderElector(cluster, config)
        elector.start()
        memo["leader"] = elector
        return elector


def gate_of(elector: LeaderElector | None) -> Gate | None:
    return None if elector is None else elector.is_leader


def memo_gate(memo: Any) -> Gate:
    """Whether this process leads, asked of the elector in `memo` when it exists (kopf's
    startup handlers create it): False before, so nothing acts before the first round."""

    def is_leader() -> bool:
        elector: LeaderElector | None = memo.get("leader")
        return elector is not None and elector.is_leader()

    return is_leader
