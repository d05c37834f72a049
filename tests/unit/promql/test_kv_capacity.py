"""The KV capacity query (vllm:cache_config_info) and its parser."""

from __future__ import annotations

from typing import Any

from inferfleet.promql.parse import KvCapacityReading, TierKey, parse_kv_capacity
from inferfleet.promql.queries import QueryConfig, kv_capacity_query
from tests.toolkit.prometheus import a_sample


def test_the_query_counts_replicas_per_tier_and_block_count_in_both_name_forms() -> None:
    query = kv_capacity_query(QueryConfig())
    by = "inferfleet_namespace, inferfleet_service, inferfleet_tier, num_gpu_blocks, block_size"
    assert query.startswith(f"count by ({by})")
    assert "instance" in query  # a pod with several engines counts once
    assert '{__name__=~"vllm:cache_config_info|vllm_cache_config_info"}' in query


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
