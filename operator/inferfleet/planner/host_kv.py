"""A KV-cache tier in host memory: whether a tier gets one, and how big (pure).

vLLM's CPU offloading (`--kv-offloading-size`, or the OffloadingConnector before that
flag) copies the KV blocks the GPU cache computes into pinned host memory, and a request
whose prefix is there reloads those blocks over the GPU's host link instead of prefilling
them again. Active sequences still decode from GPU memory only, so the tier adds
*reachable* context, not concurrency: `maxConcurrency` keeps counting GPU memory, and the
plan reports the host tier beside it (`hostKvCacheGiB`, `hostKvCacheTokens`).

Sizing, per replica:

- the replica's share of its nodes' host memory: the node's memory per GPU (the tier's
  `hostMemoryGiB` / GPUs per node, else the catalog's usual node) × the replica's GPUs;
- the tier gets at most `HOST_SHARE` of what that share leaves once the pods' own memory
  requests are counted (a base and a per-GPU share; planner.host_memory): the rest stays
  with the node's kernel, its page cache (the node weight cache is read through it), the
  kubelet and DaemonSets. Requests are what the scheduler fits on a node; the pods'
  limits also cover the weights' transient host copy while they load, which is freed
  before vLLM allocates its CPU KV cache;
- a size the spec gives (`serving.hostKvCache.sizeGiB`) is kept within that budget.

When it pays (mode `auto`; mode `on` plans it anyway and says whether it pays):

- prefix caching is on and the archetype reuses prefixes (chat turns, RAG documents,
  agent and code contexts; never `batch`);
- reloading a P95 prompt's KV over the host link (the GPU's PCIe generation, catalog
  `hostLinkGBs`) takes at most `RELOAD_SHARE` of the time prefilling it again would
  (the plan's prefill rate), and fits the TTFT SLO;
- the GPU cache is what the reused prefixes outgrow: it holds fewer than
  `WORKING_SET_CONTEXTS` P95 contexts per running sequence slot;
- the tier is at least `HOST_OVER_GPU` times the GPU cache: vLLM's offloading stores
  every block the GPU computes (its scheduler queues a store for each full chunk as it
  is computed, not for blocks the GPU evicts), so the host tier holds a copy of the GPU
  cache's blocks and reaches only what it holds beyond them. A tier the size of the GPU
  cache adds almost nothing (the replay of a prefix-heavy trace, simulate.prefix_cache,
  shows it: 1.1-1.4% of prompt tokens saved).

The release decides whether there is a tier: `--kv-offloading-size` with the native
backend sizes vLLM's CPU cache from 0.14 (0.11-0.13 take the flag but leave the
connector's `num_cpu_blocks` at 0, which its CPU spec refuses). Releases whose connector
turns vLLM's hybrid KV-cache manager off (before 0.21) get no tier for a model with
sliding-window layers: every layer would then hold full-length KV and the GPU cache
would shrink. The arithmetic of a reload: PCIe Gen5 moves ~63 GB/s per direction, so
8 GB of KV comes back in ~125 ms; that pays where reused context structurally exceeds
GPU memory and the reload beats recomputing, not for every interactive service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from inferfleet.api.plan import TierPlan
from inferfleet.api.spec import InferenceServiceSpec, TierSpec
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.catalog.vllm_releases import ReleaseFacts
from inferfleet.planner.host_memory import memory_request_gib
from inferfleet.planner.units import GIB

Mode = Literal["off", "auto", "on"]

# The share of a replica's slice of node memory the tier may take (with the pods' own).
HOST_SHARE = 0.5
# A reload must take at most this share of the prefill it saves, or it does not pay.
RELOAD_SHARE = 0.5
# Below this many P95 contexts per running-sequence slot, reused prefixes fall out of
# the GPU cache before they are asked for again.
WORKING_SET_CONTEXTS = 4.0
# The host tier copies what the GPU computes, so it reaches only what it holds beyond the
# GPU cache: at least this many times the GPU cache, or it adds less than the GPU holds.
HOST_OVER_GPU = 2.0
# The smallest tier worth its pinned memory.
MIN_GIB = 4.0
REUSING_ARCHETYPES = frozenset({"chat", "rag", "code", "agentic"})
LABEL = "host KV cache"


@dataclass(frozen=True, slots=True)
class HostKv:
    """The tier's host KV cache: its size per replica (0: none) and why."""

    gib: float
    tokens: int
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()


NONE = HostKv(0.0, 0, ())


def mode_of(spec: InferenceServiceSpec, default: Mode) -> Mode:
    serving = spec.serving
    chosen = serving.host_kv_cache.mode if serving is not None and serving.host_kv_cache is not None else None
    return chosen or default


def supported(release: ReleaseFacts | None) -> bool:
    """`--kv-offloading-size` exists and sizes the CPU cache: 0.11-0.13 take the flag but
    leave the OffloadingConnector's `num_cpu_blocks` at 0, which its CPU spec refuses."""
    return (
        release is not None
        and release.kv_offload_size_flag
        and release.kv_offload_sized_by != "num_cpu_blocks"
    )


def bytes_per_token(plan: TierPlan) -> float | None:
    """KV bytes one token takes over the whole replica, as the GPU cache is sized."""
    if plan.kv_cache_tokens <= 0 or plan.memory_gi_b.kv_cache <= 0:
        return None
    return plan.memory_gi_b.kv_cache * GIB * plan.gpus_per_replica / plan.kv_cache_tokens


def host_share_gib(tier: TierSpec, gpu: GpuSpec, plan: TierPlan) -> float | None:
    """The replica's slice of its nodes' host memory (GiB), None when unknown."""
    gpus_per_node = tier.gpus_per_node or gpu.gpus_per_node
    per_gpu = tier.host_memory_gib / gpus_per_node if tier.host_memory_gib else gpu.host_memory_gib_per_gpu
    return None if per_gpu is None else per_gpu * plan.gpus_per_replica


def pods_request_gib(plan: TierPlan) -> int:
    """What the replica's pods ask for besides a host KV tier."""
    return memory_request_gib(plan.model_copy(update={"host_kv_cache_gi_b": 0.0})) * max(
        1, plan.nodes_per_replica
    )


def budget_gib(tier: TierSpec, gpu: GpuSpec, plan: TierPlan) -> float | None:
    """The most the tier may take per replica: HOST_SHARE of the replica's slice of node
    memory once its pods' own requests are counted."""
    share = host_share_gib(tier, gpu, plan)
    if share is None:
        return None
    return HOST_SHARE * (share - pods_request_gib(plan))


def _pays(spec: InferenceServiceSpec, gpu: GpuSpec, plan: TierPlan, per_token: float) -> tuple[bool, str]:
    """Whether the tier pays, and the numbers that say so."""
    archetype = spec.workload.archetype
    if not plan.prefix_caching or (spec.serving is not None and not spec.serving.prefix_caching):
        return False, "prefix caching is off, so nothing would be reloaded"
    if archetype not in REUSING_ARCHETYPES:
        return False, f"archetype {archetype} reuses no prefixes"
    p95 = spec.workload.input_tokens.p95
    link = gpu.host_link_g_bs
    prefill = plan.performance.prefill_tokens_per_second if plan.performance else 0.0
    if not link or prefill <= 0:
        return False, "the host link or the prefill rate is unknown"
    reload_s = p95 * per_token / (link * 1e9)
    prefill_s = p95 / prefill
    numbers = (
        f"a P95 prompt's KV ({p95:,} tokens, {p95 * per_token / GIB:.2f} GiB) reloads in "
        f"{reload_s * 1000:.0f} ms over the {link:g} GB/s host link against {prefill_s * 1000:.0f} ms "
        "to prefill it again"
    )
    if reload_s > RELOAD_SHARE * prefill_s:
        return False, numbers + ": recomputing is about as fast"
    if reload_s * 1000 > spec.workload.slo.ttft_p99_ms:
        return False, numbers + f": more than the {spec.workload.slo.ttft_p99_ms} ms TTFT SLO"
    held = plan.kv_cache_tokens / max(1, p95 * plan.max_num_seqs)
    if held >= WORKING_SET_CONTEXTS:
        return False, (
            f"{numbers}, but the GPU cache already holds {held:.1f} P95 contexts per sequence slot "
            f"(from {WORKING_SET_CONTEXTS:g} reused prefixes start falling out)"
        )
    return True, f"{numbers}; the GPU cache holds {held:.1f} P95 contexts per sequence slot"


def _reach(host_tokens: int, gpu_tokens: int) -> tuple[bool, str]:
    """Whether the tier reaches enough context beyond the GPU cache, and the numbers.

    vLLM's offloading stores every block the GPU computes (write-through), so the host
    tier holds a copy of what the GPU cache holds: it reaches only what it holds beyond
    that (`host - gpu` tokens), and must be HOST_OVER_GPU times the GPU cache to add a
    GPU cache's worth."""
    beyond = max(0, host_tokens - gpu_tokens)
    numbers = (
        f"it keeps a copy of every block the GPU computes, so it reaches {beyond:,} tokens beyond "
        f"the GPU cache's {gpu_tokens:,}"
    )
    if host_tokens < HOST_OVER_GPU * gpu_tokens:
        return False, f"{numbers}, less than the GPU cache again ({HOST_OVER_GPU:g}x it at least)"
    return True, numbers


def _unavailable(release: ReleaseFacts | None, arch: ModelArch) -> str | None:
    if not supported(release):
        name = release.release if release is not None else "unknown"
        if release is not None and release.kv_offload_size_flag:
            return (
                f"vLLM {name}'s --kv-offloading-size leaves the CPU cache unsized (the OffloadingConnector's "
                "num_cpu_blocks stays 0, which it refuses); from 0.14"
            )
        return f"vLLM {name} has no --kv-offloading-size (CPU KV offloading works from 0.14)"
    assert release is not None
    if arch.sliding_layers and not release.kv_offload_keeps_hybrid:
        return (
            f"vLLM {release.release} turns its hybrid KV-cache manager off with a KV connector, so the "
            f"{arch.sliding_layers} sliding-window layers would hold full-length KV and the GPU cache "
            "would shrink (the connector keeps it from 0.21)"
        )
    return None


def _without(mode: Mode, why: str) -> HostKv:
    """No tier, and why; a warning too when the spec asked for one (`on`)."""
    words = f"no {LABEL}: {why}"
    return HostKv(0.0, 0, (words,), (words,) if mode == "on" else ())


def _blocked(plan: TierPlan, gpu: GpuSpec, arch: ModelArch, release: ReleaseFacts | None) -> str | None:
    """Why this tier can have no host KV cache whatever it would pay, or None."""
    why = _unavailable(release, arch)
    if why is not None:
        return why
    if plan.nodes_per_replica > 1 or plan.pipeline_parallel_size > 1:
        return "a replica that spans pipeline stages or nodes is not planned with one"
    if bytes_per_token(plan) is None:
        return "the KV bytes per token are unknown"
    return None


def plan_host_kv(
    spec: InferenceServiceSpec,
    tier: TierSpec,
    plan: TierPlan,
    *,
    gpu: GpuSpec,
    arch: ModelArch,
    release: ReleaseFacts | None,
    default: Mode,
) -> HostKv:
    """The tier's host KV cache per replica (module docstring); NONE when off."""
    mode = mode_of(spec, default)
    if mode == "off" or not plan.feasible:
        return NONE
    blocked = _blocked(plan, gpu, arch, release)
    if blocked is not None:
        return _without(mode, blocked)
    per_token = bytes_per_token(plan)
    budget = budget_gib(tier, gpu, plan)
    assert per_token is not None
    if budget is None:
        return _without(mode, f"{gpu.name}'s node memory is unknown (set tiers[].hostMemoryGiB)")
    pays, numbers = _pays(spec, gpu, plan, per_token)
    if mode == "auto" and not pays:
        return _without(mode, numbers)
    asked = spec.serving.host_kv_cache.size_gib if spec.serving and spec.serving.host_kv_cache else None
    size = math.floor(min(asked, budget) if asked is not None else budget)
    if size < MIN_GIB:
        return _without(
            mode,
            f"{HOST_SHARE:.0%} of what this replica's {host_share_gib(tier, gpu, plan):.0f} GiB of node "
            f"memory leaves beside its pods' {pods_request_gib(plan)} GiB is {max(0.0, budget):.0f} GiB "
            f"(at least {MIN_GIB:g} GiB)",
        )
    tokens = int(size * GIB / per_token)
    reaches, reach = _reach(tokens, plan.kv_cache_tokens)
    if mode == "auto" and not reaches:
        return _without(mode, f"{size:g} GiB per replica would hold {tokens:,} tokens: {reach}")
    pays = pays and reaches
    where = "asked for" if asked is not None and asked <= budget else "planned"
    reason = (
        f"{LABEL}: {size:g} GiB per replica {where} ({tokens:,} tokens; at most {HOST_SHARE:.0%} of what "
        f"its nodes' memory leaves beside its pods'); "
        + ("pays: " if pays else "on as asked, though it may not pay: ")
        + f"{numbers}; {reach}"
    )
    warnings: tuple[str, ...] = ()
    if asked is not None and asked > budget:
        warnings = (f"{LABEL}: {asked:g} GiB asked for, {size:g} GiB planned (the nodes' budget)",)
    return HostKv(float(size), tokens, (reason,), warnings)
