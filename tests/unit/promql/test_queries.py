"""Query building: one query per signal, over the operator's own scrape jobs only, grouped
by the labels Prometheus attaches to the target (never ones an endpoint exports)."""

from __future__ import annotations

import re

import pytest

from inferfleet.api.labels import SCRAPE_JOB_PICKER, SCRAPE_JOB_SERVER
from inferfleet.autoscaling.promql import queries
from inferfleet.autoscaling.promql.queries import (
    MetricNames,
    QueryConfig,
    Signal,
    align_down,
    exposed_names,
    series,
    signal_queries,
)

BY_CLAUSE = "by (namespace, inferfleet_service, inferfleet_tier"
# Every metric name a query can select, as `name{` (a selector opening).
SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")


def every_query(config: QueryConfig | None = None) -> dict[str, str]:
    config = config or QueryConfig()
    return {
        **{str(signal): query for signal, query in signal_queries(config).items()},
        "door": queries.door_query(config),
        "history": queries.history_query(config),
        "kvCapacity": queries.kv_capacity_query(config),
        "podLoad": queries.pod_load_query(config),
    }


def test_one_query_per_signal_and_all_grouped_by_target_labels() -> None:
    built = signal_queries(QueryConfig())
    assert set(built) == set(Signal)
    for query in built.values():
        assert BY_CLAUSE in query
        # Batched: nothing selects one object.
        assert 'inferfleet_service="' not in query and 'namespace="' not in query


@pytest.mark.parametrize("name", sorted(every_query()))
def test_every_selector_reads_the_operators_own_scrape_job_only(name: str) -> None:
    """A series scraped by anyone else's monitor never counts, whatever labels it carries:
    each selector matches the job the operator's PodMonitors set, and the pickers' queue
    only theirs."""
    query = every_query()[name]
    found = SELECTOR.findall(query)
    assert found, query
    job = SCRAPE_JOB_PICKER if name == "door" else SCRAPE_JOB_SERVER
    for metric, matchers in found:
        assert matchers.split(",")[0] == f'job="{job}"', (metric, matchers)
    # Nothing selects by labels an endpoint could report about itself under the old names.
    assert "inferfleet_namespace" not in query
    assert "__name__" not in query


@pytest.mark.parametrize("name", sorted(every_query()))
def test_no_selector_spans_two_names(name: str) -> None:
    """rate() and timestamp() drop the metric name: one regex selector over `vllm:x` and
    `vllm_x` fails the whole query for every tenant ("vector cannot contain metrics with
    the same labelset") when a single pod exposes both. Each name is selected alone."""
    query = every_query()[name]
    assert "__name__" not in query
    assert all(metric for metric, _ in SELECTOR.findall(query))


def test_every_exposed_form_of_every_name_is_read() -> None:
    query = signal_queries(QueryConfig())[Signal.kv_cache_usage]
    for name in (
        "vllm:kv_cache_usage_perc",
        "vllm_kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm_gpu_cache_usage_perc",
    ):
        assert series(name) in query
    assert exposed_names(["vllm:a", "plain_name", "vllm:a"]) == ["vllm:a", "vllm_a", "plain_name"]


def test_kv_usage_prefers_current_name_then_legacy() -> None:
    names = MetricNames().kv_cache_usage
    assert names == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    query = signal_queries(QueryConfig())[Signal.kv_cache_usage]
    # `or` keeps the left operand when a pod exposes both names, so the order matters.
    current = query.index(series("vllm:kv_cache_usage_perc"))
    legacy = query.index(series("vllm:gpu_cache_usage_perc"))
    assert current < query.index(" or ") < legacy


def test_gauges_filter_stale_samples_by_their_own_timestamp() -> None:
    query = signal_queries(QueryConfig(max_sample_age_s=45))[Signal.waiting]
    waiting = series("vllm:num_requests_waiting")
    assert f"({waiting} and (time() - timestamp({waiting})) < 45)" in query
    assert query.startswith("sum by (")


@pytest.mark.parametrize(
    ("signal", "high"),
    [
        (Signal.waiting, "1000000000000.0"),
        (Signal.running, "1000000000000.0"),
        (Signal.kv_cache_usage, "1.0"),
    ],
)
def test_each_pods_gauge_is_checked_before_the_tier_sums_it(signal: Signal, high: str) -> None:
    """One pod's -50 must not hide in its siblings' load: a series outside the signal's
    range becomes NaN before the sum, so the tier's reading is NaN (missing), alone."""
    query = signal_queries(QueryConfig())[signal]
    assert f") + 0) >= 0.0 <= {high}) or ((" in query
    assert query.endswith(" * NaN))")


def test_ttft_is_a_quantile_over_rate_of_buckets_grouped_with_le() -> None:
    query = signal_queries(QueryConfig(rate_window_s=30, ttft_quantile=0.99))[Signal.ttft_p99]
    assert query.startswith("histogram_quantile(0.99, sum by (")
    assert f"{BY_CLAUSE}, le)" in query
    buckets = series("vllm:time_to_first_token_seconds_bucket")
    assert f"rate({buckets}[30s])" in query


def test_ready_counts_pods_not_engines() -> None:
    query = signal_queries(QueryConfig())[Signal.ready_replicas]
    assert query.startswith("count by (")
    assert f"group {BY_CLAUSE}, pod)" in query


def test_rate_and_history_use_the_finished_requests_counter() -> None:
    config = QueryConfig(rate_window_s=60, history_rate_window_s=180)
    finished = series("vllm:request_success_total")
    assert f"rate({finished}[60s])" in signal_queries(config)[Signal.request_rate]
    history = queries.history_query(config)
    # Without a split's prefill pods: each of their requests is finished again on a decode pod.
    not_prefill = series("vllm:request_success_total", matchers='inferfleet_role!="prefill"')
    assert f"rate({not_prefill}[180s])" in history
    # The forecaster predicts a service's demand: the history is summed over its tiers.
    assert history.startswith("sum by (namespace, inferfleet_service) (")


def test_prompt_tokens_rate_reads_both_name_forms_of_the_counter() -> None:
    assert MetricNames().prompt_tokens == ("vllm:prompt_tokens_total",)
    built = signal_queries(QueryConfig(rate_window_s=90))
    query = built[Signal.prompt_tokens_rate]
    current, escaped = series("vllm:prompt_tokens_total"), series("vllm_prompt_tokens_total")
    assert query == f"sum {BY_CLAUSE}) (rate({current}[90s]) or rate({escaped}[90s]))"
    # Batched with the others: one more query per loop, whatever the number of services.
    assert len(built) == len(Signal) == 15


def test_the_door_sums_per_pool_before_renaming_the_pool_into_the_tier() -> None:
    """label_replace over raw series could fold two of them into one label set (a picker
    that exports `inferfleet_tier` itself) and fail the query for every tenant."""
    query = queries.door_query(QueryConfig())
    per_pool = "sum by (namespace, inferfleet_service, inference_pool) ("
    assert query.startswith(f"sum {BY_CLAUSE}) (label_replace({per_pool}")


def test_parentheses_balance() -> None:
    for query in every_query().values():
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
