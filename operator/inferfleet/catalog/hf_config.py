"""Parse the keys of a Hugging Face `config.json` into one ModelArch.

Handles dense, GQA/MQA, MLA (kv_lora_rank + qk_rope_head_dim), MoE (experts, shared
experts, leading dense layers), sliding-window layers (explicit `layer_types`, Gemma 2's
alternation, Gemma 3's `sliding_window_pattern`, all-layer windows) and the checkpoint's
own quantization. Multimodal configs are read through their `text_config`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inferfleet.api.model_config_bounds import config_problems
from inferfleet.catalog.models import LayerKind, MlaDims, ModelArch, MoeDims, WeightFormat


class ConfigInvalid(ValueError):
    """A config.json lacks what the planner needs, or holds nonsense."""


def _first(config: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return None


def _int(config: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    value = _first(config, *keys)
    if value is None:
        if default is None:
            raise ConfigInvalid(f"config.json needs one of: {', '.join(keys)}")
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigInvalid(f"config.json key {keys[0]} must be a non-negative number, got {value!r}")
    return int(value)


def checkpoint_format(quantization_config: Any) -> WeightFormat:
    """The weight format a pre-quantized checkpoint declares in `quantization_config`."""
    if not isinstance(quantization_config, Mapping):
        return "none"
    method = str(quantization_config.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        return "fp8"
    if method in ("awq", "awq_marlin"):
        return "awq"
    if method in ("gptq", "gptq_marlin", "auto-round"):
        return "int8" if quantization_config.get("bits") == 8 else "gptq"
    if method in ("mxfp4", "gpt_oss_mxfp4"):
        return "mxfp4"
    if method == "modelopt":
        algo = str(quantization_config.get("quant_algo", "")).upper()
        return "nvfp4" if "FP4" in algo else "fp8"
    if method == "modelopt_fp4":
        return "nvfp4"
    if method == "bitsandbytes":
        return "int8" if quantization_config.get("load_in_8bit") else "gptq"
    if method == "compressed-tensors":
        fmt = str(quantization_config.get("format", "")).lower()
        if "nvfp4" in fmt:
            return "nvfp4"
        if "float" in fmt:
            return "fp8"
        if "int-quantized" in fmt:
            return "int8"
        if "pack" in fmt:
            return "gptq"
        return "fp8"
    return "none"


_LAYER_INDEX = re.compile(r"layers\.(\d+)\.")


def _skipped_modules(quantization_config: Any, num_layers: int) -> tuple[bool, tuple[int, ...]]:
    """(attention left unquantized in every layer, layers whose MLP is left unquantized),
    from `modules_to_not_convert` (fbgemm, bitsandbytes) or `ignore` (compressed-tensors)."""
    if not isinstance(quantization_config, Mapping):
        return (False, ())
    names = quantization_config.get("modules_to_not_convert") or quantization_config.get("ignore") or []
    if not isinstance(names, list):
        return (False, ())
    attention_layers: set[int] = set()
    attention_everywhere = False
    mlp_layers: set[int] = set()
    for name in names:
        if not isinstance(name, str):
            continue
        match = _LAYER_INDEX.search(name)
        if "self_attn" in name or "attention" in name:
            if match is None or "*" in name:
                attention_everywhere = True
            else:
                attention_layers.add(int(match.group(1)))
        elif "mlp" in name and match is not None:
            mlp_layers.add(int(match.group(1)))
    everywhere = attention_everywhere or (num_layers > 0 and len(attention_layers) >= num_layers)
    return (everywhere, tuple(sorted(layer for layer in mlp_layers if layer < num_layers)))


def _weight_block(quantization_config: Any) -> tuple[int, int] | None:
    if not isinstance(quantization_config, Mapping):
        return None
    block = quantization_config.get("weight_block_size")
    if (
        isinstance(block, list)
        and len(block) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in block)
    ):
        return (int(block[0]), int(block[1]))
    return None


def _kind(sliding: bool) -> LayerKind:
    return "sliding" if sliding else "full"


def _layer_kinds(config: Mapping[str, Any], num_layers: int) -> tuple[tuple[LayerKind, ...], int | None]:
    window = config.get("sliding_window")
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != num_layers:
            raise ConfigInvalid(f"layer_types has {len(layer_types)} entries for {num_layers} layers")
        kinds = tuple(_kind("sliding" in str(kind) or "local" in str(kind)) for kind in layer_types)
        return (kinds, int(window) if window and "sliding" in kinds else None)
    chunk = config.get("attention_chunk_size")
    no_rope = config.get("no_rope_layers")
    if isinstance(chunk, int) and chunk > 0 and isinstance(no_rope, list) and len(no_rope) == num_layers:
        # Llama 4: RoPE layers attend within chunks of `attention_chunk_size` tokens
        # (vLLM's ChunkedLocalAttentionSpec keeps one chunk plus the step's tokens per
        # request, as a sliding window does); the NoPE layers (0) are global.
        return (tuple(_kind(bool(flag)) for flag in no_rope), chunk)
    if not window or config.get("use_sliding_window") is False:
        return ((), None)
    window = int(window)
    model_type = str(config.get("model_type", ""))
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:
        # Gemma 3: every `pattern`-th layer is global, the rest are local.
        return (tuple(_kind((i + 1) % pattern != 0) for i in range(num_layers)), window)
    if model_type.startswith("gemma2"):
        # Gemma 2 alternates local (even layers) and global attention.
        return (tuple(_kind(i % 2 == 0) for i in range(num_layers)), window)
    max_positions = _int(config, "max_position_embeddings", default=0)
    if max_positions and window >= max_positions:
        return ((), None)  # a window as long as the context is no window
    return ((_kind(True),) * num_layers, window)


def _moe(config: Mapping[str, Any], intermediate: int) -> MoeDims | None:
    experts = _int(
        config, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", default=0
    )
    if experts <= 1:
        return None
    per_token = _int(config, "num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k", default=2)
    expert_width = _int(config, "moe_intermediate_size", default=intermediate)
    shared = _int(config, "n_shared_experts", "num_shared_experts", default=0)
    shared_width = _int(config, "shared_expert_intermediate_size", default=shared * expert_width)
    if shared_width and not shared:
        shared = 1
    return MoeDims(
        num_experts=experts,
        experts_per_token=per_token,
        expert_intermediate_size=expert_width,
        num_shared_experts=shared,
        shared_intermediate_size=shared_width,
        first_dense_layers=_int(config, "first_k_dense_replace", default=0),
    )


def _config_positions(config: Mapping[str, Any]) -> int:
    return _int(
        config, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", default=4096
    )


def _rope_scaling(config: Mapping[str, Any]) -> tuple[str, float]:
    """(rope type, factor > 1 or 1.0) of the config's `rope_scaling`."""
    scaling = config.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        return ("default", 1.0)
    kind = str(scaling.get("rope_type", scaling.get("type", "default"))).lower()
    factor = scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 1:
        return (kind, 1.0)
    return (kind, float(factor))


def _max_positions(config: Mapping[str, Any]) -> int:
    positions = _config_positions(config)
    kind, factor = _rope_scaling(config)
    # vLLM stretches the derived length for RoPE scalings that extend context
    # (yarn, dynamic, linear); llama3/longrope already state the long length, and so
    # does Gemma 3, whose linear factor vLLM does not apply again (vllm/config/model.py
    # `_get_and_verify_max_len`: `"gemma3" not in hf_config.model_type`).
    if (
        kind in ("yarn", "dynamic", "linear")
        and factor > 1
        and "gemma3" not in str(config.get("model_type", ""))
    ):
        scaling = config.get("rope_scaling")
        base = (
            _int(scaling, "original_max_position_embeddings", default=positions)
            if isinstance(scaling, Mapping)
            else positions
        )
        positions = max(positions, int(base * factor))
    return positions


def _rope_cache_elements(config: Mapping[str, Any], *, rotary_dim: int, local_rope: bool) -> int:
    """Values in the cos/sin caches of the model's rotary embeddings, as vLLM builds them
    (vllm/model_executor/layers/rotary_embedding: `RotaryEmbeddingBase.__init__` registers
    `cos_sin_cache`, `length × rotary_dim`, in the model dtype; `get_rope` shares one per
    distinct RoPE). The length is `max_position`, times the factor for linear and dynamic
    scaling, `original_max_position × factor` for YaRN. `local_rope`: Gemma 3's sliding
    layers build a second, unscaled RoPE (`rope_local_base_freq`, vllm/model_executor/
    models/gemma3.py)."""
    positions = _config_positions(config)
    kind, factor = _rope_scaling(config)
    length = positions
    if factor > 1 and kind in ("linear", "dynamic"):
        length = int(positions * factor)
    elif factor > 1 and kind in ("yarn", "deepseek_yarn"):
        scaling = config.get("rope_scaling")
        base = (
            _int(scaling, "original_max_position_embeddings", default=positions)
            if isinstance(scaling, Mapping)
            else positions
        )
        length = int(base * factor)
    elements = length * rotary_dim
    if local_rope:
        elements += positions * rotary_dim
    return elements


def parse_hf_config(config: Mapping[str, Any], name: str, parameters_billion: float) -> ModelArch:
    """One ModelArch from config.json keys; raise ConfigInvalid naming what is missing."""
    if not isinstance(config, Mapping):
        raise ConfigInvalid("config must be a mapping of config.json keys")
    # A config.json fetched from a source is as untrusted as an inline one: same bounds.
    problems = config_problems(config)
    if problems:
        raise ConfigInvalid(
            "; ".join(f"{'.'.join(str(part) for part in loc)}: {message}" for loc, message in problems[:5])
        )
    text = config.get("text_config")
    merged: dict[str, Any] = dict(config)
    if isinstance(text, Mapping):
        merged.update(text)
        merged.setdefault("quantization_config", config.get("quantization_config"))
    config = merged
    num_layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    heads = _int(config, "num_attention_heads", "n_head", "num_heads")
    if num_layers == 0 or hidden == 0 or heads == 0:
        raise ConfigInvalid("num_hidden_layers, hidden_size and num_attention_heads must be positive")
    multi_query = bool(config.get("multi_query"))
    kv_heads = _int(
        config, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=1 if multi_query else heads
    )
    if kv_heads == 0 or heads % kv_heads:
        raise ConfigInvalid(
            f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})"
        )
    intermediate = _int(config, "intermediate_size", "ffn_hidden_size", "n_inner", default=4 * hidden)
    head_dim = _int(config, "head_dim", default=hidden // heads)
    mla: MlaDims | None = None
    if config.get("kv_lora_rank"):
        mla = MlaDims(
            q_lora_rank=_int(config, "q_lora_rank", default=0),
            kv_lora_rank=_int(config, "kv_lora_rank"),
            qk_rope_head_dim=_int(config, "qk_rope_head_dim", default=64),
            qk_nope_head_dim=_int(config, "qk_nope_head_dim", default=128),
            v_head_dim=_int(config, "v_head_dim", default=128),
        )
    kinds, window = _layer_kinds(config, num_layers)
    model_type = str(config.get("model_type", ""))
    rope = _rope_cache_elements(
        config,
        rotary_dim=mla.qk_rope_head_dim if mla is not None else head_dim,
        local_rope=model_type.startswith("gemma3") and "sliding" in kinds,
    )
    dtype = str(_first(config, "torch_dtype", "dtype") or "bfloat16").replace("torch.", "")
    if dtype not in ("bfloat16", "float16", "float32"):
        dtype = "bfloat16"
    if parameters_billion <= 0:
        raise ConfigInvalid("parametersBillion must be positive")
    quantization_config = config.get("quantization_config")
    skip_attention, skip_mlp_layers = _skipped_modules(quantization_config, num_layers)
    return ModelArch(
        name=name,
        parameters_billion=float(parameters_billion),
        num_layers=num_layers,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=_int(config, "vocab_size", "padded_vocab_size", default=32000),
        max_position_embeddings=_max_positions(config),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        torch_dtype=dtype,
        mla=mla,
        moe=_moe(config, intermediate),
        sliding_window_tokens=window,
        layer_kinds=kinds,
        checkpoint_format=checkpoint_format(quantization_config),
        unquantized_attention=skip_attention,
        unquantized_mlp_layers=skip_mlp_layers,
        weight_block=_weight_block(quantization_config),
        model_type=model_type,
        rope_cache_elements=rope,
    )


# --- the planner's part of a config.json (what a probe reports: caching.precache.probe) --------

# Every config.json key `parse_hf_config` and the bounds (api.model_config_bounds) read;
# tests/unit/catalog/test_planner_config.py checks the list against this module's source.
PLANNER_KEYS: frozenset[str] = frozenset(
    {
        "text_config",
        "quantization_config",
        "rope_scaling",
        "layer_types",
        "num_hidden_layers", "n_layer", "num_layers",
        "hidden_size", "n_embd", "d_model",
        "num_attention_heads", "n_head", "num_heads",
        "multi_query",
        "num_key_value_heads", "num_kv_heads", "n_head_kv",
        "intermediate_size", "ffn_hidden_size", "n_inner",
        "head_dim",
        "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
        "sliding_window", "use_sliding_window", "sliding_window_pattern",
        "attention_chunk_size", "no_rope_layers",
        "model_type",
        "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
        "torch_dtype", "dtype",
        "vocab_size", "padded_vocab_size",
        "tie_word_embeddings",
        "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
        "num_experts_per_tok", "moe_topk", "num_experts_per_token", "top_k",
        "moe_intermediate_size", "shared_expert_intermediate_size",
        "n_shared_experts", "num_shared_experts",
        "first_k_dense_replace",
    }
)  # fmt: skip
ROPE_KEYS: frozenset[str] = frozenset({"rope_type", "type", "factor", "original_max_position_embeddings"})
QUANTIZATION_KEYS: frozenset[str] = frozenset(
    {"quant_method", "bits", "quant_algo", "load_in_8bit", "format", "weight_block_size"}
)


def _skipped_names(quantization_config: Mapping[str, Any]) -> list[str] | None:
    """`modules_to_not_convert`/`ignore` reduced to what `_skipped_modules` tells apart:
    attention everywhere, attention of layer i, MLP of layer i (lists of every expert's
    gate run to thousands of names)."""
    names = quantization_config.get("modules_to_not_convert") or quantization_config.get("ignore")
    if not isinstance(names, list):
        return None  # read as "nothing skipped", as an absent list is
    out: dict[str, None] = {}
    for name in names:
        if not isinstance(name, str):
            continue
        match = _LAYER_INDEX.search(name)
        if "self_attn" in name or "attention" in name:
            out["self_attn" if match is None or "*" in name else f"layers.{match.group(1)}.self_attn"] = None
        elif "mlp" in name and match is not None:
            out[f"layers.{match.group(1)}.mlp"] = None
    return list(out)


def planner_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a config.json the planner reads, reduced so `parse_hf_config` (and the
    bounds) give the same answer for it as for the whole file: other keys dropped,
    `layer_types` as sliding/full, the skipped-module lists as the layers they name."""
    out: dict[str, Any] = {}
    for key in PLANNER_KEYS:
        if key not in config:
            continue
        value = config[key]
        if key == "text_config" and isinstance(value, Mapping):
            value = planner_config(value)
        elif key == "rope_scaling" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in ROPE_KEYS}
        elif key == "layer_types" and isinstance(value, list):
            value = [_kind("sliding" in str(kind) or "local" in str(kind)) for kind in value]
        elif key == "quantization_config" and isinstance(value, Mapping):
            reduced = {k: v for k, v in value.items() if k in QUANTIZATION_KEYS}
            skipped = _skipped_names(value)
            if skipped:
                reduced["ignore"] = skipped
            value = reduced
        out[key] = value
    return out
