"""What a replica holds beyond the base model's weights, and its peak while loading (pure).

- Online quantization (a 16-bit checkpoint served as FP8) loads every weight at the
  checkpoint's precision and quantizes after loading, so the load peak is the 16-bit
  model's share per GPU (vLLM's FP8 docs: the whole model must first fit at its
  original precision). A pre-quantized checkpoint loads as it is stored.
- LoRA: vLLM preallocates A and B matrices for `--max-loras` adapters at
  `--max-lora-rank` in every targeted projection, at load time.
- Speculative decoding: EAGLE heads and MTP modules add about one decoder layer (and
  one layer of KV cache); a separate draft model adds its own weights and layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.planner.units import GIB
from inferfleet.planner.weights import WeightLayout, weight_layout

# LoRA ranks vLLM accepts for --max-lora-rank (the planner rounds up like the renderer).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# EAGLE-3 drafters predict over a reduced vocabulary of this many tokens.
EAGLE3_DRAFT_VOCAB = 32000
# Present on every GPU while the weights load: the CUDA context and NCCL communicators.
LOAD_CONTEXT_GIB = 0.5


@dataclass(frozen=True, slots=True)
class Extras:
    """Per-replica additions to the base model: bytes are per GPU at the given TP."""

    lora_replicated_per_rank: float  # LoRA parameters every rank holds whole, per unit of rank
    lora_sharded_per_rank: float  # LoRA parameters split over TP, per unit of rank
    lora_adapters: int
    lora_rank: int
    draft_params: float  # parameters of the drafter, split over TP
    draft_kv_layers: int
    draft_note: str

    def weight_bytes(self, tp: int, dtype_bytes: int) -> float:
        slots = self.lora_rank * self.lora_adapters
        lora = slots * (self.lora_replicated_per_rank + self.lora_sharded_per_rank / tp)
        return (lora + self.draft_params / tp) * dtype_bytes


NO_EXTRAS = Extras(0.0, 0.0, 0, 0, 0.0, 0, "")


def _lora_params_per_rank(arch: ModelArch) -> tuple[float, float]:
    """(replicated, sharded) LoRA parameters per unit of rank over every layer's q, k, v,
    o, gate, up and down projections. Column-parallel layers (qkv, gate_up) keep A whole
    and split B; row-parallel ones (o, down) split A and keep B whole."""
    hidden = arch.hidden_size
    q = arch.num_attention_heads * (arch.mla.v_head_dim if arch.mla else arch.head_dim)
    kv = 2 * arch.num_kv_heads * arch.head_dim if arch.mla is None else 0
    mlp = arch.intermediate_size if arch.moe is None else arch.moe.shared_intermediate_size
    replicated = 3 * hidden + 2 * hidden + hidden + hidden  # qkv A, gate_up A, o B, down B
    sharded = (q + kv) + 2 * mlp + q + mlp  # qkv B, gate_up B, o A, down A
    return (float(replicated * arch.num_layers), float(sharded * arch.num_layers))


def extras_for(spec: InferenceServiceSpec, arch: ModelArch, draft: ModelArch | None) -> Extras:
    adapters = spec.model.adapters or []
    lora_adapters = spec.model.max_simultaneous_adapters or len(adapters)
    lora_rank = 0
    if adapters:
        top = max(adapter.rank for adapter in adapters)
        lora_rank = next((rank for rank in LORA_RANKS if rank >= top), LORA_RANKS[-1])
    speculative = spec.serving.speculative_decoding if spec.serving else None
    draft_params = 0.0
    draft_layers = 0
    note = ""
    if speculative is not None and speculative.method != "ngram":
        layer = arch.parameters_billion * 1e9 / max(1, arch.num_layers)
        if speculative.method == "draft":
            if draft is not None:
                draft_params = draft.parameters_billion * 1e9
                draft_layers = draft.num_layers
                note = f"draft model {draft.name}: {draft.parameters_billion:g}B, {draft.num_layers} layers"
            else:
                # Unknown draft: assume a tenth of the target, a common draft/target ratio.
                draft_params = arch.parameters_billion * 1e9 / 10
                draft_layers = max(1, arch.num_layers // 4)
                note = (
                    "draft model not in the catalog: sized as a tenth of the target "
                    f"({draft_params / 1e9:.1f}B, {draft_layers} layers)"
                )
        elif speculative.method == "eagle3":
            draft_params = layer + 3 * arch.hidden_size**2 + EAGLE3_DRAFT_VOCAB * arch.hidden_size
            draft_layers = 1
            note = "EAGLE-3 head: about one decoder layer, a fusion projection and its own head"
        else:  # eagle, mtp
            draft_params = layer + 2 * arch.hidden_size**2
            draft_layers = 1
            note = f"{speculative.method.upper()} head: about one decoder layer and its projection"
    replicated, sharded = _lora_params_per_rank(arch) if lora_rank else (0.0, 0.0)
    return Extras(
        lora_replicated_per_rank=replicated,
        lora_sharded_per_rank=sharded,
        lora_adapters=lora_adapters if lora_rank else 0,
        lora_rank=lora_rank,
        draft_params=draft_params,
        draft_kv_layers=draft_layers,
        draft_note=note,
    )


def online_quantization(arch: ModelArch, weight_format: str) -> bool:
    """The tier quantizes a 16-bit checkpoint while loading it."""
    return weight_format not in ("none", arch.checkpoint_format) and arch.checkpoint_format == "none"


def load_peak_bytes(
    arch: ModelArch,
    layout: WeightLayout,
    *,
    weight_format: str,
    dtype_bytes: int,
    tp: int,
    pp: int,
    family: str,
    scale: float,
    extra_bytes: float,
) -> float:
    """Per-GPU bytes while the weights load (before KV, activations or graphs exist)."""
    if online_quantization(arch, weight_format):
        stored = weight_layout(
            arch, weight_format="none", dtype_bytes=dtype_bytes, tp=tp, pp=pp, family=family, scale=scale
        )
        weights = stored.max_bytes_per_gpu
    else:
        weights = layout.max_bytes_per_gpu
    return weights + extra_bytes + LOAD_CONTEXT_GIB * GIB
