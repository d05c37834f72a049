"""Model architecture records: what the memory model needs to know about a model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AttentionKind = Literal["mha", "gqa", "mqa", "mla"]
LayerKind = Literal["full", "sliding"]
# Weight formats the planner sizes; "none" means the checkpoint's own float dtype.
WeightFormat = Literal["none", "fp8", "int8", "awq", "gptq", "mxfp4", "nvfp4"]


@dataclass(frozen=True, slots=True)
class MlaDims:
    """Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds one latent per token."""

    q_lora_rank: int  # 0 when queries are projected directly
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int

    @property
    def latent_dim(self) -> int:
        """Values cached per token per layer: the compressed KV plus the shared RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True)
class MoeDims:
    """Mixture-of-experts feed-forward layers."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # total width of the shared expert(s)
    first_dense_layers: int = 0  # leading layers with a dense MLP (DeepSeek first_k_dense_replace)


@dataclass(frozen=True, slots=True)
class ModelArch:
    """One model's architecture, parsed from its HF config.json."""

    name: str
    parameters_billion: float
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    torch_dtype: str = "bfloat16"
    mla: MlaDims | None = None
    moe: MoeDims | None = None
    sliding_window_tokens: int | None = None
    # One entry per layer; empty means every layer is full attention.
    layer_kinds: tuple[LayerKind, ...] = ()
    # The checkpoint's own quantization (from quantization_config), "none" if unquantized.
    checkpoint_format: WeightFormat = "none"
    # Parts the checkpoint's quantization leaves in 16 bits (modules_to_not_convert /
    # ignore): every layer's attention projections, and the MLPs of these layers.
    unquantized_attention: bool = False
    unquantized_mlp_layers: tuple[int, ...] = ()
    # Block-wise quantization's weight block (rows, columns), e.g. (128, 128) for DeepSeek
    # and Qwen FP8 checkpoints: each rank's slice of a weight must hold whole blocks.
    weight_block: tuple[int, int] | None = None
    model_type: str = ""
    # Elements of the RoPE cos/sin caches vLLM keeps on every GPU (one cache per distinct
    # rotary embedding, `length × rotary_dim` values in the model dtype): loaded with the
    # model, so part of what "Model loading took" reports (hf_config._rope_cache_elements).
    rope_cache_elements: int = 0

    @property
    def attention_sinks(self) -> bool:
        """gpt-oss attends through learned sinks, which vLLM serves on NVIDIA only with
        FlashAttention 3 (vLLM issue #22325)."""
        return self.model_type == "gpt_oss"

    @property
    def attention_kind(self) -> AttentionKind:
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == 1:
            return "mqa"
        if self.num_kv_heads < self.num_attention_heads:
            return "gqa"
        return "mha"

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def kinds(self) -> tuple[LayerKind, ...]:
        if self.layer_kinds:
            return self.layer_kinds
        full: LayerKind = "full"
        return (full,) * self.num_layers

    @property
    def sliding_layers(self) -> int:
        return sum(1 for kind in self.kinds if kind == "sliding")

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.torch_dtype == "float32" else 2

    def describe(self) -> str:
        """A short human description for reasons, e.g. `70.6B dense GQA (64 q / 8 kv heads)`."""
        parts = [f"{self.parameters_billion:g}B"]
        if self.moe is not None:
            parts.append(f"MoE ({self.moe.experts_per_token} of {self.moe.num_experts} experts per token)")
        else:
            parts.append("dense")
        kind = self.attention_kind
        if kind == "mla":
            parts.append(f"MLA (latent {self.mla.latent_dim if self.mla else 0})")
        else:
            parts.append(f"{kind.upper()} ({self.num_attention_heads} q / {self.num_kv_heads} kv heads)")
        if self.sliding_layers:
            parts.append(f"{self.sliding_layers}/{self.num_layers} sliding-window layers")
        return " ".join(parts)
