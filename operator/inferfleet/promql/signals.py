"""What the autoscaler sees: per-tier signals assembled from parsed query results (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfleet.promql.parse import ServiceKey, TierKey, VectorResult
from inferfleet.promql.queries import TTFT_BUCKETS_S, Signal
from inferfleet.scaling.types import TokenQuantiles


@dataclass(frozen=True)
class TierReadings:
    """One tier's Prometheus readings at one instant; None means "no data", never zero.

    The autoscaler step turns them into `scaling.TierSignals`, what decide() reads.
    """

    waiting: float | None = None
    running: float | None = None
    ttft_p99_s: float | None = None
    kv_cache_usage: float | None = None
    request_rate_rps: float | None = None
    ready_replicas: int | None = None
    # Prompt tokens prefilled per second, summed over the tier's replicas.
    prompt_tokens_rps: float | None = None
    generation_tokens_rps: float | None = None
    rejected_rps: float | None = None  # 4xx answers per second
    # Token-length percentiles over the mix window (None: no finished request).
    prompt_tokens: TokenQuantiles | None = None
    generation_tokens: TokenQuantiles | None = None

    @property
    def has_load_data(self) -> bool:
        """Queue depth and running count are the minimum the policy needs to act on."""
        return self.waiting is not None and self.running is not None

    @property
    def ttft_p99_ms(self) -> float | None:
        return None if self.ttft_p99_s is None else self.ttft_p99_s * 1000.0


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

    @property
    def unavailable(self) -> bool:
        return len(self.failed) == len(Signal)

    def tier(self, namespace: str, service: str, tier: str) -> TierReadings | None:
        return self.tiers.get(TierKey(namespace, service, tier))


# No count, rate, duration or fraction the policy reads comes near this; a reading that
# does is garbage, and arithmetic on it (1e308 x 2) would overflow to infinity.
MAX_READING = 1e12


def _number(value: float | None) -> float | None:
    """A reading the policy may act on, or None ("no data").

    Every signal here is a count, a rate, a duration or a fraction: a NaN, an infinity
    or a negative number is no measurement of any of them. It is read as missing (the
    tier holds), never as demand: one pod reporting `num_requests_waiting = +Inf` must
    not scale its tier to the maximum, let alone break the loop for every other tier.
    Finite values beyond any real fleet (MAX_READING) are read the same way.
    """
    if value is None or not math.isfinite(value) or value < 0 or value > MAX_READING:
        return None
    return value


def _counter_rate(value: float | None) -> float | None:
    # rate() can dip a hair below zero after an extrapolated counter reset: that dip is
    # noise around zero, so it reads as zero; anything further below is no rate at all.
    if value is not None and math.isfinite(value) and -1e-6 <= value < 0:
        return 0.0
    return _number(value)


def _ttft(value: float | None) -> float | None:
    # histogram_quantile answers +Inf only when the quantile lies above the largest finite
    # bucket (TTFT_BUCKETS_S[-1], 42 minutes): no request waits that long, so it is garbage
    # like any other non-finite value. Finite values above the last bucket are capped there.
    value = _number(value)
    return None if value is None else min(value, TTFT_BUCKETS_S[-1])


def sane(signals: TierReadings) -> TierReadings:
    """The same signals with every unusable reading (non-finite, negative) as None.

    `assemble` already reads values this way; this applies the rule to signals that
    reached the autoscaler another way (tests, other readers), at the one place where
    they become a decision."""
    ready = _number(None if signals.ready_replicas is None else float(signals.ready_replicas))
    return TierReadings(
        waiting=_number(signals.waiting),
        running=_number(signals.running),
        ttft_p99_s=_ttft(signals.ttft_p99_s),
        kv_cache_usage=_number(signals.kv_cache_usage),
        request_rate_rps=_counter_rate(signals.request_rate_rps),
        ready_replicas=None if ready is None else signals.ready_replicas,
        prompt_tokens_rps=_counter_rate(signals.prompt_tokens_rps),
    )


def _quantiles(values: list[float | None]) -> TokenQuantiles | None:
    if any(value is None or value < 0 or math.isinf(value) for value in values):
        return None
    p50, p95, p99 = (float(value) for value in values if value is not None)
    # histogram_quantile is monotone in the quantile; sorting guards a hand-made answer.
    p50, p95, p99 = sorted((p50, p95, p99))
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
        ready = _number(value(Signal.ready_replicas, key))
        tiers[key] = TierReadings(
            waiting=_number(value(Signal.waiting, key)),
            running=_number(value(Signal.running, key)),
            ttft_p99_s=_ttft(value(Signal.ttft_p99, key)),
            kv_cache_usage=_number(value(Signal.kv_cache_usage, key)),
            request_rate_rps=_counter_rate(value(Signal.request_rate, key)),
            ready_replicas=None if ready is None else round(ready),
            prompt_tokens_rps=_counter_rate(value(Signal.prompt_tokens_rate, key)),
            generation_tokens_rps=_counter_rate(value(Signal.generation_tokens_rate, key)),
            rejected_rps=_counter_rate(value(Signal.rejected_rate, key)),
            prompt_tokens=_quantiles(
                [
                    _number(value(Signal.prompt_tokens_p50, key)),
                    _number(value(Signal.prompt_tokens_p95, key)),
                    _number(value(Signal.prompt_tokens_p99, key)),
                ]
            ),
            generation_tokens=_quantiles(
                [
                    _number(value(Signal.generation_tokens_p50, key)),
                    _number(value(Signal.generation_tokens_p95, key)),
                    _number(value(Signal.generation_tokens_p99, key)),
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
        door_waiting={key: _number(v) for key, v in door.values.items()} if door is not None else {},
        door_failed=None if door is not None else (door_failed or "not read"),
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
