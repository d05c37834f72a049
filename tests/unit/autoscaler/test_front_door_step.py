"""The step reads the front door: held requests per pool and where weights are cached."""

from __future__ import annotations

from typing import Any

from inferfleet.autoscaling.policy import SIGNAL_WAKE, DoorPool
from inferfleet.autoscaling.step.step import Observation, ServiceInput, front_door_signals, step
from inferfleet.config import OperatorSettings
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit.step import step_input

T0 = 1_800_000_000.0
GATEWAY = OperatorSettings(gateway_name="gw", predictive_enabled=False)
TIERS = [
    {"name": "l4", "gpu": "L4", "minReplicas": 0, "maxReplicas": 6},
    {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 0, "maxReplicas": 2},
]


def service(
    status: dict[str, Any] | None = None,
    routing: dict[str, float] | None = None,
    settings: OperatorSettings = GATEWAY,
) -> ServiceInput:
    chat = a_scaled_service("chat", "ns").tiers(*TIERS).with_spec(scaling={"allowScaleToZero": True})
    if routing:
        chat = chat.workload(routing=routing)
    plans = [
        a_small_tier_plan(t["name"]).with_(costPerMillionTokensUsd=cost)
        for t, cost in zip(TIERS, (0.2, 0.8), strict=True)
    ]
    return step_input(chat, plans, replicas=0, ready=0, status=status, settings=settings)


def test_pools_come_from_the_rendered_front_door_and_the_cache_from_status() -> None:
    cached = {
        "cache": [
            {"tier": "l4", "nodesReady": 0, "nodesEligible": 3},
            {"tier": "a100", "nodesReady": 2, "nodesEligible": 2},
        ]
    }
    door = front_door_signals(service(cached), Observation(tiers={}, door_waiting={"chat": 3.0}))
    assert door is not None
    assert door.pools == (DoorPool(("l4", "a100"), 3.0),)
    assert door.cached_tiers == {"a100"}
    # Prometheus answered, no series for the pool: nothing held. The query failed: unknown.
    quiet = front_door_signals(service(), Observation(tiers={}, door_waiting={}))
    assert quiet is not None and quiet.pools[0].waiting == 0.0
    unread = front_door_signals(service(), Observation(tiers={}, door_waiting=None))
    assert unread is not None and unread.pools[0].waiting is None
    # Without a Gateway nothing holds requests: no front door to read.
    assert front_door_signals(service(settings=OperatorSettings()), Observation(tiers={})) is None


def test_share_mode_pools_are_per_tier() -> None:
    door = front_door_signals(
        service(routing={"l4": 0.5}), Observation(tiers={}, door_waiting={"chat-a100": 1.0})
    )
    assert door is not None
    assert {pool.tiers[0]: pool.waiting for pool in door.pools} == {"l4": 0.0, "a100": 1.0}


def test_a_held_request_at_zero_wakes_the_cheapest_cached_tier() -> None:
    cached = {"cache": [{"tier": "a100", "nodesReady": 1, "nodesEligible": 1}]}
    result = step(service(cached), Observation(tiers={}, door_waiting={"chat": 2.0}), T0)
    assert [(s.tier, s.from_replicas, s.to_replicas) for s in result.scales] == [("a100", 0, 1)]
    assert result.recommendation is not None
    assert {t.name: t.signal for t in result.recommendation.tiers}["a100"] == SIGNAL_WAKE
