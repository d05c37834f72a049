"""One tier's load readings, checked once where they are made (pure).

Prometheus's answers (autoscaling.promql.signals), a replay's simulated engines
(autoscaling.simulate.engine) and a test's script all become a `TierReadings`;
construction is the one place a reading is checked against its range (plausible), and
the same object then reaches decide() inside `TierSignals`. Nothing downstream cleans a
reading again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferfleet.autoscaling.policy import plausible


@dataclass(frozen=True, slots=True)
class TokenQuantiles:
    """p50 / p95 / p99 of a token-length histogram (vllm:request_prompt_tokens and
    vllm:request_generation_tokens, by histogram_quantile over the mix window)."""

    p50: float
    p95: float
    p99: float

    def as_list(self) -> list[float]:
        return [self.p50, self.p95, self.p99]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> TokenQuantiles:
        p50, p95, p99 = (float(v) for v in values)
        return cls(p50, p95, p99)


# The largest finite TTFT histogram bucket vLLM exports (autoscaling.promql.queries.TTFT_BUCKETS_S).
TTFT_MAX_S = 2560.0


@dataclass(frozen=True)
class TierReadings:
    """One tier's Prometheus readings at one instant; None means "no data", never zero.

    A value that is no measurement of its signal (NaN, infinite, negative, a KV usage
    above 1, ... see `plausible`) is None, however the readings were made (assembled
    from Prometheus, scripted by a test, built by another reader): construction is the
    one place a tier's reading is checked, so the tier holds instead of acting on it.
    The same object reaches decide(), inside `TierSignals` beside the workload's replica
    counts: a reading is checked once, here, whatever it went through on the way.
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

    def __post_init__(self) -> None:
        checked: dict[str, object] = {
            "waiting": plausible.COUNT(self.waiting),
            "running": plausible.COUNT(self.running),
            "ttft_p99_s": _ttft(self.ttft_p99_s),
            "kv_cache_usage": plausible.FRACTION(self.kv_cache_usage),
            "request_rate_rps": plausible.rate(self.request_rate_rps),
            "ready_replicas": replicas_reading(self.ready_replicas),
            "prompt_tokens_rps": plausible.rate(self.prompt_tokens_rps),
            "generation_tokens_rps": plausible.rate(self.generation_tokens_rps),
            "rejected_rps": plausible.rate(self.rejected_rps),
            "prompt_tokens": _token_quantiles(self.prompt_tokens),
            "generation_tokens": _token_quantiles(self.generation_tokens),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def has_load_data(self) -> bool:
        """Queue depth and running count are the minimum the policy needs to act on."""
        return self.waiting is not None and self.running is not None

    @property
    def ttft_p99_ms(self) -> float | None:
        return None if self.ttft_p99_s is None else self.ttft_p99_s * 1000.0


def _ttft(value: float | None) -> float | None:
    # histogram_quantile answers +Inf only when the quantile lies above the largest finite
    # bucket (TTFT_MAX_S, 42 minutes): no request waits that long, so it is garbage like
    # any other non-finite value. Finite values above the last bucket are capped there.
    value = plausible.DURATION_S(value)
    return None if value is None else min(value, TTFT_MAX_S)


def replicas_reading(value: float | None) -> int | None:
    """A replica count as a whole number, or None when it is no count."""
    checked = None if value is None else plausible.REPLICAS(float(value))
    return None if checked is None else round(checked)


def _token_quantiles(quantiles: TokenQuantiles | None) -> TokenQuantiles | None:
    if quantiles is None:
        return None
    values = [plausible.TOKENS(value) for value in (quantiles.p50, quantiles.p95, quantiles.p99)]
    if any(value is None for value in values):
        return None
    # histogram_quantile is monotone in the quantile; sorting guards a hand-made answer.
    p50, p95, p99 = sorted(float(value) for value in values if value is not None)
    return TokenQuantiles(p50, p95, p99)


NO_READINGS = TierReadings()
