"""Result parsing: empty results, NaN, stale samples, series that are not ours."""

from __future__ import annotations

import math

from inferfleet.autoscaling.promql.parse import (
    ServiceKey,
    TierKey,
    parse_matrix,
    parse_sample,
    parse_vector,
    service_key,
    tier_key,
)
from tests.toolkit.prometheus import a_range, a_sample, service_labels, tier_labels

KEY = TierKey("ns", "svc", "h100")


def test_empty_result_is_empty_not_zero() -> None:
    parsed = parse_vector([])
    assert parsed.values == {}
    assert parsed.problems == []


def test_value_strings_become_floats() -> None:
    parsed = parse_vector([a_sample("3"), a_sample("0.25", inferfleet_tier="l4")])
    assert parsed.values == {KEY: 3.0, TierKey("ns", "svc", "l4"): 0.25}


def test_nan_means_present_without_a_value() -> None:
    parsed = parse_vector([a_sample("NaN")])
    assert KEY in parsed.values
    assert parsed.values[KEY] is None


def test_infinities_are_kept_for_the_caller_to_judge() -> None:
    assert parse_vector([a_sample("+Inf")]).values[KEY] == math.inf


def test_series_missing_a_grouping_label_is_dropped_with_a_problem() -> None:
    item = a_sample("2", at_s=1, labels=service_labels())
    empty_tier = a_sample("2", inferfleet_tier="")
    parsed = parse_vector([item, empty_tier])
    assert parsed.values == {}
    assert len(parsed.problems) == 2


def test_malformed_samples_are_dropped() -> None:
    bad = [
        a_sample("1", at_s="x"),
        a_sample("one", at_s=1),
        {"metric": tier_labels()},
        "not a dict",
    ]
    parsed = parse_vector(bad)
    assert parsed.values == {}
    assert len(parsed.problems) == 4


def test_stale_sample_is_dropped_when_older_than_max_age() -> None:
    parsed = parse_vector(
        [a_sample("5", at_s=900.0), a_sample("7", at_s=995.0, inferfleet_tier="l4")],
        eval_time_s=1000.0,
        max_age_s=30,
    )
    assert parsed.values == {TierKey("ns", "svc", "l4"): 7.0}
    assert any("stale" in problem for problem in parsed.problems)


def test_duplicate_key_keeps_first() -> None:
    parsed = parse_vector([a_sample("1"), a_sample("2")])
    assert parsed.values == {KEY: 1.0}
    assert parsed.problems


def test_parse_sample_edge_cases() -> None:
    assert parse_sample([1, "NaN"]) == (1.0, None)
    assert parse_sample([1, "2", 3]) is None
    assert parse_sample(None) is None


def test_matrix_drops_nan_and_inf_points_and_sorts() -> None:
    result = [
        a_range([(30, "3"), (10, "1"), (20, "NaN"), (25, "+Inf"), (40, "bad")]),
        a_range([], inferfleet_tier="l4"),
    ]
    parsed = parse_matrix(result, tier_key)
    assert parsed.series[KEY] == [(10.0, 1.0), (30.0, 3.0)]
    assert parsed.series[TierKey("ns", "svc", "l4")] == []
    assert len(parsed.problems) == 1


def test_matrix_by_service_needs_only_namespace_and_service() -> None:
    result = [a_range([(60, "2")], labels=service_labels())]
    assert parse_matrix(result, service_key).series == {ServiceKey("ns", "svc"): [(60.0, 2.0)]}
    assert parse_matrix(result, tier_key).series == {}


def test_matrix_empty_and_unlabelled() -> None:
    assert parse_matrix([], tier_key).series == {}
    parsed = parse_matrix([a_range([(1, "1")], labels={})], tier_key)
    assert parsed.series == {}
    assert parsed.problems
