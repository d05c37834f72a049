"""Assembling per-tier signals and the `inferfleet signals` document."""

from __future__ import annotations

import json

from inferfleet.autoscaling.promql.parse import TierKey
from inferfleet.autoscaling.promql.queries import TTFT_BUCKETS_S, Signal
from inferfleet.autoscaling.promql.signals import assemble, to_document
from tests.toolkit.prometheus import a_vector

H100 = TierKey("ns", "svc", "h100")
L4 = TierKey("ns", "svc", "l4")


def test_join_on_tier_key_with_missing_signals_as_none() -> None:
    snapshot = assemble(
        100.0,
        {
            Signal.waiting: a_vector({H100: 4.0, L4: 0.0}),
            Signal.running: a_vector({H100: 8.0}),
            Signal.ttft_p99: a_vector({H100: 0.75, L4: None}),
            Signal.request_rate: a_vector({H100: -1e-9}),
            Signal.ready_replicas: a_vector({H100: 2.0}),
        },
    )
    h100 = snapshot.tiers[H100]
    assert (h100.waiting, h100.running, h100.ready_replicas) == (4.0, 8.0, 2)
    assert h100.ttft_p99_ms == 750.0
    assert h100.request_rate_rps == 0.0  # clamped: an extrapolation artefact, not negative demand
    assert h100.kv_cache_usage is None
    assert h100.has_load_data
    l4 = snapshot.tiers[L4]
    assert l4.ttft_p99_s is None
    assert not l4.has_load_data  # running absent: partial data for this tier only
    assert not snapshot.unavailable


def test_prompt_tokens_rate_maps_to_its_tier_and_missing_is_none() -> None:
    snapshot = assemble(
        100.0,
        {
            Signal.waiting: a_vector({H100: 1.0, L4: 0.0}),
            Signal.running: a_vector({H100: 2.0, L4: 0.0}),
            Signal.prompt_tokens_rate: a_vector({H100: 5120.0}),
        },
    )
    assert snapshot.tiers[H100].prompt_tokens_rps == 5120.0
    # No series for the L4 tier: unknown, not zero.
    assert snapshot.tiers[L4].prompt_tokens_rps is None


def test_prompt_tokens_rate_nan_is_none_and_negative_is_clamped() -> None:
    snapshot = assemble(0.0, {Signal.prompt_tokens_rate: a_vector({H100: None, L4: -1e-6})})
    assert snapshot.tiers[H100].prompt_tokens_rps is None
    assert snapshot.tiers[L4].prompt_tokens_rps == 0.0


def test_prompt_tokens_rate_failed_query_is_none() -> None:
    snapshot = assemble(
        0.0,
        {Signal.waiting: a_vector({H100: 1.0})},
        failed={Signal.prompt_tokens_rate: "timeout"},
    )
    assert snapshot.tiers[H100].prompt_tokens_rps is None
    assert not snapshot.unavailable


def test_infinite_ttft_is_no_data_and_a_huge_finite_one_is_capped() -> None:
    # +Inf means p99 above the largest bucket (42 minutes): garbage, read as missing
    # (issue 14: non-finite values are never demand). A finite value is capped there.
    snapshot = assemble(0.0, {Signal.ttft_p99: a_vector({H100: float("inf"), L4: 1e9})})
    assert snapshot.tiers[H100].ttft_p99_s is None
    assert snapshot.tiers[L4].ttft_p99_s == TTFT_BUCKETS_S[-1]


def test_all_queries_failed_is_unavailable() -> None:
    snapshot = assemble(0.0, {}, failed=dict.fromkeys(Signal, "connection refused"))
    assert snapshot.unavailable
    assert snapshot.tiers == {}


def test_document_shape_is_the_cli_contract() -> None:
    snapshot = assemble(
        0.0,
        {
            Signal.waiting: a_vector({H100: 1.0, L4: 2.0, TierKey("other", "x", "a"): 0.0}),
            Signal.ttft_p99: a_vector({H100: 0.1234567}),
        },
    )
    document = to_document(snapshot)
    json.dumps(document)
    assert [(s["namespace"], s["name"]) for s in document["services"]] == [("ns", "svc"), ("other", "x")]
    tiers = document["services"][0]["tiers"]
    assert [t["name"] for t in tiers] == ["h100", "l4"]
    assert set(tiers[0]) == {
        "name",
        "waiting",
        "running",
        "ttftP99Ms",
        "kvCacheUsage",
        "requestRateRps",
        "promptTokensRps",
        "generationTokensRps",
        "rejectedRps",
        "promptTokens",
        "generationTokens",
        "readyReplicas",
    }
    assert tiers[0]["ttftP99Ms"] == 123.5
    assert tiers[0]["promptTokensRps"] is None
    assert tiers[1]["running"] is None
