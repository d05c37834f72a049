"""Readings that are no measurement are missing data for their own tier, pod or pool.

Values as a hostile engine (or a broken one) would report them: NaN, infinities,
negative counts, a KV usage above 1, token lengths no model can hold. Each reading is
checked in one place; these tests hold every path to that place.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from inferfleet.autoscaling.policy import TokenQuantiles, plausible
from inferfleet.autoscaling.policy.readings import TierReadings
from inferfleet.autoscaling.promql.parse import ServiceKey, TierKey, parse_matrix, parse_pod_load, service_key
from inferfleet.autoscaling.promql.queries import TTFT_BUCKETS_S, Signal
from inferfleet.autoscaling.promql.signals import assemble
from inferfleet.autoscaling.step.step import Observation, ServiceInput, front_door_signals
from inferfleet.config import OperatorSettings
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit.prometheus import a_range, a_sample, a_vector, service_labels
from tests.toolkit.step import step_input

T0 = 1_800_000_000.0
GARBAGE = [math.nan, math.inf, -math.inf, -1.0, -1e-3, 1e13]
VICTIM, ATTACKER = TierKey("ns", "victim", "l4"), TierKey("ns", "attacker", "l4")
GATEWAY = OperatorSettings(gateway_name="gw", predictive_enabled=False)


def door_service() -> ServiceInput:
    chat = a_scaled_service("chat", "ns").tiers(
        {"name": "l4", "gpu": "L4", "minReplicas": 0, "maxReplicas": 4}
    )
    chat = chat.with_spec(scaling={"allowScaleToZero": True})
    return step_input(chat, [a_small_tier_plan("l4")], replicas=0, ready=0, settings=GATEWAY)


@pytest.mark.parametrize("value", GARBAGE, ids=repr)
@pytest.mark.parametrize(
    "field",
    [
        "waiting",
        "running",
        "ttft_p99_s",
        "kv_cache_usage",
        "request_rate_rps",
        "prompt_tokens_rps",
        "generation_tokens_rps",
        "rejected_rps",
    ],
)
def test_a_reading_that_is_no_measurement_is_none_however_the_readings_were_made(
    field: str, value: float
) -> None:
    """Scripted by a test or another reader as much as assembled from Prometheus."""
    readings = TierReadings(**{field: value})
    assert getattr(readings, field) is None


@pytest.mark.parametrize("value", [1.0000001, 1.5, 2.0, 100.0])
def test_a_kv_usage_above_one_is_no_share(value: float) -> None:
    assert TierReadings(kv_cache_usage=value).kv_cache_usage is None
    assert TierReadings(kv_cache_usage=1.0).kv_cache_usage == 1.0


@pytest.mark.parametrize("value", [-1, 10**7, math.nan, math.inf])
def test_ready_replicas_that_are_no_count_are_none(value: float) -> None:
    assert TierReadings(ready_replicas=value).ready_replicas is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "quantiles",
    [
        TokenQuantiles(100.0, -5.0, 300.0),
        TokenQuantiles(100.0, 200.0, math.inf),
        TokenQuantiles(math.nan, 200.0, 300.0),
        TokenQuantiles(100.0, 200.0, 2.0**28),  # beyond any model's context (2^27)
    ],
)
def test_token_percentiles_that_are_no_lengths_are_none(quantiles: TokenQuantiles) -> None:
    assert TierReadings(prompt_tokens=quantiles).prompt_tokens is None
    assert TierReadings(generation_tokens=quantiles).generation_tokens is None


def test_measurements_pass_untouched_and_ordered() -> None:
    readings = TierReadings(
        waiting=3.0,
        running=0.0,
        ttft_p99_s=TTFT_BUCKETS_S[-1] * 10,
        kv_cache_usage=0.5,
        request_rate_rps=-1e-9,  # rate() extrapolation noise around zero
        ready_replicas=2,
        prompt_tokens=TokenQuantiles(800.0, 500.0, 900.0),
    )
    assert (readings.waiting, readings.running, readings.kv_cache_usage, readings.ready_replicas) == (
        3.0,
        0.0,
        0.5,
        2,
    )
    assert readings.ttft_p99_s == TTFT_BUCKETS_S[-1]  # capped at the largest finite bucket
    assert readings.request_rate_rps == 0.0
    assert readings.prompt_tokens == TokenQuantiles(500.0, 800.0, 900.0)


@pytest.mark.parametrize("value", GARBAGE, ids=repr)
def test_one_tiers_garbage_leaves_the_other_tiers_of_the_tick_alone(value: float) -> None:
    vectors = {signal: a_vector({ATTACKER: value, VICTIM: 2.0}) for signal in Signal}
    # A KV usage of 1.5 is no share of anything, like NaN or a negative.
    vectors[Signal.kv_cache_usage] = a_vector({ATTACKER: 1.5, VICTIM: 0.5})
    snapshot = assemble(T0, vectors)
    attacker, victim = snapshot.tiers[ATTACKER], snapshot.tiers[VICTIM]
    assert not attacker.has_load_data and attacker.kv_cache_usage is None
    assert (victim.waiting, victim.running, victim.kv_cache_usage, victim.ready_replicas) == (
        2.0,
        2.0,
        0.5,
        2,
    )
    assert victim.prompt_tokens == TokenQuantiles(2.0, 2.0, 2.0)


@pytest.mark.parametrize("value", GARBAGE, ids=repr)
def test_a_pool_whose_queue_is_no_count_is_unknown_never_empty(value: float) -> None:
    """The front door's queue wakes tiers from zero: garbage is "not known", as when the
    query failed, and never "the picker holds nothing"; the other pools keep theirs."""
    door = a_vector({TierKey("ns", "chat", "chat"): value, TierKey("ns", "other", "other"): 3.0})
    snapshot = assemble(T0, {}, door=door)
    held = {key.tier: reading for key, reading in snapshot.door_waiting.items() if key.service == "chat"}
    found = front_door_signals(door_service(), Observation(tiers={}, door_waiting=held))
    assert found is not None and found.pools[0].waiting is None
    assert snapshot.door_waiting[TierKey("ns", "other", "other")] == 3.0


@pytest.mark.parametrize(
    ("value", "kept"),
    [("3", 3.0), ("0", 0.0), ("NaN", None), ("+Inf", None), ("-Inf", None), ("-2", None), ("1e13", None)],
)
def test_pod_loads_that_are_no_count_leave_that_pod_unknown(value: str, kept: float | None) -> None:
    parsed = parse_pod_load(
        [
            a_sample(value, labels={**_tier(), "pod": "p-bad"}),
            a_sample("5", labels={**_tier(), "pod": "p-good"}),
            a_sample("7", labels=_tier()),  # no pod label: not attributable
            a_sample("7", labels={**_tier(), "pod": ["a", "list"]}),
        ]
    )
    expected = {"p-good": 5.0} if kept is None else {"p-good": 5.0, "p-bad": kept}
    assert parsed == {VICTIM: expected}


def _tier() -> dict[str, Any]:
    return {"namespace": "ns", "inferfleet_service": "victim", "inferfleet_tier": "l4"}


def test_a_rate_history_skips_points_that_are_no_rate() -> None:
    parsed = parse_matrix(
        [
            a_range(
                [
                    (60, "2"),
                    (120, "-3"),
                    (180, "NaN"),
                    (240, "+Inf"),
                    (300, "1e13"),
                    (360, "-1e-9"),
                    (420, "4"),
                ],
                labels=service_labels(service="victim"),
            )
        ],
        service_key,
    )
    assert parsed.series == {ServiceKey("ns", "victim"): [(60.0, 2.0), (360.0, 0.0), (420.0, 4.0)]}


def test_bounds_are_closed_and_reject_non_finite() -> None:
    assert plausible.COUNT(0.0) == 0.0 and plausible.COUNT(plausible.MAX_READING) == plausible.MAX_READING
    assert plausible.FRACTION(-0.0) == 0.0
    for bounds in (plausible.COUNT, plausible.FRACTION, plausible.RATE, plausible.TOKENS, plausible.REPLICAS):
        assert bounds(math.nan) is None and bounds(math.inf) is None and bounds(None) is None
