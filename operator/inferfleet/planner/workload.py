"""Numbers the planner derives from `spec.workload` for one tier."""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferfleet.api.spec import InferenceServiceSpec, TierSpec

INTERACTIVE = frozenset({"chat", "code", "rag", "agentic"})

# Requests one replica should hold at once at P95 context, by archetype. Interactive
# serving runs batches of 32-64 (common vLLM production settings); long-context
# archetypes (rag, agentic) hold fewer; offline work trades batch per replica for more
# replicas, since preemption only costs throughput there.
TARGET_CONCURRENCY = {"chat": 64, "code": 64, "rag": 32, "agentic": 32, "batch": 32}
# Scheduler cap (--max-num-seqs) before the SLO trims it: 32-64 interactive, 128-256 batch.
MAX_NUM_SEQS = {"chat": 64, "code": 64, "rag": 48, "agentic": 48, "batch": 256}


def mean_tokens(p50: float, p95: float) -> float:
    """Mean length from declared percentiles. Token-length distributions are
    right-skewed: the mean sits above the median."""
    return (2 * p50 + p95) / 3


@dataclass(frozen=True, slots=True)
class TierWorkload:
    archetype: str
    online: bool
    input_p50: int
    input_p95: int
    input_p99: int
    output_p50: int
    output_p95: int
    output_p99: int
    ttft_slo_s: float
    itl_slo_s: float
    tier_peak_rps: float
    tier_share: float
    target_concurrency: int
    max_num_seqs_cap: int
    max_input_tokens: int | None

    @property
    def p95_context_tokens(self) -> int:
        return self.input_p95 + self.output_p95

    @property
    def p99_context_tokens(self) -> int:
        return self.input_p99 + self.output_p99

    @property
    def mean_input_tokens(self) -> float:
        return mean_tokens(self.input_p50, self.input_p95)

    @property
    def mean_output_tokens(self) -> float:
        return mean_tokens(self.output_p50, self.output_p95)


def tier_share(spec: InferenceServiceSpec, tier: TierSpec) -> float:
    """Share of peak traffic this tier must carry.

    With `workload.routing`, named tiers get their share and unnamed tiers split the
    rest; without it every tier is sized to carry the whole peak on its own.
    """
    routing = spec.workload.routing
    if not routing:
        return 1.0
    if tier.name in routing:
        return routing[tier.name]
    unnamed = [t for t in spec.tiers if t.name not in routing]
    return max(0.0, 1.0 - sum(routing.values())) / max(1, len(unnamed))


def derive(spec: InferenceServiceSpec, tier: TierSpec) -> TierWorkload:
    workload = spec.workload
    archetype = workload.archetype
    online = workload.mode == "online"
    share = tier_share(spec, tier)
    peak = workload.peak_requests_per_second * share
    ttft_s = workload.slo.ttft_p99_ms / 1000
    itl_s = workload.slo.itl_p99_ms / 1000
    mean_out = (2 * workload.output_tokens.p50 + workload.output_tokens.p95) / 3
    # Little's law: requests in flight on the tier if each took its full latency budget.
    in_flight = peak * (ttft_s + mean_out * itl_s)
    target = max(1, min(TARGET_CONCURRENCY[archetype], math.ceil(in_flight)))
    return TierWorkload(
        archetype=archetype,
        online=online,
        input_p50=workload.input_tokens.p50,
        input_p95=workload.input_tokens.p95,
        input_p99=workload.input_tokens.p99,
        output_p50=workload.output_tokens.p50,
        output_p95=workload.output_tokens.p95,
        output_p99=workload.output_tokens.p99,
        ttft_slo_s=ttft_s,
        itl_slo_s=itl_s,
        tier_peak_rps=peak,
        tier_share=share,
        target_concurrency=target,
        max_num_seqs_cap=MAX_NUM_SEQS[archetype],
        max_input_tokens=spec.serving.max_input_tokens if spec.serving else None,
    )
