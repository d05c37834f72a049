"""KV-cache geometry: bytes per token, vLLM's block pool, tokens and concurrency.

Follows vLLM V1's KV cache sizing (vllm/v1/core/kv_cache_utils.py; docs/concepts/planning.md):
- a layer's page is `2 × block_size × kv_heads_per_rank × head_dim × dtype_bytes`
  (MLA: one latent of `kv_lora_rank + qk_rope_head_dim` per token, never split by TP);
  KV heads are split over TP ranks but replicated once TP exceeds their count;
- layers of one attention type share a pool; hybrid models (sliding + full layers) are
  cut into equal-size groups, each block holds `group_size` pages, and the logged
  "GPU KV cache size" is `num_blocks // num_groups × block_size`;
- "Maximum concurrency" is `num_blocks / blocks one max-length request needs`, where a
  sliding-window group needs only `window - 1 + max_num_batched_tokens` tokens of it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from inferfleet.catalog.models import LayerKind, ModelArch
from inferfleet.planner.units import ceil_div, round_up


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    """Bytes per cached element: fp8 is one byte; auto follows the model dtype."""
    if kv_cache_dtype == "fp8":
        return 1
    if kv_cache_dtype in ("bf16", "fp16"):
        return 2
    return model_dtype_bytes


def bytes_per_token_per_layer(arch: ModelArch, tp: int, element_bytes: int, mla_align_bytes: int = 0) -> int:
    """KV bytes one GPU stores per token for one attention layer.

    `mla_align_bytes`: V0's MLA backends pad each latent entry to this many bytes."""
    if arch.mla is not None:
        latent = arch.mla.latent_dim * element_bytes
        return round_up(latent, mla_align_bytes) if mla_align_bytes else latent
    kv_heads_per_rank = max(1, arch.num_kv_heads // tp)
    return 2 * kv_heads_per_rank * arch.head_dim * element_bytes


@dataclass(frozen=True, slots=True)
class KvGroups:
    """How vLLM lays out the pool for the layers of one pipeline stage."""

    group_size: int  # layers whose pages one block holds
    full_groups: int
    sliding_groups: int

    @property
    def num_groups(self) -> int:
        return self.full_groups + self.sliding_groups


# The release's grouping rule (catalog/data/vllm_releases.json `largerCountWithinRatio`):
# 1.25 in 0.12-0.17, 1.5 from 0.18 (kv_cache_planning.py), none before 0.12.
DEFAULT_GROUP_RATIO = 1.25


@functools.lru_cache(maxsize=1024)
def kv_groups(
    kinds: tuple[LayerKind, ...], larger_within_ratio: float | None = DEFAULT_GROUP_RATIO
) -> KvGroups:
    full = sum(1 for kind in kinds if kind == "full")
    sliding = len(kinds) - full
    if not full or not sliding:
        return KvGroups(
            group_size=max(1, len(kinds)), full_groups=1 if full else 0, sliding_groups=1 if sliding else 0
        )
    # vLLM groups by the smaller layer count, unless the release lets the larger one be
    # the group size when it is within a ratio of the smaller (padding the smaller type).
    smaller, larger = min(full, sliding), max(full, sliding)
    size = larger if larger_within_ratio is not None and larger < smaller * larger_within_ratio else smaller
    return KvGroups(group_size=size, full_groups=ceil_div(full, size), sliding_groups=ceil_div(sliding, size))


@dataclass(frozen=True, slots=True)
class KvPool:
    """One stage's KV pool geometry (per GPU)."""

    groups: KvGroups
    block_size: int
    page_bytes: int  # one layer's page: block_size tokens
    sliding_window_tokens: int

    @property
    def block_bytes(self) -> int:
        return self.groups.group_size * self.page_bytes

    def num_blocks(self, kv_bytes: float) -> int:
        return max(0, int(kv_bytes // self.block_bytes))

    def tokens(self, num_blocks: int) -> int:
        """The engine's "GPU KV cache size: N tokens" line."""
        return num_blocks // max(1, self.groups.num_groups) * self.block_size

    def blocks_per_request(self, tokens: int, max_num_batched_tokens: int) -> int:
        full_blocks = ceil_div(tokens, self.block_size)
        sliding_tokens = min(self.sliding_window_tokens - 1 + max_num_batched_tokens, tokens)
        sliding_blocks = ceil_div(sliding_tokens, self.block_size) + 1
        return self.groups.full_groups * full_blocks + self.groups.sliding_groups * sliding_blocks

    def concurrency(self, num_blocks: int, tokens: int, max_num_batched_tokens: int) -> float:
        """Requests of `tokens` context whose KV fits at once."""
        return num_blocks / max(1, self.blocks_per_request(max(1, tokens), max_num_batched_tokens))

    def bytes_per_token(self) -> float:
        """KV bytes one token costs this GPU across the stage's layers (for rooflines)."""
        layers = self.groups.group_size * self.groups.num_groups
        return layers * self.page_bytes / self.block_size


def kv_pool(
    arch: ModelArch,
    kinds: tuple[LayerKind, ...],
    tp: int,
    element_bytes: int,
    block_size: int,
    *,
    hybrid: bool = True,
    mla_align_bytes: int = 0,
    group_ratio: float | None = DEFAULT_GROUP_RATIO,
) -> KvPool:
    """The pool of one stage. `hybrid` False: the release gives every layer a full-length
    cache (V0, and V1 before its hybrid KV-cache manager), so windows save nothing."""
    if not hybrid:
        full: LayerKind = "full"
        kinds = (full,) * len(kinds)
    return KvPool(
        groups=kv_groups(kinds, group_ratio),
        block_size=block_size,
        page_bytes=block_size * bytes_per_token_per_layer(arch, tp, element_bytes, mla_align_bytes),
        sliding_window_tokens=(arch.sliding_window_tokens or 0) if hybrid else 0,
    )
