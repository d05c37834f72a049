"""Leader election on a coordination.k8s.io/v1 Lease: in-memory API server, injected clocks."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from inferfleet.cluster import InMemoryCluster, TransientApiError
from inferfleet.controller.leader import LeaderElector, LeaseConfig

NAMESPACE = "inferfleet-system"
T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now_s: float = T0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


def replica(cluster: InMemoryCluster, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(cluster, LeaseConfig(NAMESPACE, "inferfleet", identity), clock=clock)


def lease(cluster: InMemoryCluster, elector: LeaderElector) -> dict[str, Any]:
    found = cluster.get(elector.ref)
    assert found is not None
    return found


@pytest.fixture
def cluster() -> InMemoryCluster:
    return InMemoryCluster()


def test_first_replica_creates_the_lease_and_the_second_stands_by(cluster: InMemoryCluster) -> None:
    clock = Clock()
    a, b = replica(cluster, "a", clock), replica(cluster, "b", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader()
    spec = lease(cluster, a)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 8 and spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == "2027-01-15T08:00:00.000000Z"


def test_the_lease_is_a_valid_kubernetes_object(cluster: InMemoryCluster) -> None:
    elector = replica(cluster, "a", Clock())
    elector.try_acquire_or_renew()
    body = lease(cluster, elector)
    body["metadata"] = {"name": body["metadata"]["name"], "namespace": body["metadata"]["namespace"]}
    kubernetes_validate.validate(body, "1.30.0", strict=True)


def test_a_renewing_holder_keeps_the_lease_whatever_its_clock_says(cluster: InMemoryCluster) -> None:
    # The holder's clock runs an hour behind: its renewTime always looks expired.
    # The standby judges by whether the Lease changes, on its own clock, so it waits.
    holder_clock, standby_clock = Clock(T0 - 3600), Clock()
    a, b = replica(cluster, "a", holder_clock), replica(cluster, "b", standby_clock)
    assert a.try_acquire_or_renew()
    for _ in range(30):  # a minute of rounds, four lease durations
        holder_clock.advance(2)
        standby_clock.advance(2)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    spec = lease(cluster, a)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0


def test_standby_takes_over_only_after_the_lease_expired(cluster: InMemoryCluster) -> None:
    clock = Clock()
    a, b = replica(cluster, "a", clock), replica(cluster, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b sees this version of the Lease now
    # a dies: no more renewals.
    clock.advance(5)
    assert not a.is_leader()  # a stops acting at its renew deadline, API or not
    assert not b.try_acquire_or_renew()  # 5 s < 8 s lease duration
    clock.advance(3)
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = lease(cluster, b)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == spec["renewTime"]
    # a comes back: it sees b's Lease and stays standby.
    assert not a.try_acquire_or_renew() and not a.is_leader()


def test_a_standby_polling_each_retry_period_takes_over_within_10_s_of_the_last_renewal(
    cluster: InMemoryCluster,
) -> None:
    """The budget behind "an edit after the leader died is handled within 15 s": the
    takeover (at most lease duration + two retry periods) leaves kopf 5 s to list and
    handle it."""
    clock = Clock()
    a, b = replica(cluster, "a", clock), replica(cluster, "b", clock)
    config = a.config
    assert a.try_acquire_or_renew()
    clock.advance(config.retry_period_s * 0.99)  # b's round comes just before a's renewal
    assert not b.try_acquire_or_renew()
    clock.advance(config.retry_period_s * 0.01)
    assert a.try_acquire_or_renew()  # a's last renewal; it dies right after
    last_renewal = clock()
    while not b.try_acquire_or_renew():
        clock.advance(config.retry_period_s)
    assert clock() - last_renewal <= config.lease_duration_s + 2 * config.retry_period_s <= 10
    # And never before a stopped acting, with room to spare.
    assert clock() - last_renewal >= config.renew_deadline_s + 2


def test_of_two_replicas_racing_for_the_lease_one_wins(cluster: InMemoryCluster) -> None:
    clock = Clock()
    a, b, c = (replica(cluster, name, clock) for name in "abc")
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    c.try_acquire_or_renew()
    clock.advance(15)
    stale = lease(cluster, a)
    assert b.try_acquire_or_renew()
    # c read the Lease before b's write landed; its write carries the old resourceVersion.
    original_get = cluster.get
    cluster.get = lambda ref: stale  # type: ignore[method-assign]
    try:
        assert not c.try_acquire_or_renew()
    finally:
        cluster.get = original_get  # type: ignore[method-assign]
    assert lease(cluster, b)["spec"]["holderIdentity"] == "b"
    assert b.is_leader() and not c.is_leader()


def test_release_hands_over_at_once(cluster: InMemoryCluster) -> None:
    clock = Clock()
    a, b = replica(cluster, "a", clock), replica(cluster, "b", clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.stop()  # never started: only releases
    assert not a.is_leader()
    assert lease(cluster, a)["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()  # no wait for the lease duration
    assert lease(cluster, b)["spec"]["leaseTransitions"] == 1


def test_api_errors_keep_the_leader_only_until_its_renew_deadline(cluster: InMemoryCluster) -> None:
    clock = Clock()
    a = replica(cluster, "a", clock)
    assert a.try_acquire_or_renew()
    cluster.inject("get", TransientApiError("apiserver away", 503), kind="Lease", times=10)
    clock.advance(2)
    assert a.try_acquire_or_renew()  # unknown yet: the last renewal is 2 s old
    clock.advance(8)
    assert not a.try_acquire_or_renew() and not a.is_leader()


def test_lease_timing_must_leave_room_between_deadline_and_expiry() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseConfig(NAMESPACE, "x", "a", lease_duration_s=10, renew_deadline_s=10)


def test_identity_and_namespace_come_from_the_downward_api() -> None:
    config = LeaseConfig.from_environment("inferfleet", {"POD_NAME": "op-7f9", "POD_NAMESPACE": "ops"})
    assert (config.namespace, config.name, config.identity) == ("ops", "inferfleet", "op-7f9")
