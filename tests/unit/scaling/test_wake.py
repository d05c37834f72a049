"""Waking a tier from zero on the front door's held requests (decide() and scaling.wake)."""

from __future__ import annotations

import datetime as dt

from inferfleet.autoscaling.policy import (
    SIGNAL_WAKE,
    DoorPool,
    FrontDoorSignals,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    decide,
)
from inferfleet.autoscaling.policy.wake import WakeCandidate, held_tiers, wakes
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy
from tests.toolkit.step import tier_signals

T0 = dt.datetime(2024, 1, 3, 3, 0, tzinfo=dt.UTC).timestamp()
PERIOD = 15.0


def config(allow_zero: bool = True) -> PolicyConfig:
    return PolicyConfig(
        tiers=(
            TierPolicy("l4", min_replicas=0, max_replicas=8),
            TierPolicy("a100", min_replicas=0, max_replicas=4),
        ),
        ttft_target_ms=2000.0,
        sync_period_s=PERIOD,
        headroom=0.0,
        headroom_mode="fixed",
        cold_start_margin_s=60.0,
        allow_scale_to_zero=allow_zero,
        scale_down=ScalePacing(300.0, 0.0, 1),
    )


def tier(name: str, cost: float, replicas: int, *, ready: int | None = None) -> TierContext:
    figures = TierFigures(
        name=name, usable_rps=2.0, cold_start_s=90.0, max_concurrency=16, cost_per_million_tokens_usd=cost
    )
    # No pod, no vLLM series: a tier at zero reports neither a queue nor a rate; an idle
    # one reports zeros.
    ready = replicas if ready is None else ready
    idle = 0.0 if ready else None
    signals = tier_signals(
        ready_replicas=ready, desired_replicas=replicas, waiting=idle, running=idle, request_rate_rps=idle
    )
    return TierContext(figures=figures, signals=signals)


def ctx(now: float, tiers: tuple[TierContext, ...], door: FrontDoorSignals | None) -> ScalingContext:
    # An hour of silence: the history has no hole, so nothing but the door blocks a scale-down.
    return ScalingContext(
        now_s=now, policy=config(), tiers=tiers, rate_history_rps=[0.0] * 60, front_door=door
    )


def replicas(rec_tiers: object) -> dict[str, int]:
    return {t.name: t.replicas for t in rec_tiers}  # type: ignore[attr-defined]


def test_held_requests_wake_the_cheapest_tier_whose_nodes_hold_the_weights() -> None:
    tiers = (tier("l4", cost=0.3, replicas=0), tier("a100", cost=0.9, replicas=0))
    pool = DoorPool(("l4", "a100"), waiting=3)
    # Both cached: the cheaper one.
    rec, _ = decide(ctx(T0, tiers, FrontDoorSignals((pool,), frozenset({"l4", "a100"}))))
    assert replicas(rec.tiers) == {"l4": 1, "a100": 0}
    (l4,) = [t for t in rec.tiers if t.name == "l4"]
    assert l4.signal == SIGNAL_WAKE and "3 request(s) held at the front door" in l4.reason
    # Only the dearer tier's nodes hold the weights: it starts from local disk, so it wakes.
    rec, _ = decide(ctx(T0, tiers, FrontDoorSignals((pool,), frozenset({"a100"}))))
    assert replicas(rec.tiers) == {"l4": 0, "a100": 1}
    # No node holds them anywhere: the cheapest.
    rec, _ = decide(ctx(T0, tiers, FrontDoorSignals((pool,), frozenset())))
    assert replicas(rec.tiers) == {"l4": 1, "a100": 0}


def test_nothing_held_or_a_replica_already_coming_wakes_nothing() -> None:
    idle = (tier("l4", cost=0.3, replicas=0), tier("a100", cost=0.9, replicas=0))
    rec, _ = decide(ctx(T0, idle, FrontDoorSignals((DoorPool(("l4", "a100"), waiting=0),))))
    assert replicas(rec.tiers) == {"l4": 0, "a100": 0}
    rec, _ = decide(ctx(T0, idle, FrontDoorSignals((DoorPool(("l4", "a100"), waiting=None),))))
    assert replicas(rec.tiers) == {"l4": 0, "a100": 0}  # an unread queue is not a queue
    starting = (tier("l4", cost=0.3, replicas=1, ready=0), tier("a100", cost=0.9, replicas=0))
    rec, _ = decide(ctx(T0, starting, FrontDoorSignals((DoorPool(("l4", "a100"), waiting=5),))))
    assert replicas(rec.tiers) == {"l4": 1, "a100": 0}  # the starting one is enough; no second wake
    rec, _ = decide(ctx(T0, idle, None))
    assert replicas(rec.tiers) == {"l4": 0, "a100": 0}  # no front door, nothing to read


def test_a_long_hold_wakes_enough_replicas_for_what_is_held() -> None:
    tiers = (tier("l4", cost=0.3, replicas=0), tier("a100", cost=0.9, replicas=0))
    rec, _ = decide(ctx(T0, tiers, FrontDoorSignals((DoorPool(("l4", "a100"), waiting=40),))))
    assert replicas(rec.tiers)["l4"] == 3  # 40 held / 16 slots per replica


def test_share_mode_pools_wake_their_own_tier() -> None:
    # One pool per tier (route weights); the l4 pool may overflow onto a100 pods.
    tiers = (tier("l4", cost=0.3, replicas=0), tier("a100", cost=0.9, replicas=0))
    door = FrontDoorSignals((DoorPool(("a100",), waiting=2), DoorPool(("l4", "a100"), waiting=0)))
    rec, _ = decide(ctx(T0, tiers, door))
    assert replicas(rec.tiers) == {"l4": 0, "a100": 1}


def test_no_scale_down_while_the_door_holds_requests_for_the_pool() -> None:
    state = ScalingState()
    tiers = (tier("l4", cost=0.3, replicas=1), tier("a100", cost=0.9, replicas=0))
    quiet = FrontDoorSignals((DoorPool(("l4", "a100"), waiting=0),))
    holding = FrontDoorSignals((DoorPool(("l4", "a100"), waiting=2),))
    now = T0
    # Long idle with the door holding: l4 stays.
    for _ in range(60):
        rec, state = decide(ctx(now, tiers, holding), state)
        now += PERIOD
    assert replicas(rec.tiers)["l4"] == 1
    # The same idle with nothing held: it goes to zero.
    state, now = ScalingState(), T0
    for _ in range(60):
        rec, state = decide(ctx(now, tiers, quiet), state)
        now += PERIOD
    assert replicas(rec.tiers)["l4"] == 0


def test_wakes_skips_tiers_that_cannot_run() -> None:
    door = FrontDoorSignals((DoorPool(("l4", "a100"), waiting=1),), frozenset({"l4"}))
    failing = WakeCandidate("l4", 0, runnable=False, cost_rank=0.3, max_replicas=4, slots_per_replica=8)
    fine = WakeCandidate("a100", 0, runnable=True, cost_rank=0.9, max_replicas=4, slots_per_replica=8)
    assert set(wakes(door, [failing, fine])) == {"a100"}
    assert wakes(door, [failing]) == {}
    assert held_tiers(door) == {"l4", "a100"}
    assert held_tiers(None) == frozenset()
