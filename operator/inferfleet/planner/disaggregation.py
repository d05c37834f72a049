"""Prefill on one tier, decode on another: whether it pays, where, and at which ratio (pure).

Prefill is compute bound and decode bandwidth bound, so one GPU fleet is a compromise
between two workloads; disaggregated serving gives each phase a pool of its own, sized
for its bottleneck, and moves each request's KV cache from the prefill pool to the
decode pool over the network (vLLM's NixlConnector). This module decides, for a service
whose spec allows it (`spec.serving.disaggregation.mode`), from the tiers' own plans:

- each candidate pair (prefill tier P, decode tier D, possibly the same GPU type): the
  prefill pool's replicas for the peak's prompt tokens at P's prefill rate (the plan's
  roofline, at its usable share), the decode pool's replicas for the peak's output
  tokens at the batch D's ITL SLO allows (`step(b) = base + per_seq × b` ≤ the SLO,
  within its sequence slots and its KV cache at the mean context); the P:D ratio is
  the pools' GPUs (peak × mean input / prefill throughput against peak × mean output /
  decode throughput, DistServe's two queues sized apart);
- only pairs whose engines can pass KV between them (`incompatibility`: one vLLM release,
  one KV-cache type, one TP size);
- the KV-transfer tax: a mean prompt's KV bytes over the slower of the two GPUs' network
  links (catalog `networkGBsPerGpu`);
- it pays when the cheapest pair costs at least `MIN_SAVING` less than the cheapest
  colocated tier at the same peak (GPU-hours priced by the tiers' costPerGpuHour, GPUs
  where no price is given), the mean prompt is long enough for the interference it
  removes to matter (`MIN_MEAN_PROMPT`: below ~500 tokens chunked prefill on a colocated
  fleet does as well), and the transfer takes at most `MAX_TRANSFER_SHARE` of the TTFT
  SLO.

`mode: on` plans the cheapest pair even where it does not pay (and says so); `auto`
only where it pays; every outcome is a reason, including why not.

A pool is a tier (one Deployment per tier), so the two pools are two different tiers;
to split on one GPU type, declare it as two tiers. Whether the operator can run the
split it chose (the front door, the tiers' releases and shapes) is design.pd_split's
call, which adds the last reason: deployed, or why not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.api.plan import DisaggregationPlan, TierPlan
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.planner import host_kv
from inferfleet.planner.fleet import DEFAULT_HEADROOM, replicas_for_peak
from inferfleet.planner.performance import USABLE_SHARE_OF_ROOFLINE
from inferfleet.planner.workload import mean_tokens

# Below this mean prompt (~500 tokens) the interference disaggregation removes is small:
# chunked prefill on a colocated fleet is the better choice.
MIN_MEAN_PROMPT = 500.0
# The pair must save at least this share of the colocated fleet's price to be worth a
# second pool, a KV transfer per request and a second place to fail.
MIN_SAVING = 0.10
# The KV transfer may take at most this share of the TTFT SLO.
MAX_TRANSFER_SHARE = 0.10


@dataclass(frozen=True, slots=True)
class Pair:
    """One candidate: its pools, their price and the transfer it pays."""

    prefill: TierPlan
    decode: TierPlan
    prefill_replicas: int
    decode_replicas: int
    price: float
    transfer_ms: float

    @property
    def prefill_gpus(self) -> int:
        return self.prefill_replicas * self.prefill.gpus_per_replica

    @property
    def decode_gpus(self) -> int:
        return self.decode_replicas * self.decode.gpus_per_replica

    @property
    def ratio(self) -> str:
        divisor = math.gcd(self.prefill_gpus, self.decode_gpus) or 1
        return f"{self.prefill_gpus // divisor}:{self.decode_gpus // divisor}"


def _headroom(spec: InferenceServiceSpec) -> float:
    scaling = spec.scaling
    return scaling.headroom if scaling is not None and scaling.headroom is not None else DEFAULT_HEADROOM


def prefill_tokens_per_s(plan: TierPlan) -> float:
    """Prompt tokens per second one replica prefills at its usable share of the roofline."""
    performance = plan.performance
    return performance.prefill_tokens_per_second * USABLE_SHARE_OF_ROOFLINE if performance else 0.0


def decode_tokens_per_s(plan: TierPlan, itl_ms: float, mean_context: float) -> float:
    """Output tokens per second one replica decodes with its batch within the ITL SLO, its
    sequence slots and its KV cache at the mean context."""
    performance = plan.performance
    if performance is None or mean_context <= 0:
        return 0.0
    room = itl_ms - performance.decode_step_base_ms
    by_slo = int(room / max(performance.decode_step_per_seq_ms, 1e-9)) if room > 0 else 0
    batch = min(by_slo, plan.max_num_seqs, int(plan.kv_cache_tokens / mean_context))
    if batch <= 0:
        return 0.0
    step_ms = performance.decode_step_base_ms + performance.decode_step_per_seq_ms * batch
    return batch * 1000.0 / step_ms * USABLE_SHARE_OF_ROOFLINE


def _per_gpu_price(plan: TierPlan, prices: Mapping[str, float | None]) -> float:
    """A GPU-hour of the tier: its price, or 1 (counting GPUs) when none is given."""
    price = prices.get(plan.name)
    return price if price is not None else 1.0


def _pair(
    spec: InferenceServiceSpec,
    prefill: TierPlan,
    decode: TierPlan,
    gpus: Mapping[str, GpuSpec],
    prices: Mapping[str, float | None],
) -> Pair | None:
    workload = spec.workload
    mean_in = mean_tokens(workload.input_tokens.p50, workload.input_tokens.p95)
    mean_out = mean_tokens(workload.output_tokens.p50, workload.output_tokens.p95)
    peak = workload.peak_requests_per_second * (1 + _headroom(spec))
    prefill_rate = prefill_tokens_per_s(prefill)
    decode_rate = decode_tokens_per_s(decode, workload.slo.itl_p99_ms, mean_in + mean_out / 2)
    if prefill_rate <= 0 or decode_rate <= 0:
        return None
    prefill_replicas = max(1, math.ceil(peak * mean_in / prefill_rate - 1e-9))
    decode_replicas = max(1, math.ceil(peak * mean_out / decode_rate - 1e-9))
    price = prefill_replicas * prefill.gpus_per_replica * _per_gpu_price(prefill, prices)
    price += decode_replicas * decode.gpus_per_replica * _per_gpu_price(decode, prices)
    links = [gpus[name].network_g_bs for name in (prefill.name, decode.name) if name in gpus]
    link = min((value for value in links if value), default=None)
    # No GPU cache (a tier that holds no KV) has nothing to ship: 0 bytes a token.
    per_token = host_kv.bytes_per_token(prefill) or 0.0
    transfer_ms = mean_in * per_token / (link * 1e9) * 1000 if link else math.inf
    return Pair(prefill, decode, prefill_replicas, decode_replicas, price, transfer_ms)


def colocated_price(spec: InferenceServiceSpec, plan: TierPlan, prices: Mapping[str, float | None]) -> float:
    """The colocated tier's fleet for the whole peak (whatever routing shares say), priced
    like a pair."""
    replicas = replicas_for_peak(spec.workload.peak_requests_per_second, plan.usable_rps, _headroom(spec))
    return (replicas or math.inf) * plan.gpus_per_replica * _per_gpu_price(plan, prices)


def _kv_type(plan: TierPlan) -> str:
    """The KV cache's element type, `auto` resolved to the model's dtype where the plan
    names it."""
    if plan.kv_cache_dtype != "auto":
        return plan.kv_cache_dtype
    return {"bfloat16": "bf16", "float16": "fp16"}.get(plan.dtype, "the model's dtype")


def incompatibility(prefill: TierPlan, decode: TierPlan) -> str | None:
    """Why vLLM's NixlConnector could not move KV from one tier's engine to the other's:
    its handshake compares a hash of the vLLM version, the model and the KV cache's type
    (vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py), and a different TP
    size needs a block-contiguous KV layout on the prefill side, which the operator does
    not set; so: one release, one KV type, one TP size."""
    if prefill.vllm_release != decode.vllm_release:
        return f"they run different vLLM releases ({prefill.vllm_release} and {decode.vllm_release})"
    if _kv_type(prefill) != _kv_type(decode):
        return (
            f"their KV caches differ in type ({_kv_type(prefill)} and {_kv_type(decode)}; spec.kvCacheDtype "
            "or a tier's overrides.kvCacheDtype aligns them)"
        )
    if prefill.tensor_parallel_size != decode.tensor_parallel_size:
        return (
            f"their tensor-parallel sizes differ ({prefill.tensor_parallel_size} and "
            f"{decode.tensor_parallel_size}; overrides.tensorParallelSize can align them)"
        )
    return None


def _no_pair(
    candidates: Sequence[tuple[TierPlan, TierPlan]], joinable: Sequence[tuple[TierPlan, TierPlan]]
) -> str:
    if not candidates:
        return "no pair of two feasible tiers with prefill and decode rates (prefillTiers x decodeTiers)"
    if joinable:
        return "no pair of tiers has both a prefill rate and a decode batch within the ITL SLO"
    why = "; ".join(
        f"prefill on {p.name}, decode on {d.name}: {incompatibility(p, d)}" for p, d in candidates[:4]
    )
    return f"no pair of tiers can pass the KV cache between them ({why})"


def _allowed(names: Sequence[str] | None, plan: TierPlan) -> bool:
    return names is None or plan.name in names


def plan_disaggregation(
    spec: InferenceServiceSpec, tiers: Sequence[TierPlan], gpus: Mapping[str, GpuSpec]
) -> DisaggregationPlan | None:
    """The split, or why there is none; None when the spec does not ask (mode off)."""
    wanted = spec.serving.disaggregation if spec.serving is not None else None
    if wanted is None or wanted.mode == "off":
        return None
    prices = {tier.name: tier.cost_per_gpu_hour for tier in spec.tiers}
    feasible = [tier for tier in tiers if tier.feasible and tier.performance is not None]
    candidates = [
        (prefill, decode)
        for prefill in feasible
        if _allowed(wanted.prefill_tiers, prefill)
        for decode in feasible
        if _allowed(wanted.decode_tiers, decode) and decode.name != prefill.name
    ]
    joinable = [(p, d) for p, d in candidates if incompatibility(p, d) is None]
    pairs = [pair for p, d in joinable if (pair := _pair(spec, p, d, gpus, prices)) is not None]
    if not pairs:
        return DisaggregationPlan(enabled=False, reasons=[_no_pair(candidates, joinable)])
    best = min(pairs, key=lambda pair: (pair.price, pair.transfer_ms))
    colocated = min(feasible, key=lambda tier: colocated_price(spec, tier, prices))
    pays, why = _verdict(spec, best, colocated, prices)
    enabled = pays or wanted.mode == "on"
    plan = DisaggregationPlan(
        enabled=enabled,
        prefill_tier=best.prefill.name,
        decode_tier=best.decode.name,
        prefill_replicas=best.prefill_replicas,
        decode_replicas=best.decode_replicas,
        ratio=best.ratio,
        transfer_ms=round(best.transfer_ms, 2) if math.isfinite(best.transfer_ms) else None,
        reasons=[
            _describe(spec, best),
            why if pays or not enabled else f"on as asked, though {why}",
        ],
    )
    return plan


def _describe(spec: InferenceServiceSpec, pair: Pair) -> str:
    workload = spec.workload
    mean_in = mean_tokens(workload.input_tokens.p50, workload.input_tokens.p95)
    mean_out = mean_tokens(workload.output_tokens.p50, workload.output_tokens.p95)
    context = mean_in + mean_out / 2
    decode_rate = decode_tokens_per_s(pair.decode, workload.slo.itl_p99_ms, context)
    moved = (
        f"{pair.transfer_ms:.1f} ms"
        if math.isfinite(pair.transfer_ms)
        else "an unknown time (no network figure)"
    )
    return (
        f"prefill on {pair.prefill.name} ({pair.prefill_replicas} replica(s), "
        f"{prefill_tokens_per_s(pair.prefill):,.0f} prompt tokens/s each), decode on {pair.decode.name} "
        f"({pair.decode_replicas} replica(s), {decode_rate:,.0f} output tokens/s each within the "
        f"{workload.slo.itl_p99_ms:g} ms ITL SLO): P:D {pair.ratio} in GPUs for mean prompts of "
        f"{mean_in:,.0f} and outputs of {mean_out:,.0f} tokens; a mean prompt's KV moves in {moved}"
    )


def _verdict(
    spec: InferenceServiceSpec, pair: Pair, colocated: TierPlan, prices: Mapping[str, float | None]
) -> tuple[bool, str]:
    workload = spec.workload
    mean_in = mean_tokens(workload.input_tokens.p50, workload.input_tokens.p95)
    together = colocated_price(spec, colocated, prices)
    unit = "$/h" if all(value is not None for value in prices.values()) else "GPU-hours/h"
    money = f"{pair.price:,.2f} {unit} against {together:,.2f} colocated on {colocated.name}"
    if mean_in < MIN_MEAN_PROMPT:
        return False, (
            f"does not pay: mean prompts of {mean_in:,.0f} tokens are below {MIN_MEAN_PROMPT:g}, where "
            f"chunked prefill on a colocated fleet removes as much interference ({money})"
        )
    if pair.transfer_ms > MAX_TRANSFER_SHARE * workload.slo.ttft_p99_ms:
        return False, (
            f"does not pay: the KV transfer takes more than {MAX_TRANSFER_SHARE:.0%} of the "
            f"{workload.slo.ttft_p99_ms:g} ms TTFT SLO ({money})"
        )
    if pair.price > (1 - MIN_SAVING) * together:
        return False, f"does not pay: it saves less than {MIN_SAVING:.0%} ({money})"
    return True, f"pays: {money}"
