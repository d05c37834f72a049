"""Hybrid attention: per-layer KV grouped as the release's hybrid KV-cache manager does."""

from __future__ import annotations

from inferfleet.catalog.hf_config import parse_hf_config
from inferfleet.catalog.models import LayerKind
from inferfleet.planner.accounting import accounting
from inferfleet.planner.kv import kv_groups
from inferfleet.planner.releases import resolve_release

FULL: LayerKind = "full"
SLIDING: LayerKind = "sliding"


def test_group_size_follows_the_release_ratio() -> None:
    kinds = (FULL,) * 12 + (SLIDING,) * 17
    # 0.18+ (kv_cache_planning.py): the larger count is the group size within 1.5×.
    assert kv_groups(kinds, 1.5).group_size == 17
    # 0.12-0.17: within 1.25× only; before 0.12 always the smaller count.
    assert kv_groups(kinds, 1.25).group_size == 12
    assert kv_groups((FULL,) * 12 + (SLIDING,) * 13, None).group_size == 12


def test_accounting_takes_the_ratio_from_the_release_table() -> None:
    ratios = {
        version: accounting(resolve_release(None, version)).group_larger_within_ratio
        for version in ("0.11.0", "0.13.0", "0.33.0")
    }
    assert ratios == {"0.11.0": None, "0.13.0": 1.25, "0.33.0": 1.5}


def test_llama4_chunked_local_layers_are_windowed() -> None:
    config = {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "num_hidden_layers": 8,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 202048,
        "max_position_embeddings": 10485760,
        "attention_chunk_size": 8192,
        "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0],
    }
    arch = parse_hf_config(config, name="llama4-mini", parameters_billion=1.0)
    assert arch.sliding_window_tokens == 8192
    assert arch.kinds == (SLIDING,) * 3 + (FULL,) + (SLIDING,) * 3 + (FULL,)
