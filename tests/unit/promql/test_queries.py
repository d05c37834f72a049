"""Query building: one query per signal, grouped by exactly the three series labels."""

from __future__ import annotations

import re

import pytest

from inferfleet.promql import queries
from inferfleet.promql.queries import MetricNames, QueryConfig, Signal, align_down, selector, signal_queries

BY_CLAUSE = "by (inferfleet_namespace, inferfleet_service, inferfleet_tier"


def test_one_query_per_signal_and_all_grouped_by_series_labels() -> None:
    built = signal_queries(QueryConfig())
    assert set(built) == set(Signal)
    for query in built.values():
        assert BY_CLAUSE in query
        # Batched: nothing selects one object.
        assert 'inferfleet_service="' not in query


def test_selector_matches_both_exposition_forms_without_a_join() -> None:
    assert selector("vllm:a") == '{__name__=~"vllm:a|vllm_a"}'
    assert selector("plain_name") == '{__name__=~"plain_name"}'


def test_kv_usage_prefers_current_name_then_legacy() -> None:
    names = MetricNames().kv_cache_usage
    assert names == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    query = signal_queries(QueryConfig())[Signal.kv_cache_usage]
    # `or` keeps the left operand when a pod exposes both names, so the order matters.
    current = query.index(selector("vllm:kv_cache_usage_perc"))
    legacy = query.index(selector("vllm:gpu_cache_usage_perc"))
    assert current < query.index(" or ") < legacy


def test_gauges_filter_stale_samples_by_their_own_timestamp() -> None:
    query = signal_queries(QueryConfig(max_sample_age_s=45))[Signal.waiting]
    waiting = selector("vllm:num_requests_waiting")
    assert f"({waiting} and (time() - timestamp({waiting})) < 45)" in query
    assert query.startswith("sum by (")


def test_ttft_is_a_quantile_over_rate_of_buckets_grouped_with_le() -> None:
    query = signal_queries(QueryConfig(rate_window_s=30, ttft_quantile=0.99))[Signal.ttft_p99]
    assert query.startswith("histogram_quantile(0.99, sum by (")
    assert f"{BY_CLAUSE}, le)" in query
    buckets = selector("vllm:time_to_first_token_seconds_bucket")
    assert f"rate({buckets}[30s])" in query


def test_ready_counts_instances_not_engines() -> None:
    query = signal_queries(QueryConfig())[Signal.ready_replicas]
    assert query.startswith("count by (")
    assert f"group {BY_CLAUSE}, instance)" in query


def test_rate_and_history_use_the_finished_requests_counter() -> None:
    config = QueryConfig(rate_window_s=60, history_rate_window_s=180)
    finished = selector("vllm:request_success_total")
    assert f"rate({finished}[60s])" in signal_queries(config)[Signal.request_rate]
    history = queries.history_query(config)
    assert f"rate({finished}[180s])" in history
    # The forecaster predicts a service's demand: the history is summed over its tiers.
    assert history.startswith("sum by (inferfleet_namespace, inferfleet_service) (")


def test_prompt_tokens_rate_reads_both_name_forms_of_the_counter() -> None:
    assert MetricNames().prompt_tokens == ("vllm:prompt_tokens_total",)
    built = signal_queries(QueryConfig(rate_window_s=90))
    query = built[Signal.prompt_tokens_rate]
    assert 'vllm:prompt_tokens_total|vllm_prompt_tokens_total"' in query
    assert query == f"sum {BY_CLAUSE}) (rate({selector('vllm:prompt_tokens_total')}[90s]))"
    # Batched with the others: one more query per loop, whatever the number of services.
    assert len(built) == len(Signal) == 15


def test_parentheses_balance() -> None:
    for query in [*signal_queries(QueryConfig()).values(), queries.history_query(QueryConfig())]:
        depth = 0
        for char in query:
            depth += {"(": 1, ")": -1}.get(char, 0)
            assert depth >= 0
        assert depth == 0
        assert not re.search(r"\s{2,}", query)


@pytest.mark.parametrize(
    "kwargs",
    [{"rate_window_s": 0}, {"max_sample_age_s": -1}, {"history_step_s": 0}, {"ttft_quantile": 1.0}],
)
def test_config_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        QueryConfig(**kwargs)  # type: ignore[arg-type]


def test_align_down() -> None:
    assert align_down(1000.0, 300) == 900.0
    assert align_down(900.0, 300) == 900.0
    assert align_down(1199.9, 300) == 900.0
