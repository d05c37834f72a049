"""Cold start of one replica from where its weights are. Pure; for the planner.

A replica is ready after: the container starts, (without a cache) the weights are pulled
from the source, the weights are read from local storage into GPU memory, and the engine
initialises (profiling pass, CUDA graphs). Typical published figures: local
NVMe ~12.5 GB/s, 10 GbE network storage ~1.1 GB/s, object storage with container init
~0.5-1 GB/s effective. Measured bandwidths (the fetcher records `fetch_bytes_per_s` in
the marker; vLLM logs its load time) replace these defaults once known.

How the planner uses it: `coldStartSeconds = cold_start(...).seconds` with
`weight_bytes` from the plan (or the marker's `weight_bytes`), `cached=True` when
`cache.mode` is nvme/pvc, `read_bytes_per_s` from `cache.storageBandwidthGBps` or the
measured load rate, `fetch_bytes_per_s` from the marker; the reason string goes into the
tier's `reasons`. The autoscaler takes that figure as its lead time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from inferfleet.caching.precache import compile_cache
from inferfleet.planner.observed import MeasuredColdStart

GB: Final = 1e9  # storage bandwidths are quoted in decimal GB/s

NVME_READ_BYTES_PER_S: Final = 12.5 * GB
NETWORK_STORAGE_BYTES_PER_S: Final = 1.1 * GB
OBJECT_STORE_BYTES_PER_S: Final = 0.75 * GB
CONTAINER_START_S: Final = 10.0
ENGINE_INIT_S: Final = 30.0


@dataclass(frozen=True)
class ColdStart:
    seconds: float
    fetch_s: float
    load_s: float
    reason: str


def cold_start(
    weight_bytes: int,
    *,
    cached: bool,
    read_bytes_per_s: float | None = None,
    fetch_bytes_per_s: float | None = None,
    container_start_s: float = CONTAINER_START_S,
    engine_init_s: float = ENGINE_INIT_S,
) -> ColdStart:
    """Seconds from pod start to Ready for `weight_bytes` of weights.

    cached: the weights are already on the node (pre-cache) or a mounted volume, so only
    the local read counts; otherwise vLLM first pulls them at `fetch_bytes_per_s`.
    """
    if weight_bytes < 0:
        raise ValueError("weight_bytes must be >= 0")
    read_rate = read_bytes_per_s or (NVME_READ_BYTES_PER_S if cached else NETWORK_STORAGE_BYTES_PER_S)
    load_s = weight_bytes / read_rate
    fetch_s = 0.0
    if not cached:
        fetch_s = weight_bytes / (fetch_bytes_per_s or OBJECT_STORE_BYTES_PER_S)
    seconds = container_start_s + fetch_s + load_s + engine_init_s
    gb = weight_bytes / GB
    if cached:
        reason = (
            f"cold start ≈ {seconds:.0f}s: {gb:.1f} GB of weights read from the node cache at "
            f"{read_rate / GB:.1f} GB/s ({load_s:.0f}s) plus container start and engine init"
        )
    else:
        reason = (
            f"cold start ≈ {seconds:.0f}s: no pre-cache, so {gb:.1f} GB are pulled at "
            f"{(fetch_bytes_per_s or OBJECT_STORE_BYTES_PER_S) / GB:.2f} GB/s ({fetch_s:.0f}s) before loading"
        )
    return ColdStart(seconds=seconds, fetch_s=fetch_s, load_s=load_s, reason=reason)


# --- measured: from the serving pods the operator observes (planner.observed) ---------


def pod_startup_s(pod: Mapping[str, Any], container: str) -> float | None:
    """Seconds from the serving container's start to the pod turning Ready, or None when
    the pod does not tell: not Ready, restarted (its Ready time would belong to a later
    start), or missing timestamps. Where the pod restored its node's compile cache first
    (compile_cache.RESTORE_CONTAINER), the start is that container's: the copy is part of
    a warm start's work."""
    status = pod.get("status") or {}
    restored_at = compile_cache.rfc3339_s(compile_cache.restore_started_at(pod))
    ready_at = None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            ready_at = compile_cache.rfc3339_s(condition.get("lastTransitionTime"))
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") != container or int(entry.get("restartCount") or 0) > 0:
            continue
        started_at = compile_cache.rfc3339_s(
            ((entry.get("state") or {}).get("running") or {}).get("startedAt")
        )
        if started_at is not None and restored_at is not None:
            started_at = min(started_at, restored_at)
        if ready_at is not None and started_at is not None and ready_at > started_at:
            return ready_at - started_at
    return None


def measured_cold_starts(
    pods: Sequence[Mapping[str, Any]], *, container: str, tier_label: str
) -> dict[str, MeasuredColdStart]:
    """Per tier (the pods' `tier_label`), the median start-to-Ready of its serving pods
    that compiled (first starts: every pod without a warm compile cache)."""
    return classified_cold_starts(pods, container=container, tier_label=tier_label).first


@dataclass(frozen=True)
class ClassifiedColdStarts:
    """Measured starts per tier, by case: `first` (the engine compiled: no warm compile
    cache on its node, or none kept) and `warm` (it restored its node's compile cache,
    as its compile-cache container's termination message says)."""

    first: dict[str, MeasuredColdStart]
    warm: dict[str, MeasuredColdStart]


def classified_cold_starts(
    pods: Sequence[Mapping[str, Any]], *, container: str, tier_label: str
) -> ClassifiedColdStarts:
    """Per tier, the median start-to-Ready of its first starts and of its warm starts."""
    by_case: dict[bool, dict[str, list[float]]] = {False: {}, True: {}}
    for pod in pods:
        tier = ((pod.get("metadata") or {}).get("labels") or {}).get(tier_label)
        seconds = pod_startup_s(pod, container)
        if tier is not None and seconds is not None:
            by_case[compile_cache.started_warm(pod)].setdefault(str(tier), []).append(seconds)
    found = {
        warm: {tier: MeasuredColdStart.of(values) for tier, values in sorted(by_tier.items())}
        for warm, by_tier in by_case.items()
    }
    first = {tier: value for tier, value in found[False].items() if value is not None}
    warm = {tier: value for tier, value in found[True].items() if value is not None}
    return ClassifiedColdStarts(first, warm)
