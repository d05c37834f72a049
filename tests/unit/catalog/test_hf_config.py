"""config.json parsing: one ModelArch for every attention and MLP layout."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.catalog import ConfigInvalid, checkpoint_format, parse_hf_config

LLAMA_8B: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


def test_dense_gqa() -> None:
    arch = parse_hf_config(LLAMA_8B, "llama", 8.03)
    assert arch.attention_kind == "gqa" and arch.head_dim == 128 and not arch.is_moe
    assert arch.kinds == ("full",) * 32 and arch.sliding_layers == 0
    assert arch.checkpoint_format == "none" and arch.torch_dtype == "bfloat16"


def test_mha_and_mqa() -> None:
    assert parse_hf_config({**LLAMA_8B, "num_key_value_heads": 32}, "m", 7).attention_kind == "mha"
    falcon = {
        "model_type": "falcon",
        "hidden_size": 4544,
        "n_head": 71,
        "n_layer": 32,
        "multi_query": True,
        "vocab_size": 65024,
    }
    arch = parse_hf_config(falcon, "falcon", 7.2)
    assert arch.attention_kind == "mqa" and arch.num_kv_heads == 1 and arch.head_dim == 64


def test_mla_moe_deepseek_v3() -> None:
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "vocab_size": 129280,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    arch = parse_hf_config(config, "dsv3", 671)
    assert arch.attention_kind == "mla" and arch.mla is not None and arch.mla.latent_dim == 576
    assert arch.moe is not None
    assert (arch.moe.num_experts, arch.moe.experts_per_token, arch.moe.expert_intermediate_size) == (
        256,
        8,
        2048,
    )
    assert arch.moe.shared_intermediate_size == 2048 and arch.moe.first_dense_layers == 3
    assert arch.checkpoint_format == "fp8"


def test_moe_without_separate_expert_width_uses_intermediate_size() -> None:
    arch = parse_hf_config({**LLAMA_8B, "num_local_experts": 8, "num_experts_per_tok": 2}, "mixtral", 46.7)
    assert arch.moe is not None and arch.moe.expert_intermediate_size == 14336


def test_sliding_windows() -> None:
    gemma2 = parse_hf_config(
        {**LLAMA_8B, "model_type": "gemma2", "sliding_window": 4096, "num_hidden_layers": 4}, "g2", 9
    )
    assert gemma2.kinds == ("sliding", "full", "sliding", "full") and gemma2.sliding_window_tokens == 4096
    gemma3 = parse_hf_config(
        {
            **LLAMA_8B,
            "model_type": "gemma3_text",
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
            "num_hidden_layers": 12,
        },
        "g3",
        12,
    )
    assert gemma3.kinds.count("full") == 2 and gemma3.kinds[5] == "full" and gemma3.kinds[0] == "sliding"
    explicit = parse_hf_config(
        {
            **LLAMA_8B,
            "num_hidden_layers": 2,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"],
        },
        "oss",
        20,
    )
    assert explicit.kinds == ("sliding", "full")
    qwen = parse_hf_config({**LLAMA_8B, "sliding_window": 4096, "use_sliding_window": False}, "qwen", 7)
    assert qwen.sliding_layers == 0 and qwen.sliding_window_tokens is None
    mistral = parse_hf_config({**LLAMA_8B, "sliding_window": 4096}, "mistral-v0.1", 7)
    assert mistral.sliding_layers == 32


def test_multimodal_text_config_and_rope_scaling() -> None:
    config = {
        "model_type": "gemma3",
        "text_config": {
            **LLAMA_8B,
            "max_position_embeddings": 32768,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
        },
        "quantization_config": {"quant_method": "awq", "bits": 4},
    }
    arch = parse_hf_config(config, "mm", 12)
    assert (
        arch.hidden_size == 4096
        and arch.max_position_embeddings == 131072
        and arch.checkpoint_format == "awq"
    )


@pytest.mark.parametrize(
    ("quantization_config", "expected"),
    [
        ({"quant_method": "fbgemm_fp8"}, "fp8"),
        ({"quant_method": "gptq", "bits": 4}, "gptq"),
        ({"quant_method": "gptq", "bits": 8}, "int8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "fp8"),
        ({"quant_method": "compressed-tensors", "format": "int-quantized"}, "int8"),
        ({"quant_method": "compressed-tensors", "format": "pack-quantized"}, "gptq"),
        (None, "none"),
    ],
)
def test_checkpoint_formats(quantization_config: Any, expected: str) -> None:
    assert checkpoint_format(quantization_config) == expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"hidden_size": 4096, "num_attention_heads": 32}, "num_hidden_layers"),
        ({**LLAMA_8B, "num_key_value_heads": 7}, "multiple of num_key_value_heads"),
        ({**LLAMA_8B, "hidden_size": "big"}, "hidden_size"),
        ({**LLAMA_8B, "layer_types": ["full_attention"]}, "layer_types"),
    ],
)
def test_bad_configs_name_the_problem(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigInvalid, match=message):
        parse_hf_config(config, "bad", 1)
