"""What the autoscaler sees: per-tier signals assembled from parsed query results (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfleet.autoscaling.policy import plausible
from inferfleet.autoscaling.policy.readings import TierReadings, TokenQuantiles, replicas_reading
from inferfleet.autoscaling.promql.parse import ServiceKey, TierKey, VectorResult
from inferfleet.autoscaling.promql.queries import Signal


@dataclass(frozen=True)
class SignalSnapshot:
    """Signals of every tier that reported, read in one loop.

    `failed` names the queries that errored (their signals are None everywhere).
    `unavailable` is set when no query answered at all: Prometheus is down or refusing.
    """

    time_s: float
    tiers: Mapping[TierKey, TierReadings] = field(default_factory=dict)
    # Per service: request rate per history step, oldest first, NaN for gaps, the last
    # entry being the last completed step (see RateHistoryCache.window).
    rate_history: Mapping[ServiceKey, Sequence[float]] = field(default_factory=dict)
    failed: Mapping[Signal, str] = field(default_factory=dict)
    history_failed: str | None = None
    problems: Sequence[str] = ()
    queries: int = 0
    # Requests each front-door pool holds, keyed (namespace, service, pool name); a pool
    # without a series holds none. `door_failed`: the query failed (then nothing is known).
    door_waiting: Mapping[TierKey, float | None] = field(default_factory=dict)
    door_failed: str | None = None
    # Running requests per pod, by tier (read only for pod-deletion-cost; None: not read,
    # or `pod_in_flight_failed` says why).
    pod_in_flight: Mapping[TierKey, Mapping[str, float]] | None = None
    pod_in_flight_failed: str | None = None

    @property
    def unavailable(self) -> bool:
        return len(self.failed) == len(Signal)

    def tier(self, namespace: str, service: str, tier: str) -> TierReadings | None:
        return self.tiers.get(TierKey(namespace, service, tier))


def _quantiles(values: list[float | None]) -> TokenQuantiles | None:
    if any(value is None for value in values):
        return None
    p50, p95, p99 = (float(value) for value in values if value is not None)
    return TokenQuantiles(p50, p95, p99)


def assemble(
    time_s: float,
    vectors: Mapping[Signal, VectorResult],
    *,
    failed: Mapping[Signal, str] | None = None,
    history: Mapping[ServiceKey, Sequence[float]] | None = None,
    history_failed: str | None = None,
    queries: int = 0,
    door: VectorResult | None = None,
    door_failed: str | None = None,
    pod_in_flight: Mapping[TierKey, Mapping[str, float]] | None = None,
    pod_in_flight_failed: str | None = None,
) -> SignalSnapshot:
    """Join per-signal results on their tier key into one snapshot (the front door's
    queue beside them, keyed by pool)."""
    keys: set[TierKey] = set()
    problems: list[str] = []
    for signal, vector in vectors.items():
        keys.update(vector.values)
        problems.extend(f"{signal}: {problem}" for problem in vector.problems)

    def value(signal: Signal, key: TierKey) -> float | None:
        vector = vectors.get(signal)
        return None if vector is None else vector.values.get(key)

    tiers: dict[TierKey, TierReadings] = {}
    for key in sorted(keys):
        tiers[key] = TierReadings(
            waiting=value(Signal.waiting, key),
            running=value(Signal.running, key),
            ttft_p99_s=value(Signal.ttft_p99, key),
            kv_cache_usage=value(Signal.kv_cache_usage, key),
            request_rate_rps=value(Signal.request_rate, key),
            ready_replicas=replicas_reading(value(Signal.ready_replicas, key)),
            prompt_tokens_rps=value(Signal.prompt_tokens_rate, key),
            generation_tokens_rps=value(Signal.generation_tokens_rate, key),
            rejected_rps=value(Signal.rejected_rate, key),
            prompt_tokens=_quantiles(
                [
                    value(Signal.prompt_tokens_p50, key),
                    value(Signal.prompt_tokens_p95, key),
                    value(Signal.prompt_tokens_p99, key),
                ]
            ),
            generation_tokens=_quantiles(
                [
                    value(Signal.generation_tokens_p50, key),
                    value(Signal.generation_tokens_p95, key),
                    value(Signal.generation_tokens_p99, key),
                ]
            ),
        )
    return SignalSnapshot(
        time_s=time_s,
        tiers=tiers,
        rate_history=dict(history or {}),
        failed=dict(failed or {}),
        history_failed=history_failed,
        problems=tuple(problems) + tuple(f"door: {problem}" for problem in (door.problems if door else [])),
        queries=queries,
        # A pool whose reading is no count is unknown (None), not "holds nothing".
        door_waiting={key: plausible.COUNT(v) for key, v in door.values.items()} if door is not None else {},
        door_failed=None if door is not None else (door_failed or "not read"),
        pod_in_flight=pod_in_flight,
        pod_in_flight_failed=pod_in_flight_failed,
    )


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _tokens(quantiles: TokenQuantiles | None) -> dict[str, float] | None:
    if quantiles is None:
        return None
    return {"p50": round(quantiles.p50, 1), "p95": round(quantiles.p95, 1), "p99": round(quantiles.p99, 1)}


def to_document(snapshot: SignalSnapshot) -> dict[str, Any]:
    """The `inferfleet signals -o json` document: services → tiers → signals."""
    services: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key in sorted(snapshot.tiers):
        signals = snapshot.tiers[key]
        services.setdefault((key.namespace, key.service), []).append(
            {
                "name": key.tier,
                "waiting": _round(signals.waiting, 3),
                "running": _round(signals.running, 3),
                "ttftP99Ms": _round(signals.ttft_p99_ms, 1),
                "kvCacheUsage": _round(signals.kv_cache_usage, 4),
                "requestRateRps": _round(signals.request_rate_rps, 4),
                "promptTokensRps": _round(signals.prompt_tokens_rps, 1),
                "generationTokensRps": _round(signals.generation_tokens_rps, 1),
                "rejectedRps": _round(signals.rejected_rps, 4),
                "promptTokens": _tokens(signals.prompt_tokens),
                "generationTokens": _tokens(signals.generation_tokens),
                "readyReplicas": signals.ready_replicas,
            }
        )
    return {
        "services": [
            {"namespace": namespace, "name": name, "tiers": tiers}
            for (namespace, name), tiers in services.items()
        ]
    }
