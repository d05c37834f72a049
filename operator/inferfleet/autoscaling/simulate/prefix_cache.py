"""Prefix-cache replay (pure): which prompt tokens each request finds cached, in the GPU
KV cache or in a host-memory KV tier, and what a host hit costs to reload.

The replay reads a trace's prefix blocks (Mooncake's `hash_ids`: one id per prompt
block, equal ids for equal prefixes) in arrival order through a model of one replica's
two caches, both least-recently-used over blocks:

- a request's cached prefix is its longest run of leading blocks found, first in the
  GPU cache (vLLM's automatic prefix caching), then, from where the GPU run ends, in the
  host tier (vLLM asks its KV connector only for the blocks past its own hit). Only full
  blocks are reused, and never the prompt's last token: vLLM always computes at least
  one token to produce the first output;
- after the request, every full block of its prompt is the most recently used in the
  GPU cache, and in the host tier: vLLM's CPU offloading stores each block the GPU
  computes, so the host tier holds a superset of recent blocks rather than only what
  the GPU evicted;
- a GPU hit costs nothing; a host hit is not prefilled but reloaded over the GPU's host
  link: `tokens x KV bytes per token / link bytes per second` (the planner's own reload
  arithmetic, planner.host_kv), before the request's prefill of the rest can start; a
  miss is prefilled at the replica's prefill rate (the engine's model).

What it leaves out, and which way that errs:

- one replica's caches see every request of the trace. A fleet of N replicas behind a
  prefix-aware picker holds up to N times as many prefixes in both caches, so both hit
  rates here are lower bounds, with or without the tier;
- the GPU cache's capacity is the replica's whole KV cache, as if no running sequence
  held blocks the cache could otherwise keep: the GPU hit rate errs high, which
  understates what the host tier adds;
- a reload does not contend with other reloads for the link (one request's reload at
  a time is what a P95 prompt's figure in the plan assumes).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from inferfleet.autoscaling.simulate.traces import FloatArray, IntArray, PrefixBlocks


@dataclass(frozen=True, slots=True)
class KvCacheModel:
    """One replica's caches for prefixes: GPU KV cache and host tier, in tokens."""

    gpu_tokens: int
    host_tokens: int  # 0: no host tier
    kv_bytes_per_token: float  # over the whole replica
    host_link_gbs: float  # GB/s, one direction


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """Per request: the prompt tokens its engine prefills and the seconds its host-tier
    hit takes to reload; and the totals the report shows."""

    prefilled: IntArray
    reload_s: FloatArray
    prompt_tokens: int
    gpu_hit_tokens: int
    host_hit_tokens: int


class _Lru:
    """Least-recently-used set of block ids with a capacity in blocks."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def touch(self, block: int) -> None:
        if self.capacity <= 0:
            return
        blocks = self.blocks
        if block in blocks:
            blocks.move_to_end(block)
            return
        blocks[block] = None
        if len(blocks) > self.capacity:
            blocks.popitem(last=False)


def replay(blocks: PrefixBlocks, input_tokens: IntArray, model: KvCacheModel) -> PrefixReuse:
    """Each request's cached prefix, in arrival order (see the module docstring)."""
    block_tokens = blocks.block_tokens
    gpu = _Lru(model.gpu_tokens // block_tokens)
    host = _Lru(model.host_tokens // block_tokens)
    ids: list[int] = blocks.ids.tolist()
    starts: list[int] = blocks.starts.tolist()
    prompts: list[int] = input_tokens.tolist()
    n = len(prompts)
    prefilled = np.zeros(n, dtype=np.int64)
    reload_s = np.zeros(n, dtype=np.float64)
    seconds_per_token = (
        model.kv_bytes_per_token / (model.host_link_gbs * 1e9) if model.host_link_gbs > 0 else 0.0
    )
    gpu_total = host_total = 0
    for i in range(n):
        prompt = prompts[i]
        chain = ids[starts[i] : starts[i + 1]]
        full = chain[: prompt // block_tokens]
        on_gpu = 0
        while on_gpu < len(full) and full[on_gpu] in gpu.blocks:
            on_gpu += 1
        on_host = on_gpu
        while on_host < len(full) and full[on_host] in host.blocks:
            on_host += 1
        # vLLM computes at least the prompt's last token.
        reusable = max(0, prompt - 1)
        gpu_hit = min(on_gpu * block_tokens, reusable)
        host_hit = min(on_host * block_tokens, reusable) - gpu_hit
        prefilled[i] = prompt - gpu_hit - host_hit
        reload_s[i] = host_hit * seconds_per_token
        gpu_total += gpu_hit
        host_total += host_hit
        for block in full:
            gpu.touch(block)
            host.touch(block)
    return PrefixReuse(prefilled, reload_s, int(sum(prompts)), gpu_total, host_total)
