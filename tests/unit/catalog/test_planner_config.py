"""The planner's keys of a config.json (what a probe reports) stay the ones it reads."""

from __future__ import annotations

import ast
import inspect

from inferfleet.api import model_config_bounds
from inferfleet.catalog import hf_config
from inferfleet.catalog.hf_config import PLANNER_KEYS, QUANTIZATION_KEYS, ROPE_KEYS, planner_config

SKIPPED_LISTS = {"modules_to_not_convert", "ignore"}


def read_keys() -> set[str]:
    """Every string literal hf_config passes to `.get(...)`, `_int(...)` or `_first(...)`."""
    tree = ast.parse(inspect.getsource(hf_config))
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("get", "_int", "_first"):
            continue
        # `.get(key, default)` names one key; `_int(config, *keys, default=...)` several.
        keys = node.args[:1] if name == "get" else node.args[1:]
        found |= {arg.value for arg in keys if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}
    return found


def test_every_key_the_planner_or_the_bounds_read_is_reported() -> None:
    allowed = PLANNER_KEYS | ROPE_KEYS | QUANTIZATION_KEYS | SKIPPED_LISTS
    assert read_keys() - allowed == set()
    bounded = {key for bound in model_config_bounds.BOUNDS for key in bound.keys}
    assert bounded - PLANNER_KEYS == {"original_max_position_embeddings"} <= ROPE_KEYS


def test_the_reduction_keeps_what_decides_and_drops_the_rest() -> None:
    config = {
        "hidden_size": 64,
        "auto_map": {"AutoModel": "x" * 10_000},
        "text_config": {"num_hidden_layers": 2, "chat_template": "y" * 10_000},
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": {"num_bits": 8}}},
            "ignore": ["lm_head", "model.layers.3.mlp.gate", "model.layers.3.mlp.gate", "re:.*self_attn.*"],
        },
        "layer_types": ["sliding_attention", "full_attention", "chunked_local"],
    }
    assert planner_config(config) == {
        "hidden_size": 64,
        "text_config": {"num_hidden_layers": 2},
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "ignore": ["layers.3.mlp", "self_attn"],
        },
        "layer_types": ["sliding", "full", "sliding"],
    }
