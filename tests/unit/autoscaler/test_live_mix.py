"""The live loop hands the step the request mix, and a steady mix costs nothing.

The runner once rebuilt each tier's readings without the mix (output tokens, 4xx
answers, token-length percentiles), so WorkloadDrift and `replan: auto` only ever ran
in the simulator. These tests drive the real runner (scripted Prometheus answers, the
in-memory cluster) for an hour of 5 s loop ticks with a mix that is steady apart from
+-5 % noise per reading, as Prometheus's rates and histogram quantiles are: the verdict
is said once, and after that the loop writes nothing but its 5-minute heartbeat and
scales nothing.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.policy import TokenQuantiles
from inferfleet.autoscaling.promql.parse import ServiceKey
from inferfleet.autoscaling.step.step import STATUS_HEARTBEAT_S
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.kubedata import ObjectRef
from tests.toolkit import a_scaled_service, a_small_tier_plan
from tests.toolkit import reconciled as tk
from tests.unit.autoscaler.conftest import ScriptedReader

NAMESPACE, NAME = "ml", "chat"
TIERS = {"l4": 0.5, "a100": 0.9}  # requests/s each tier serves
TICK_S = 5.0
HOUR_S = 3600.0
REF = ObjectRef(labels.API_VERSION, labels.KIND, NAMESPACE, NAME)


def _histogram_quantiles(tokens: float, jitter: float) -> TokenQuantiles:
    """Every request at one length: Prometheus interpolates inside vLLM's 1-2-5 bucket
    (a 512-token prompt reads 750/975/995 out of the 500-1000 bucket)."""
    bounds = [base * m for base in (1, 10, 100, 1000, 10_000) for m in (1, 2, 5)]
    low = max(bound for bound in bounds if bound < tokens)
    high = min(bound for bound in bounds if bound >= tokens)
    return TokenQuantiles(*((low + q * (high - low)) * jitter for q in (0.50, 0.95, 0.99)))


def run_steady_hour(
    prompt_tokens: float,
    output_tokens: float,
    *,
    prompt_quantiles: tuple[float, float, float] | None = None,
    rejected_share: float = 0.0,
    noise: float = 0.05,
) -> tuple[list[float], int, InMemoryCluster]:
    """An hour of loop ticks over one service with a steady mix (each reading off by up
    to `noise`); the times of the status writes and the number of scale calls."""
    cluster = InMemoryCluster()
    tiers = [{"name": tier, "gpu": "L4", "minReplicas": 1, "maxReplicas": 8} for tier in TIERS]
    tk.install(
        cluster, a_scaled_service(NAME, NAMESPACE).tiers(*tiers), plans=[a_small_tier_plan(t) for t in TIERS]
    )
    reader = ScriptedReader()
    autoscaler = Autoscaler(cluster, reader, OperatorSettings())
    rng = random.Random(7)
    now_s = 1_800_000_000.0
    total_rps = sum(TIERS.values())
    writes: list[float] = []
    scaled = 0
    try:
        for tick in range(int(HOUR_S / TICK_S)):
            now_s += TICK_S
            # The per-minute history the forecaster reads, as steady as the traffic.
            reader.service_history = {ServiceKey(NAMESPACE, NAME): [total_rps] * (60 + tick // 12)}
            for index, (tier, rps) in enumerate(TIERS.items()):

                def noisy(value: float) -> float:
                    return value * (1.0 + rng.uniform(-noise, noise))

                rate = noisy(rps)
                reader.set(
                    NAMESPACE,
                    NAME,
                    tier,
                    waiting=0.0,
                    running=noisy(2.0 + index),
                    kv_cache_usage=0.3,
                    ttft_p99_s=noisy(0.1),
                    request_rate_rps=rate,
                    prompt_tokens_rps=rate * prompt_tokens,
                    generation_tokens_rps=rate * output_tokens,
                    rejected_rps=rate * rejected_share / (1.0 - rejected_share),
                    prompt_tokens=(
                        TokenQuantiles(*(noisy(q) for q in prompt_quantiles))
                        if prompt_quantiles is not None
                        else _histogram_quantiles(prompt_tokens, noisy(1.0))
                    ),
                    generation_tokens=_histogram_quantiles(output_tokens, noisy(1.0)),
                )
            report = autoscaler.run_once(now_s)
            assert report.errors == []
            if report.status_writes:
                writes.append(now_s)
            scaled += report.scaled
    finally:
        autoscaler.close()
    return writes, scaled, cluster


def _status(cluster: InMemoryCluster) -> dict[str, Any]:
    found = cluster.get(REF)
    assert found is not None
    status: dict[str, Any] = found.get("status") or {}
    return status


def _condition(cluster: InMemoryCluster, type_: str) -> dict[str, Any]:
    return next(c for c in _status(cluster).get("conditions") or [] if c["type"] == type_)


def _only_heartbeats(writes: list[float], *, news: int = 2) -> None:
    """The first `news` writes say something (the first decision, the verdict once there
    are enough requests); after them no two writes are closer than the heartbeat."""
    later = writes[news:]
    gaps = [b - a for a, b in itertools.pairwise(later)]
    assert all(gap >= STATUS_HEARTBEAT_S - TICK_S for gap in gaps), gaps
    assert len(writes) <= news + HOUR_S / STATUS_HEARTBEAT_S + 1, len(writes)


def test_a_drifted_mix_turns_workload_drift_true_once_and_then_costs_only_heartbeats() -> None:
    # Prompts of 3,000 tokens where the spec declares a median of 500.
    writes, scaled, cluster = run_steady_hour(prompt_tokens=3000.0, output_tokens=128.0)
    drift = _condition(cluster, labels.CONDITION_WORKLOAD_DRIFT)
    assert (drift["status"], drift["reason"]) == ("True", "TokenLengthsMismatch"), drift
    assert "observed prompts p50/p95/p99" in drift["message"], drift["message"]
    assert "(declared 500/1,500/3,000)" in drift["message"], drift["message"]
    observed = _status(cluster)["observedWorkload"]
    assert observed["drift"] is True
    assert 3000 <= observed["inputTokens"]["p50"] <= 4500, observed
    assert observed["meanInputTokens"] == 3000.0, observed
    warnings = [e for e in cluster.events if e["reason"] == "WorkloadDrift"]
    assert len(warnings) == 1, warnings
    assert scaled == 0
    _only_heartbeats(writes)


def test_an_honest_mix_matches_the_plan_and_costs_only_heartbeats() -> None:
    writes, scaled, cluster = run_steady_hour(prompt_tokens=512.0, output_tokens=180.0)
    drift = _condition(cluster, labels.CONDITION_WORKLOAD_DRIFT)
    assert (drift["status"], drift["reason"]) == ("False", "MatchesPlan"), drift
    assert [e for e in cluster.events if e["reason"] == "WorkloadDrift"] == []
    assert scaled == 0
    _only_heartbeats(writes)


def test_a_reading_that_hovers_at_a_threshold_does_not_flip_the_reason() -> None:
    # 1.5 % answered 4xx while the accepted prompts' p99 hovers around half of the plan's
    # max-model-len (8,192), where PromptsRejected starts; the prompts are also 4x the
    # declared ones (TokenLengthsMismatch). The reason once said is kept: it used to flip
    # between the two every few ticks, each flip a status write and a Warning event.
    writes, scaled, cluster = run_steady_hour(
        2100.0, 128.0, prompt_quantiles=(2400.0, 3800.0, 4096.0), rejected_share=0.015, noise=0.1
    )
    drift = _condition(cluster, labels.CONDITION_WORKLOAD_DRIFT)
    assert (drift["status"], drift["reason"]) == ("True", "PromptsRejected"), drift
    warnings = [e for e in cluster.events if e["reason"] == "WorkloadDrift"]
    assert len(warnings) <= 2, [w["message"][:60] for w in warnings]
    assert scaled == 0
    _only_heartbeats(writes, news=3)  # + the switch to PromptsRejected
