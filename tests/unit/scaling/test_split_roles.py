"""A deployed prefill/decode split scaled as two roles: demand is placed on the decode
tier (and any colocated tier), the prefill tier is sized for what its decode tier was
placed at its own rate, each keeps its warm minimum, and scale from zero wakes both."""

from __future__ import annotations

import dataclasses
import datetime as dt

from inferfleet.autoscaling.policy import (
    SIGNAL_WAKE,
    DoorPool,
    FrontDoorSignals,
    ScalingContext,
    TierContext,
    TierFigures,
    TierRecommendation,
    decide,
)
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy
from tests.toolkit.step import tier_signals

T0 = dt.datetime(2024, 1, 3, 3, 0, tzinfo=dt.UTC).timestamp()
PERIOD = 15.0


def config(*, split: bool = True, min_replicas: int = 1) -> PolicyConfig:
    return PolicyConfig(
        tiers=(
            TierPolicy("l40s", min_replicas=min_replicas, max_replicas=20, cost_per_gpu_hour=0.9),
            TierPolicy("h100", min_replicas=min_replicas, max_replicas=8, cost_per_gpu_hour=2.5),
        ),
        ttft_target_ms=4000.0,
        sync_period_s=PERIOD,
        headroom=0.0,
        headroom_mode="fixed",
        predictive_enabled=False,
        allow_scale_to_zero=min_replicas == 0,
        scale_down=ScalePacing(300.0, 0.0, 1),
        split=("l40s", "h100") if split else None,
    )


def tier(name: str, usable_rps: float, replicas: int, rate_rps: float) -> TierContext:
    figures = TierFigures(name=name, usable_rps=usable_rps, cold_start_s=60.0, max_concurrency=48)
    signals = tier_signals(
        ready_replicas=replicas,
        desired_replicas=replicas,
        waiting=0.0 if replicas else None,
        running=0.0 if replicas else None,
        request_rate_rps=rate_rps if replicas else None,
    )
    return TierContext(figures=figures, signals=signals)


def decided(
    policy: PolicyConfig, tiers: tuple[TierContext, ...], door: FrontDoorSignals | None = None
) -> dict[str, TierRecommendation]:
    history = [12.0] * 60
    rec, _ = decide(ScalingContext(T0, policy, tiers, rate_history_rps=history, front_door=door))
    return {t.name: t for t in rec.tiers}


def test_the_prefill_tier_is_sized_for_what_its_decode_tier_serves() -> None:
    # 12 req/s on the service, which both roles report finished (the prefill pods finish a
    # prefill of each). The demand is the decode tier's 12, not 24; the decode tier (h100,
    # 7 req/s a replica) takes it whole (2 replicas) and the prefill tier (l40s, 1.7 req/s
    # a replica) prefills the same 12 req/s: ceil(12 / 1.7) = 8, not a share of it.
    tiers = (tier("l40s", 1.7, 1, 12.0), tier("h100", 7.0, 1, 12.0))
    out = decided(config(), tiers)
    assert out["h100"].targets["predictive"] == 2
    assert out["l40s"].targets["predictive"] == 8
    assert "demand 12.00 req/s" in out["l40s"].reason
    # Without the split the same two tiers share the service's 24 req/s as whole requests.
    colocated = decided(config(split=False), tiers)
    placed = {name: rec.traffic_share or 0.0 for name, rec in colocated.items()}
    assert 0.0 < placed["l40s"] < 1.0 and abs(sum(placed.values()) - 1.0) < 1e-9
    assert "demand 24.00 req/s" in colocated["h100"].reason


def test_each_role_keeps_its_warm_minimum() -> None:
    quiet = (tier("l40s", 1.7, 1, 0.0), tier("h100", 7.0, 1, 0.0))
    history_silent = dataclasses.replace(config(), predictive_enabled=False)
    out = decided(history_silent, quiet)
    assert (out["l40s"].replicas, out["h100"].replicas) == (1, 1)


def test_scale_from_zero_wakes_both_roles() -> None:
    cold = (tier("l40s", 1.7, 0, 0.0), tier("h100", 7.0, 0, 0.0))
    door = FrontDoorSignals((DoorPool(("l40s", "h100"), waiting=2),), frozenset({"l40s", "h100"}))
    out = decided(config(min_replicas=0), cold, door)
    assert (out["l40s"].replicas, out["h100"].replicas) == (1, 1)
    assert out["l40s"].signal == SIGNAL_WAKE and out["h100"].signal == SIGNAL_WAKE
    assert "woken with" in out["l40s"].reason or "woken with" in out["h100"].reason
