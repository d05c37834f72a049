"""The KV capacity query (vllm:cache_config_info) and its parser."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.autoscaling.promql.parse import KvCapacityReading, TierKey, parse_kv_capacity
from inferfleet.autoscaling.promql.queries import QueryConfig, kv_capacity_query
from tests.toolkit.prometheus import a_sample


def test_the_query_counts_replicas_per_tier_and_block_count_in_both_name_forms() -> None:
    query = kv_capacity_query(QueryConfig())
    by = "namespace, inferfleet_service, inferfleet_tier, num_gpu_blocks, block_size"
    assert query.startswith(f"count by ({by})")
    assert f"group by ({by}, pod)" in query  # a pod with several engines counts once
    assert 'vllm:cache_config_info{job="inferfleet-vllm"}' in query
    assert 'vllm_cache_config_info{job="inferfleet-vllm"}' in query


def replicas(tier: str, blocks: Any, block_size: Any = "16", pods: str = "1") -> dict[str, Any]:
    """The query's answer for one tier: `pods` replicas report this block count and size."""
    return a_sample(
        pods, at_s=1_700_000_000, inferfleet_tier=tier, num_gpu_blocks=blocks, block_size=block_size
    )


def test_each_tier_takes_its_smallest_replica_and_counts_all_of_them() -> None:
    parsed = parse_kv_capacity(
        [
            replicas("h100", "30000", pods="2"),
            replicas("h100", "29500"),  # one replica allocated less: it sets the tier's figure
            replicas("l4", "4000", block_size="32"),
            replicas("l4", "None"),  # not allocated yet (starting up)
            a_sample("1", at_s=0, labels={"num_gpu_blocks": "5"}),  # no tier labels
        ]
    )
    assert parsed.tiers == {
        TierKey("ns", "svc", "h100"): KvCapacityReading(29500, 16, 3),
        TierKey("ns", "svc", "l4"): KvCapacityReading(4000, 32, 1),
    }
    assert len(parsed.problems) == 2


@pytest.mark.parametrize(
    ("blocks", "block_size"),
    [
        ("0", "16"),
        ("-5", "16"),
        ("1e9", "16"),
        ("3.5", "16"),
        ("+4000", "16"),
        (" 4000", "16"),
        ("4_000", "16"),
        ("\u0664\u0660\u0660\u0660", "16"),  # Arabic-Indic digits int() would take
        ("4000", "0"),
        ("99999999999999999999", "16"),
        ("4000", str(2**21)),
        ("NaN", "16"),
    ],
)
def test_a_replica_reporting_no_allocation_leaves_its_tier_unknown(blocks: str, block_size: str) -> None:
    """The tier's figure is its smallest replica's: with one replica's unknown, so is the
    tier's (never the others' minimum). Other tiers keep theirs."""
    parsed = parse_kv_capacity(
        [
            replicas("h100", "30000"),
            replicas("h100", blocks, block_size=block_size),
            replicas("l4", "4000"),
        ]
    )
    assert parsed.tiers == {TierKey("ns", "svc", "l4"): KvCapacityReading(4000, 16, 1)}
    assert parsed.problems


@pytest.mark.parametrize("pods", ["0", "-1", "NaN", "+Inf", "1.5", "1e7"])
def test_a_replica_count_that_is_no_count_leaves_its_tier_unknown(pods: str) -> None:
    parsed = parse_kv_capacity([replicas("h100", "30000", pods=pods), replicas("l4", "4000")])
    assert set(parsed.tiers) == {TierKey("ns", "svc", "l4")}
