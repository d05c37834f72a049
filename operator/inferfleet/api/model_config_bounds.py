"""Bounds on an inline architecture (`spec.model.config`, the keys of a config.json). Pure.

The planner sizes weights, KV cache and layers from these numbers, and some of its work
grows with them (one entry per layer, one pass per layer kind), so a spec saying
`num_hidden_layers: 1e8` used to cost a minute and a gigabyte per plan, and
`hidden_size: 1e308` overflowed into a crash of every reconcile pass. Every number the
planner reads is checked here: a real number (not a bool, not NaN or infinite), a whole
number where config.json has one, and within a bound.

Each bound is the largest value among published models' config.json files times a wide
margin (so a model twice the size of today's largest still plans), per key family:

- layers: 126 (Llama-3.1-405B), 118 (PaLM-540B) → 1,024;
- hidden size: 16,384 (Llama-3.1-405B), 18,432 (PaLM), 20,480 (MT-NLG 530B) → 131,072;
- attention heads / KV heads: 128 (Llama-3.1-405B, DeepSeek-V3) → 1,024;
- head dim: 256 (Gemma 2/3), 192 (DeepSeek MLA q head) → 4,096;
- FFN width: 53,248 (Llama-3.1-405B), 81,920 (MT-NLG) → 1,048,576;
- vocabulary: 262,144 (Gemma 3), 256,000 (Gemma 2) → 4,194,304;
- context: 10,485,760 (Llama 4 Scout) → 134,217,728 (2^27), and a RoPE factor of at most
  1,024 (published ones are 4-64);
- experts: 384 (Kimi K2), 256 (DeepSeek-V3) → 4,096; experts per token 8-16 → 256;
  shared experts 1-2 → 64;
- MLA ranks: kv_lora_rank 512, q_lora_rank 1,536 (DeepSeek-V3) → 65,536.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]

MAX_LAYERS: Final = 1024
MAX_POSITIONS: Final = 2**27
MAX_ROPE_FACTOR: Final = 1024.0


@dataclass(frozen=True)
class Bound:
    """A family of config.json keys meaning the same number, and its allowed range."""

    keys: tuple[str, ...]
    high: int
    low: int = 0


BOUNDS: Final[tuple[Bound, ...]] = (
    Bound(("num_hidden_layers", "n_layer", "num_layers"), MAX_LAYERS, low=1),
    Bound(("hidden_size", "n_embd", "d_model"), 131_072, low=1),
    Bound(("num_attention_heads", "n_head", "num_heads"), 1024, low=1),
    Bound(("num_key_value_heads", "num_kv_heads", "n_head_kv"), 1024, low=1),
    Bound(("head_dim",), 4096, low=1),
    Bound(("intermediate_size", "ffn_hidden_size", "n_inner"), 1_048_576),
    Bound(("moe_intermediate_size", "shared_expert_intermediate_size"), 1_048_576),
    Bound(("vocab_size", "padded_vocab_size"), 4_194_304),
    Bound(("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"), MAX_POSITIONS),
    Bound(("original_max_position_embeddings",), MAX_POSITIONS),
    Bound(("sliding_window",), MAX_POSITIONS),
    Bound(("sliding_window_pattern",), MAX_LAYERS),
    Bound(("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), 4096),
    Bound(("num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k"), 256),
    Bound(("n_shared_experts", "num_shared_experts"), 64),
    Bound(("first_k_dense_replace",), MAX_LAYERS),
    Bound(("kv_lora_rank", "q_lora_rank"), 65_536),
    Bound(("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"), 65_536),
)


def _number_problem(value: Any, bound: Bound) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if value != int(value):
        return f"must be a whole number, got {value}"
    if not bound.low <= value <= bound.high:
        return (
            f"{value:g} is outside {bound.low}-{bound.high:,} "
            "(the largest published models use far less; see api.model_config_bounds)"
        )
    return None


def _rope_problems(scaling: Any, loc: Loc) -> list[tuple[Loc, str]]:
    if scaling is None:
        return []
    if not isinstance(scaling, Mapping):
        return [(loc, f"must be a mapping, got {type(scaling).__name__}")]
    problems = _mapping_problems(scaling, loc, (Bound(("original_max_position_embeddings",), MAX_POSITIONS),))
    factor = scaling.get("factor")
    if factor is not None and (
        isinstance(factor, bool)
        or not isinstance(factor, int | float)
        or not math.isfinite(factor)
        or not 0 < factor <= MAX_ROPE_FACTOR
    ):
        problems.append(((*loc, "factor"), f"must be a number in (0, {MAX_ROPE_FACTOR:g}], got {factor!r}"))
    return problems


def _mapping_problems(config: Mapping[str, Any], loc: Loc, bounds: Sequence[Bound]) -> list[tuple[Loc, str]]:
    problems: list[tuple[Loc, str]] = []
    for bound in bounds:
        for key in bound.keys:
            value = config.get(key)
            if value is None:
                continue
            problem = _number_problem(value, bound)
            if problem is not None:
                problems.append(((*loc, key), problem))
    return problems


def config_problems(config: Mapping[str, Any], loc: Loc = ()) -> list[tuple[Loc, str]]:
    """Every out-of-bounds number of an inline config, with the key path that holds it."""
    problems = _mapping_problems(config, loc, BOUNDS)
    layer_types = config.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list) or len(layer_types) > MAX_LAYERS):
        problems.append(((*loc, "layer_types"), f"must be a list of at most {MAX_LAYERS} layer kinds"))
    problems += _rope_problems(config.get("rope_scaling"), (*loc, "rope_scaling"))
    text = config.get("text_config")
    if text is not None:
        if isinstance(text, Mapping):
            problems += config_problems(text, (*loc, "text_config"))
        else:
            problems.append(((*loc, "text_config"), f"must be a mapping, got {type(text).__name__}"))
    return problems


def validation_error(title: str, problems: Sequence[tuple[Loc, str]]) -> ValidationError:
    """A pydantic error whose entries keep their own paths: raised inside a field validator,
    pydantic prefixes them with the field's path (`spec.model.config.hidden_size`)."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError("out_of_bounds", message), loc=loc, input=None)
            for loc, message in problems
        ],
    )


def checked_config(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """`config` unchanged, or a ValidationError naming every out-of-bounds key."""
    if config is None:
        return None
    problems = config_problems(config)
    if problems:
        raise validation_error("config", problems)
    return config
