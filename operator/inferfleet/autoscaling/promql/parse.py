"""Turn Prometheus API results into per-tier numbers (pure).

Input is the `data.result` list of `/api/v1/query` (vector) or `/api/v1/query_range`
(matrix) exactly as the HTTP API returns it: values are strings, NaN is `"NaN"`.
Anything that cannot be attributed to one InferenceService tier is dropped and counted
in `problems`, never guessed at. The keys come from the target labels the queries group
by (`namespace`, `inferfleet_service`, `inferfleet_tier`; see `queries`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from inferfleet.api.labels import SERIES_LABEL_POD
from inferfleet.autoscaling.policy import plausible
from inferfleet.autoscaling.promql.queries import KV_BLOCK_SIZE_LABEL, KV_BLOCKS_LABEL, SERIES_LABELS


class TierKey(NamedTuple):
    """One tier of one InferenceService, as the series labels name it."""

    namespace: str
    service: str
    tier: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.service}/{self.tier}"


class ServiceKey(NamedTuple):
    """One InferenceService, as the series labels name it."""

    namespace: str
    service: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.service}"


K = TypeVar("K", TierKey, ServiceKey)


@dataclass
class VectorResult:
    """Per-tier values of one instant query.

    A key mapped to None had a series whose value was NaN (for a quantile: no requests
    in the window). A key that is absent had no series at all.
    """

    values: dict[TierKey, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class MatrixResult(Generic[K]):
    """Points `(unix time s, value)` per key of one range query, time-ordered, NaN dropped."""

    series: dict[K, list[tuple[float, float]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def tier_key(labels: Mapping[str, Any]) -> TierKey | None:
    """The tier a series belongs to, or None when a grouping label is missing or empty."""
    parts = [labels.get(name) for name in SERIES_LABELS]
    if not all(isinstance(part, str) and part for part in parts):
        return None
    namespace, service, tier = (str(part) for part in parts)
    return TierKey(namespace, service, tier)


def service_key(labels: Mapping[str, Any]) -> ServiceKey | None:
    """The InferenceService a series belongs to (namespace and service labels only)."""
    parts = [labels.get(name) for name in SERIES_LABELS[:2]]
    if not all(isinstance(part, str) and part for part in parts):
        return None
    namespace, service = (str(part) for part in parts)
    return ServiceKey(namespace, service)


def parse_sample(raw: Any) -> tuple[float, float | None] | None:
    """`[ts, "value"]` → `(ts, value)`; NaN becomes None; a malformed pair gives None."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        return None
    try:
        timestamp_s = float(raw[0])
        value = float(raw[1])
    except (TypeError, ValueError):
        return None
    if math.isnan(timestamp_s):
        return None
    return timestamp_s, (None if math.isnan(value) else value)


def _keyed_series(
    result: Iterable[Any],
    key_of: Callable[[Mapping[str, Any]], K | None],
    labels_named: str,
    problems: list[str],
) -> Iterator[tuple[K, Mapping[str, Any]]]:
    """Each series of a result with its key; what has no key is noted in `problems`."""
    for item in result:
        if not isinstance(item, Mapping):
            problems.append(f"not a series: {item!r}")
            continue
        labels = item.get("metric")
        key = key_of(labels) if isinstance(labels, Mapping) else None
        if key is None:
            problems.append(f"series without {labels_named}: {labels!r}")
            continue
        yield key, item


def parse_vector(
    result: Iterable[Any],
    *,
    eval_time_s: float | None = None,
    max_age_s: float | None = None,
) -> VectorResult:
    """Parse an instant-vector result.

    With `eval_time_s` and `max_age_s`, a sample stamped more than `max_age_s` before the
    evaluation time is dropped as stale: a caching query frontend can hand back an old
    answer, and an old answer must not look like the present.
    """
    out = VectorResult()
    for key, item in _keyed_series(result, tier_key, ", ".join(SERIES_LABELS), out.problems):
        sample = parse_sample(item.get("value"))
        if sample is None:
            out.problems.append(f"{key}: malformed sample {item.get('value')!r}")
            continue
        timestamp_s, value = sample
        if eval_time_s is not None and max_age_s is not None and eval_time_s - timestamp_s > max_age_s:
            out.problems.append(f"{key}: stale sample from {eval_time_s - timestamp_s:.0f}s ago")
            continue
        if key in out.values:
            # The queries group by exactly the key labels, so a duplicate means the
            # series labels collide (e.g. two Prometheus replicas behind one URL).
            out.problems.append(f"{key}: duplicate series; keeping the first")
            continue
        out.values[key] = value
    return out


def parse_matrix(
    result: Iterable[Any],
    key_of: Callable[[Mapping[str, Any]], K | None],
    reading: Callable[[float | None], float | None] = plausible.rate,
) -> MatrixResult[K]:
    """Parse a range-query (matrix) result keyed by `key_of` (`tier_key` or `service_key`).

    Each point goes through `reading` (by default: a request rate); what is no
    measurement (NaN, infinite, negative, beyond any fleet) is skipped, as are malformed
    points: for a rate history a missing point is a gap, which the forecaster handles,
    while a made-up value would mislead it.
    """
    out: MatrixResult[K] = MatrixResult()
    for key, item in _keyed_series(result, key_of, "grouping labels", out.problems):
        raw_values = item.get("values")
        if not isinstance(raw_values, list):
            out.problems.append(f"{key}: no values")
            continue
        points: list[tuple[float, float]] = []
        for raw in raw_values:
            sample = parse_sample(raw)
            if sample is None:
                out.problems.append(f"{key}: malformed point {raw!r}")
                continue
            timestamp_s, value = sample[0], reading(sample[1])
            if value is None:
                continue
            points.append((timestamp_s, value))
        points.sort()
        out.series.setdefault(key, []).extend(points)
        out.series[key].sort()
    return out


def parse_pod_load(result: Iterable[Any]) -> dict[TierKey, dict[str, float]]:
    """Running requests per pod of every tier (`pod_load_query`). A pod whose reading is
    no count is left out: unknown, which pod-deletion-cost treats as idle."""
    out: dict[TierKey, dict[str, float]] = {}
    for item in result:
        if not isinstance(item, Mapping) or not isinstance(item.get("metric"), Mapping):
            continue
        labels: Mapping[str, Any] = item["metric"]
        key, pod = tier_key(labels), labels.get(SERIES_LABEL_POD)
        sample = parse_sample(item.get("value"))
        running = None if sample is None else plausible.COUNT(sample[1])
        if key is None or not isinstance(pod, str) or not pod or running is None:
            continue
        out.setdefault(key, {})[pod] = running
    return out


@dataclass(frozen=True)
class KvCapacityReading:
    """A tier's allocated KV cache: the smallest `num_gpu_blocks` its replicas report."""

    num_gpu_blocks: int
    block_size: int
    pods: int


@dataclass
class KvCapacityResult:
    tiers: dict[TierKey, KvCapacityReading] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# What vLLM's cache_config_info says for num_gpu_blocks before the cache is allocated.
_NOT_ALLOCATED = "None"


def parse_kv_capacity(result: Iterable[Any]) -> KvCapacityResult:
    """Per tier, the smallest block count any replica allocated (the replica that holds
    least sets what the tier can promise) and how many replicas reported one.

    A replica still starting (vLLM reports `num_gpu_blocks="None"` until its KV cache is
    allocated) is left out. One whose numbers are no allocation (not whole numbers,
    zero, beyond `plausible.KV_*_MAX`) leaves its tier without a reading: its capacity is
    unknown, and so is the smallest of the tier's. Other tiers keep theirs."""
    out = KvCapacityResult()
    spoiled: set[TierKey] = set()
    for key, item in _keyed_series(result, tier_key, "tier labels", out.problems):
        labels = item.get("metric") or {}
        if labels.get(KV_BLOCKS_LABEL) == _NOT_ALLOCATED:
            out.problems.append(f"{key}: a replica has not allocated its KV cache yet")
            continue
        blocks = plausible.positive_int(labels.get(KV_BLOCKS_LABEL), plausible.KV_BLOCKS_MAX)
        block_size = plausible.positive_int(labels.get(KV_BLOCK_SIZE_LABEL), plausible.KV_BLOCK_SIZE_MAX)
        sample = parse_sample(item.get("value"))
        pods = None if sample is None else plausible.REPLICAS(sample[1])
        if blocks is None or block_size is None or pods is None or pods < 1 or pods != int(pods):
            out.problems.append(f"{key}: no usable {KV_BLOCKS_LABEL}/{KV_BLOCK_SIZE_LABEL} in {labels!r}")
            spoiled.add(key)
            continue
        found = out.tiers.get(key)
        if found is None:
            out.tiers[key] = KvCapacityReading(blocks, block_size, int(pods))
            continue
        smallest = min(
            (found.num_gpu_blocks * found.block_size, found.num_gpu_blocks, found.block_size),
            (blocks * block_size, blocks, block_size),
        )
        out.tiers[key] = KvCapacityReading(smallest[1], smallest[2], found.pods + int(pods))
    for key in spoiled:
        out.tiers.pop(key, None)
    return out
