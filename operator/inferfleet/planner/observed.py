"""Measured cold starts replace the planner's estimate once the cluster has shown one.

The estimate (`fleet.cold_start_seconds`) divides the checkpoint by a bandwidth guess
and adds fixed start-up costs; it is right to within a factor of two at best. What the
autoscaler needs as its lead time is how long a new replica of this tier really takes,
and the cluster reports exactly that for every serving pod: the vLLM container's start
(`status.containerStatuses[].state.running.startedAt`) and the moment the pod turned
Ready (`status.conditions[Ready].lastTransitionTime`). That interval holds the weight
load at whatever the node's storage delivers (pre-cache NVMe, a network volume, or the
hub itself with no cache) plus engine start-up, so it is the measured fetch-and-load
figure with no bandwidth model in between. The operator reads it with the pod list it
already has permission for.

Why not the fetcher's own rate (`fetch_bytes_per_s` in the node marker): the operator
cannot read node files, the pre-cache pod has no API credentials to publish it (and
should not get any), and a termination message only exists once a container exits,
which a holding pre-cache pod never does. And with a pre-cache in place the fetch rate
is not on the cold-start path at all: the load is.

Two cases are measured apart: a start whose engine compiled (the first on its node, or no
compile cache kept) and one that restored its node's compile cache (the pod's compile-cache
container says which, caching/precache/compile_cache.py). Pure: `observe_cold_starts(plan,
first, warm, warm_nodes)` returns the plan with each case's figure and reason replaced
(`firstStartSeconds`, `warmStartSeconds`), and `coldStartSeconds`, what the hold and the
lead time count on, the warm one only for the tiers every eligible node of which has shown
its compile cache; tiers without a measurement keep the estimates.
`observe_kv_capacity` does the same for the KV cache, from the block count each running
engine reports in `vllm:cache_config_info` (read from Prometheus by the operator).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.api.plan import MeasuredKv, Plan, TierPlan
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.planner.fleet import DEFAULT_HEADROOM, replicas_for_peak
from inferfleet.planner.performance import Roofline
from inferfleet.planner.startup import WARM_PREFIX
from inferfleet.planner.workload import derive

# Fewer samples than this still replace the estimate (one real start beats a guess),
# and the reason says how many there were.
COLD_START_PREFIX = "cold start ~"
NEXT_START_PREFIX = "next replica: "


@dataclass(frozen=True)
class MeasuredColdStart:
    """Start-to-Ready of a tier's serving pods: the median over `samples` pods."""

    seconds: float
    samples: int

    @classmethod
    def of(cls, startups_s: Sequence[float]) -> MeasuredColdStart | None:
        valid = [s for s in startups_s if s > 0]
        if not valid:
            return None
        return cls(seconds=float(statistics.median(valid)), samples=len(valid))


def observe_cold_starts(
    plan: Plan,
    measured: Mapping[str, MeasuredColdStart],
    warm: Mapping[str, MeasuredColdStart] | None = None,
    warm_nodes: Mapping[str, int] | None = None,
) -> Plan:
    """`plan` with each feasible tier's starts taken from the cluster, per case.

    `measured`: first starts (pods that compiled), replacing `firstStartSeconds`; `warm`:
    starts that restored their node's compile cache, replacing `warmStartSeconds`;
    `warm_nodes`: the tiers every eligible node of which holds their compile cache (how
    many nodes). `coldStartSeconds`, what the hold and the lead time count on, is then the
    warm figure for those tiers and the first-start figure for the others."""
    warm = warm or {}
    warm_nodes = warm_nodes or {}
    if not measured and not warm and not warm_nodes:
        return plan
    tiers = [
        _observed_tier(t, measured.get(t.name), warm.get(t.name), warm_nodes.get(t.name)) for t in plan.tiers
    ]
    return plan.model_copy(update={"tiers": tiers})


def _replace(reasons: list[str], prefix: str, reason: str) -> list[str]:
    """`reasons` with the one starting with `prefix` replaced by `reason` (appended if none)."""
    out = [reason if r.startswith(prefix) else r for r in reasons]
    return out if reason in out else [*out, reason]


def _observed_tier(
    tier: TierPlan, first: MeasuredColdStart | None, warm: MeasuredColdStart | None, nodes: int | None
) -> TierPlan:
    if not tier.feasible:
        return tier
    first_s = tier.first_start_seconds if tier.first_start_seconds is not None else tier.cold_start_seconds
    warm_s = tier.warm_start_seconds
    reasons = list(tier.reasons)
    if first is not None:
        reasons = _replace(
            reasons,
            COLD_START_PREFIX,
            f"{COLD_START_PREFIX}{first.seconds:.0f} s measured: median start-to-Ready of "
            f"{first.samples} serving pod(s) that compiled (container start to Ready: weight load from the "
            f"node plus engine start-up); the estimate was ~{first_s:.0f} s",
        )
        first_s = round(first.seconds, 1)
    if warm is not None and warm_s is not None:
        reasons = _replace(
            reasons,
            WARM_PREFIX,
            f"{WARM_PREFIX}{warm.seconds:.0f} s measured: median start-to-Ready of {warm.samples} serving "
            f"pod(s) that restored their node's compile cache (its copy included); the estimate was "
            f"~{warm_s:.0f} s",
        )
        warm_s = round(warm.seconds, 1)
    covered = nodes is not None and warm_s is not None
    if covered:
        reasons = _replace(
            reasons,
            NEXT_START_PREFIX,
            f"{NEXT_START_PREFIX}a warm start: all {nodes} eligible node(s) have shown the tier's compile "
            "cache, so the front door's hold and the autoscaler's lead time count on it",
        )
    else:
        reasons = [r for r in reasons if not r.startswith(NEXT_START_PREFIX)]
    effective = warm_s if covered and warm_s is not None else first_s
    return tier.model_copy(
        update={
            "cold_start_seconds": effective,
            "first_start_seconds": first_s,
            "warm_start_seconds": warm_s,
            "compile_cache_warm": covered,
            "reasons": reasons,
        }
    )


# --- measured KV capacity: from vLLM's own `vllm:cache_config_info` --------------------

KV_MEASURED_PREFIX = "KV capacity measured: "
# A measurement this far below the estimate means the estimate over-promised.
OVER_PROMISE_SHARE = 0.10


@dataclass(frozen=True)
class MeasuredKvCapacity:
    """What a tier's running engines allocated: the smallest `num_gpu_blocks` over the
    reporting pods (the replica that holds least sets what a replica can promise)."""

    num_gpu_blocks: int
    block_size: int
    pods: int


def _scaled_rps(tier: TierPlan, running_before: float, running_after: float) -> float:
    """usableRps with `running_after` instead of `running_before` running sequences,
    from the tier's roofline (prefill share unchanged)."""
    perf = tier.performance
    if perf is None or running_before <= 0:
        return tier.usable_rps
    roof = Roofline(perf.prefill_tokens_per_second, perf.decode_step_base_ms, perf.decode_step_per_seq_ms)
    before = roof.requests_per_second(running_before, 1.0, 1.0)
    after = roof.requests_per_second(running_after, 1.0, 1.0)
    return tier.usable_rps * after / before if before > 0 else tier.usable_rps


def observe_kv_capacity(
    plan: Plan, spec: InferenceServiceSpec, measured: Mapping[str, MeasuredKvCapacity]
) -> Plan:
    """`plan` with each measured feasible tier's KV figures taken from the engine.

    The measured blocks scale the estimate's tokens, max concurrency and P95
    concurrency (the pool's grouping is the same), the running batch follows them
    within the ITL cap, and usableRps and replicasForPeak are recomputed from there, so
    the autoscaler sizes from what the engine really has. The estimate stays beside it
    in `measuredKv`, and a reason says by how much they differ."""
    if not measured:
        return plan
    tiers: list[TierPlan] = []
    specs = {tier.name: tier for tier in spec.tiers}
    headroom = (
        spec.scaling.headroom if spec.scaling and spec.scaling.headroom is not None else DEFAULT_HEADROOM
    )
    for tier in plan.tiers:
        found = measured.get(tier.name)
        if found is None or not tier.feasible or found.num_gpu_blocks <= 0 or tier.kv_cache_tokens <= 0:
            tiers.append(tier)
            continue
        estimated_blocks = tier.num_gpu_blocks or max(1, tier.kv_cache_tokens // max(1, tier.block_size))
        groups = max(1.0, estimated_blocks * tier.block_size / tier.kv_cache_tokens)
        tokens = int(found.num_gpu_blocks * found.block_size / groups)
        ratio = tokens / tier.kv_cache_tokens
        workload = derive(spec, specs[tier.name])
        concurrency_p95 = min(float(tier.max_num_seqs), tier.concurrency_at_p95 * ratio)
        running_before = max(1.0, min(float(tier.max_num_seqs), math.floor(tier.concurrency_at_p95)))
        running_after = max(1.0, min(float(tier.max_num_seqs), math.floor(concurrency_p95)))
        usable = _scaled_rps(tier, running_before, running_after)
        replicas = replicas_for_peak(workload.tier_peak_rps, usable, headroom)
        change = ratio - 1
        reason = (
            f"{KV_MEASURED_PREFIX}{tokens:,} tokens per replica ({found.num_gpu_blocks:,} blocks × "
            f"{found.block_size} from vllm:cache_config_info of {found.pods} pod(s), the smallest); "
            f"the estimate was {tier.kv_cache_tokens:,} ({change:+.1%}); replicas for peak "
            f"{tier.replicas_for_peak} → {replicas} at ~{usable:.2f} req/s per replica"
        )
        if change < -OVER_PROMISE_SHARE:
            reason += "; the estimate over-promised, the autoscaler now sizes from the measurement"
        reasons = [r for r in tier.reasons if not r.startswith(KV_MEASURED_PREFIX)]
        reasons.append(reason)
        tiers.append(
            tier.model_copy(
                update={
                    "kv_cache_tokens": tokens,
                    "max_concurrency": round(tier.max_concurrency * ratio, 2),
                    "concurrency_at_p95": round(concurrency_p95, 2),
                    "usable_rps": round(usable, 3),
                    "replicas_for_peak": replicas,
                    "measured_kv": MeasuredKv(
                        num_gpu_blocks=found.num_gpu_blocks,
                        block_size=found.block_size,
                        kv_cache_tokens=tokens,
                        pods=found.pods,
                        estimated_kv_cache_tokens=tier.kv_cache_tokens,
                        estimated_replicas_for_peak=tier.replicas_for_peak,
                    ),
                    "reasons": reasons,
                }
            )
        )
    return plan.model_copy(update={"tiers": tiers})
