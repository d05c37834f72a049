"""Plan one tier: quantization, parallel layout, engine settings, capacity, cost.

The order follows the field guide's sizing algorithm (shared/seeds/002 §9.1): quantize
first, then pick the lowest tensor-parallel degree that fits, pipeline stages across
nodes only when one node cannot hold the model, then batching settings, usable
throughput at the SLO, fleet size, cost.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from inferfleet.api.plan import MemoryBreakdownGiB, Performance, TierPlan
from inferfleet.api.spec import InferenceServiceSpec, TierOverrides, TierSpec
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.planner import engine, fleet
from inferfleet.planner.memory import MemoryEstimate, estimate
from inferfleet.planner.performance import Roofline, power_of_two_at_most, roofline
from inferfleet.planner.quantization import FORMAT_NAMES, QuantChoice, choices
from inferfleet.planner.units import GIB, to_gib
from inferfleet.planner.weights import WeightLayout, body_scale, weight_layout
from inferfleet.planner.workload import Workload, derive

# Most nodes one replica may span. Beyond a few nodes pipeline bubbles and inter-node
# hops dominate and one failing node takes a large replica down; such a model wants
# quantization or larger GPUs instead.
MAX_NODES_PER_REPLICA = 4
# Share of the ITL SLO the steady decode step may use; the rest absorbs the prefill
# chunks that chunked prefill mixes into some steps.
ITL_HEADROOM = 0.8
# Share of the ITL SLO one prefill chunk may take (sets max-num-batched-tokens).
CHUNK_SHARE_OF_ITL = 0.5
# A P95 prompt's prefill should take at most this share of the TTFT SLO (queueing
# takes the rest).
PREFILL_SHARE_OF_TTFT = 0.5
ONLINE_CHUNK_RANGE = (512, 8192)


@functools.lru_cache(maxsize=256)
def _scale(arch: ModelArch) -> float:
    return body_scale(arch)


@dataclass(frozen=True, slots=True)
class Settings:
    dtype: str
    act_bytes: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    enforce_eager: bool


@dataclass(frozen=True, slots=True)
class Candidate:
    quant: QuantChoice
    tp: int
    pp: int
    nodes: int
    layout: WeightLayout
    memory: MemoryEstimate
    settings: Settings
    concurrency_p95: float
    meets_target: bool

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


def valid_tensor_parallel(arch: ModelArch, tp: int) -> str | None:
    """Why vLLM would reject this TP degree for the model, or None."""
    if arch.num_attention_heads % tp:
        return f"{arch.num_attention_heads} attention heads are not divisible by TP={tp}"
    if arch.mla is None and arch.num_kv_heads % tp and tp % arch.num_kv_heads:
        return f"{arch.num_kv_heads} KV heads and TP={tp} do not divide one another"
    return None


def _tp_options(arch: ModelArch, gpus_per_node: int) -> list[int]:
    options: list[int] = []
    tp = 1
    while tp <= gpus_per_node:
        if valid_tensor_parallel(arch, tp) is None:
            options.append(tp)
        tp *= 2
    return options


class _Evaluator:
    """Evaluates (quantization, TP, PP) layouts for one tier with fixed settings."""

    def __init__(
        self, arch: ModelArch, gpu: GpuSpec, workload: Workload, settings: Settings, gpus_per_node: int
    ) -> None:
        self.arch = arch
        self.gpu = gpu
        self.workload = workload
        self.settings = settings
        self.gpus_per_node = gpus_per_node
        self.scale = _scale(arch)

    def evaluate(self, quant: QuantChoice, tp: int, pp: int, settings: Settings | None = None) -> Candidate:
        s = settings or self.settings
        layout = weight_layout(
            self.arch,
            weight_format=quant.weight_format,
            dtype_bytes=s.act_bytes,
            tp=tp,
            pp=pp,
            family=self.gpu.family,
            scale=self.scale,
        )
        kv_bytes = (
            1
            if quant.kv_cache_dtype == "fp8"
            else (2 if quant.kv_cache_dtype in ("bf16", "fp16") else s.act_bytes)
        )
        memory = estimate(
            self.arch,
            layout,
            tp=tp,
            total_memory_gib=self.gpu.memory_gib,
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_element_bytes=kv_bytes,
            act_bytes=s.act_bytes,
            block_size=s.block_size,
            max_model_len=s.max_model_len,
            max_num_seqs=s.max_num_seqs,
            max_num_batched_tokens=s.max_num_batched_tokens,
        )
        concurrency = memory.concurrency_at(self.workload.p95_context_tokens) if memory.starts else 0.0
        return Candidate(
            quant=quant,
            tp=tp,
            pp=pp,
            nodes=math.ceil(tp * pp / self.gpus_per_node),
            layout=layout,
            memory=memory,
            settings=s,
            concurrency_p95=concurrency,
            meets_target=memory.starts and concurrency >= self.workload.target_concurrency,
        )

    def search(self, quant: QuantChoice, overrides: TierOverrides) -> tuple[int, Candidate]:
        """(level, candidate): 0 one node meets the KV target, 1 one node starts,
        2 several nodes meet it, 3 several nodes start, 4 nothing starts."""
        tps = (
            [overrides.tensor_parallel_size]
            if overrides.tensor_parallel_size
            else _tp_options(self.arch, self.gpus_per_node)
        )
        if not tps:
            tps = [1]
        fixed_pp = overrides.pipeline_parallel_size
        single = [(tp, fixed_pp or 1) for tp in tps if tp * (fixed_pp or 1) <= self.gpus_per_node]
        starters: list[Candidate] = []
        last: Candidate | None = None
        for tp, pp in single:
            candidate = self.evaluate(quant, tp, pp)
            last = candidate
            if candidate.meets_target:
                return (0, candidate)
            if candidate.memory.starts:
                starters.append(candidate)
        if starters:
            # The widest layout that starts holds the most requests; more memory per GPU
            # can then only lower the TP this tier needs.
            return (1, max(starters, key=lambda c: (c.gpus, c.concurrency_p95)))
        if fixed_pp:
            multi = [(tp, fixed_pp) for tp in tps if tp * fixed_pp > self.gpus_per_node]
        else:
            widest = max(tps)
            stages = min(MAX_NODES_PER_REPLICA * self.gpus_per_node // widest, self.arch.num_layers)
            multi = [(widest, pp) for pp in range(2, stages + 1)]
        first_starter: Candidate | None = None
        for tp, pp in multi:
            candidate = self.evaluate(quant, tp, pp)
            last = candidate
            if candidate.meets_target:
                return (2, candidate)
            if candidate.memory.starts and first_starter is None:
                first_starter = candidate
                break
        if first_starter is not None:
            return (3, first_starter)
        assert last is not None
        return (4, last)


def _initial_settings(
    *,
    spec: InferenceServiceSpec,
    tier: TierSpec,
    arch: ModelArch,
    gpu: GpuSpec,
    workload: Workload,
    overrides: TierOverrides,
) -> tuple[Settings, list[str]]:
    notes: list[str] = []
    dtype, act_bytes, dtype_reason = engine.choose_dtype(arch, gpu, overrides)
    if dtype_reason:
        notes.append(dtype_reason)
    if overrides.block_size is not None:
        notes.append(f"block size {overrides.block_size}: set by the tier override")
    if overrides.enforce_eager is not None:
        notes.append(f"enforce-eager {str(overrides.enforce_eager).lower()}: set by the tier override")
    gmu, _ = engine.gpu_memory_utilization(workload, overrides)
    mml, _ = engine.max_model_len(workload, arch, overrides)
    seqs = overrides.max_num_seqs or workload.max_num_seqs_cap
    batched = overrides.max_num_batched_tokens or engine.vllm_default_batched_tokens(gpu)
    if (
        spec.serving is not None
        and not spec.serving.chunked_prefill
        and overrides.max_num_batched_tokens is None
    ):
        batched = max(batched, mml)  # without chunking a whole prompt must fit one step
    return (
        Settings(
            dtype=dtype,
            act_bytes=act_bytes,
            gpu_memory_utilization=gmu,
            max_model_len=mml,
            max_num_seqs=seqs,
            max_num_batched_tokens=batched,
            block_size=engine.block_size(arch, gpu, overrides),
            enforce_eager=bool(overrides.enforce_eager),
        ),
        notes,
    )


def _roofline(ev: _Evaluator, c: Candidate) -> Roofline:
    w = ev.workload
    return roofline(
        ev.arch,
        ev.gpu,
        c.layout,
        c.memory.binding.pool,
        weight_format=c.quant.weight_format,
        tp=c.tp,
        pp=c.pp,
        multi_node=c.nodes > 1,
        mean_context_tokens=w.mean_input_tokens + w.mean_output_tokens / 2,
        mean_prompt_tokens=w.mean_input_tokens,
        reference_batch=max(2, w.target_concurrency),
        enforce_eager=c.settings.enforce_eager,
    )


def _slo_ok(ev: _Evaluator, c: Candidate) -> bool:
    w = ev.workload
    roof = _roofline(ev, c)
    batch = min(w.target_concurrency, 16)
    itl_ok = roof.step_ms(batch) <= w.itl_slo_s * 1000 * ITL_HEADROOM
    ttft_ok = w.input_p95 / roof.prefill_tokens_per_second <= w.ttft_slo_s * PREFILL_SHARE_OF_TTFT
    return itl_ok and ttft_ok


def _raise_for_slo(
    ev: _Evaluator, chosen: Candidate, overrides: TierOverrides
) -> tuple[Candidate, str | None]:
    """A higher TP on fast links when the lowest fitting one cannot meet the latency SLO."""
    if overrides.tensor_parallel_size or not ev.workload.online or chosen.pp > 1 or _slo_ok(ev, chosen):
        return (chosen, None)
    widest: Candidate | None = None
    for tp in _tp_options(ev.arch, ev.gpus_per_node):
        if tp <= chosen.tp or not (ev.gpu.fast_link(tp) or tp <= 2):
            continue
        candidate = ev.evaluate(chosen.quant, tp, 1)
        if not candidate.memory.starts:
            continue
        if _slo_ok(ev, candidate):
            return (
                candidate,
                f"TP raised from {chosen.tp} to {tp}: at TP={chosen.tp} a decode step or a P95 "
                "prefill would break the latency SLO",
            )
        widest = candidate
    if widest is not None:
        # No degree meets the SLO: take the fastest the interconnect allows (a larger
        # model then never ends up on fewer GPUs than a smaller one).
        return (
            widest,
            f"TP raised from {chosen.tp} to {widest.tp}, the most this interconnect allows; the latency "
            "SLO stays at risk even there (consider a faster GPU or a looser SLO)",
        )
    return (chosen, None)


def _finalize_settings(
    ev: _Evaluator, c: Candidate, overrides: TierOverrides, chunked_prefill: bool
) -> tuple[Candidate, Roofline, list[str]]:
    """Trim max-num-seqs to the ITL SLO and size the prefill chunk, then re-measure."""
    w = ev.workload
    notes: list[str] = []
    roof = _roofline(ev, c)
    seqs = c.settings.max_num_seqs
    batched = c.settings.max_num_batched_tokens
    if overrides.max_num_seqs is not None:
        notes.append(f"max-num-seqs {seqs}: set by the tier override")
    elif w.online:
        within = roof.max_batch_within(w.itl_slo_s * 1000 * ITL_HEADROOM)
        fitted = min(w.max_num_seqs_cap, within)
        seqs = max(1, fitted - fitted % 8 if fitted >= 8 else fitted)
        if fitted < w.max_num_seqs_cap:
            notes.append(
                f"max-num-seqs {seqs}: the largest batch whose decode step (~{roof.step_ms(seqs):.0f} ms) "
                f"stays within {ITL_HEADROOM:.0%} of the {w.itl_slo_s * 1000:.0f} ms ITL SLO"
            )
        else:
            notes.append(
                f"max-num-seqs {seqs}: interactive batch cap for {w.archetype} "
                f"(decode step ~{roof.step_ms(seqs):.0f} ms at full batch, within the ITL SLO)"
            )
    else:
        notes.append(f"max-num-seqs {seqs}: offline batch cap; throughput first, preemption is acceptable")
    if overrides.max_num_batched_tokens is not None:
        notes.append(f"max-num-batched-tokens {batched}: set by the tier override")
    elif not chunked_prefill:
        batched = max(batched, c.settings.max_model_len)
        notes.append(
            f"max-num-batched-tokens {batched}: chunked prefill is off, so a whole prompt fits one step"
        )
    elif w.online:
        chunk = roof.prefill_tokens_per_second * w.itl_slo_s * CHUNK_SHARE_OF_ITL
        batched = max(power_of_two_at_most(chunk, *ONLINE_CHUNK_RANGE), seqs)
        chunk_ms = batched / roof.prefill_tokens_per_second * 1000
        within_share = chunk_ms <= w.itl_slo_s * 1000 * CHUNK_SHARE_OF_ITL
        notes.append(
            f"max-num-batched-tokens {batched}: a prefill chunk this size takes about {chunk_ms:.0f} ms"
            + (
                ", within half the ITL SLO"
                if within_share
                else f"; the planner's smallest chunk, yet over half the {w.itl_slo_s * 1000:.0f} ms "
                "ITL SLO, so steps carrying a chunk risk the SLO"
            )
        )
    else:
        batched = 16384 if ev.gpu.memory_gib >= engine.LARGE_GPU_GIB else 8192
        notes.append(f"max-num-batched-tokens {batched}: large prefill chunks for throughput (offline)")
    if seqs == c.settings.max_num_seqs and batched == c.settings.max_num_batched_tokens:
        return (c, roof, notes)
    settings = replace(c.settings, max_num_seqs=seqs, max_num_batched_tokens=batched)
    updated = ev.evaluate(c.quant, c.tp, c.pp, settings)
    if not updated.memory.starts and c.memory.starts:
        return (
            c,
            roof,
            [
                f"kept max-num-seqs {c.settings.max_num_seqs} and max-num-batched-tokens "
                f"{c.settings.max_num_batched_tokens}: the trimmed values would not start"
            ],
        )
    return (updated, _roofline(ev, updated), notes)


def _infeasible_reason(c: Candidate, gpu: GpuSpec, level: int, arch: ModelArch, gpus_per_node: int) -> str:
    m = c.memory
    b = m.binding
    settings = c.settings
    budget = gpu.memory_gib * settings.gpu_memory_utilization
    where = f"TP={c.tp} PP={c.pp}" + (f" over {c.nodes} nodes" if c.nodes > 1 else "")
    fmt = FORMAT_NAMES[c.quant.weight_format]
    overheads = b.activation_bytes + b.non_torch_bytes
    weights_total = sum(stage * c.tp for stage in c.layout.stage_bytes_per_gpu)
    per_node = gpus_per_node * max(1.0, budget * GIB - overheads)
    nodes_needed = math.ceil(weights_total / per_node)
    if c.nodes >= MAX_NODES_PER_REPLICA and nodes_needed >= MAX_NODES_PER_REPLICA:
        text = (
            f"{arch.parameters_billion:g}B at {fmt} ({to_gib(weights_total):.0f} GiB of weights) needs "
            f"more than {MAX_NODES_PER_REPLICA} {gpus_per_node}-GPU {gpu.name} nodes per replica, "
            "the most one replica may span"
        )
    elif b.kv_bytes <= 0:
        text = (
            f"does not fit: at {where} each GPU needs {to_gib(b.weights_bytes):.1f} GiB of weights ({fmt}) "
            f"+ {to_gib(b.activation_bytes):.1f} GiB activations "
            f"+ {to_gib(b.non_torch_bytes):.1f} GiB overhead, "
            f"more than its {budget:.1f} GiB budget ({settings.gpu_memory_utilization:g} × "
            f"{gpu.memory_gib:g} GiB)"
        )
        if nodes_needed > 1 and c.nodes == 1:
            text += f"; the weights alone need {nodes_needed} such nodes: exceeds one node"
    else:
        text = (
            f"does not start: at {where} the KV cache holds {m.kv_tokens:,} tokens, less than one request of "
            f"max-model-len {settings.max_model_len:,} (vLLM refuses to start)"
        )
    hints = []
    if c.quant.weight_format == "none":
        hints.append("enable fp8")
    if c.nodes == 1 and level == 4:
        hints.append("use PP across nodes")
    hints.append("use larger GPUs")
    if b.kv_bytes > 0:
        hints.append("lower maxModelLen")
    return f"infeasible: {text}; " + " or ".join(hints)


def _memory_reason(c: Candidate, workload: Workload) -> str:
    m = c.memory
    b = m.binding
    return (
        f"per GPU: weights {to_gib(b.weights_bytes):.2f} GiB, "
        f"activation peak {to_gib(b.activation_bytes):.2f} GiB, "
        f"non-torch {to_gib(b.non_torch_bytes):.2f} GiB, KV cache {to_gib(max(0.0, b.kv_bytes)):.2f} GiB → "
        f"{m.kv_tokens:,} KV tokens per replica ({m.max_concurrency:.2f}× max-model-len); "
        f"{c.concurrency_p95:.1f} requests of P95 context ({workload.p95_context_tokens:,} tokens) "
        "fit at once"
    )


def _layout_reason(
    *,
    c: Candidate,
    level: int,
    workload: Workload,
    overrides: TierOverrides,
    gpu: GpuSpec,
    gpus_per_node: int,
) -> str:
    where = f"TP={c.tp}, PP={c.pp}"
    if overrides.tensor_parallel_size or overrides.pipeline_parallel_size:
        text = f"{where}: set by the tier override"
    elif level == 0:
        text = (
            f"{where}: the lowest tensor-parallel degree whose KV cache holds the target of "
            f"{workload.target_concurrency} concurrent requests at P95 context"
        )
    elif level == 1:
        text = (
            f"{where}: no TP within one {gpus_per_node}-GPU node holds {workload.target_concurrency} "
            f"P95-context requests; the widest layout holds {c.concurrency_p95:.1f}, "
            "more replicas carry the rest"
        )
    elif level in (2, 3) and c.nodes > 1:
        text = (
            f"{where}: one {gpus_per_node}-GPU node cannot hold the model and its KV cache, so "
            f"{c.pp} pipeline stages span {c.nodes} nodes (multi-node serving via LeaderWorkerSet)"
        )
    elif level in (2, 3):
        text = f"{where}: TP={c.tp} alone cannot hold the model, so {c.pp} pipeline stages split its layers"
    else:
        text = f"{where}: closest layout tried"
    if c.tp > 2 and not gpu.fast_link(c.tp):
        text += f"; TP={c.tp} over PCIe costs ~25-38% of each step in all-reduce, taken only because it must"
    return text


def build_tier_plan(spec: InferenceServiceSpec, tier: TierSpec, arch: ModelArch, gpu: GpuSpec) -> TierPlan:
    overrides = tier.overrides or TierOverrides()
    workload = derive(spec, tier)
    gpus_per_node = tier.gpus_per_node or gpu.gpus_per_node
    if overrides.tensor_parallel_size is not None:
        problem = valid_tensor_parallel(arch, overrides.tensor_parallel_size)
        if problem:
            settings, _ = _initial_settings(
                spec=spec, tier=tier, arch=arch, gpu=gpu, workload=workload, overrides=overrides
            )
            return _unplannable(tier, gpu, settings, f"infeasible: overrides.tensorParallelSize: {problem}")
    settings, notes = _initial_settings(
        spec=spec, tier=tier, arch=arch, gpu=gpu, workload=workload, overrides=overrides
    )
    ev = _Evaluator(arch, gpu, workload, settings, gpus_per_node)
    # Each format gets its layout (SLO raise included) before formats are compared, so
    # the comparison sees the GPUs each would really take.
    results: list[tuple[int, int, int, Candidate, str | None]] = []
    for order, quant in enumerate(choices(spec, tier, arch, gpu)):
        level, candidate = ev.search(quant, overrides)
        note = None
        if level == 0:
            candidate, note = _raise_for_slo(ev, candidate, overrides)
        results.append((level, candidate.gpus, order, candidate, note))
    level, _, _, chosen, slo_note = min(results, key=lambda r: r[:3])
    chunked = spec.serving.chunked_prefill if spec.serving else True
    prefix = spec.serving.prefix_caching if spec.serving else True
    if level < 4:
        chosen, roof, batch_notes = _finalize_settings(ev, chosen, overrides, chunked)
    else:
        roof, batch_notes = _roofline(ev, chosen), []
    feasible = level < 4 and chosen.memory.starts
    s = chosen.settings
    m = chosen.memory
    headroom = (
        spec.scaling.headroom
        if spec.scaling and spec.scaling.headroom is not None
        else fleet.DEFAULT_HEADROOM
    )

    # Capacity at the SLO.
    concurrency_p95 = min(float(s.max_num_seqs), chosen.concurrency_p95)
    if workload.online:
        within = roof.max_batch_within(workload.itl_slo_s * 1000 * ITL_HEADROOM)
        running = max(1.0, min(float(s.max_num_seqs), math.floor(chosen.concurrency_p95), float(within)))
    else:
        mean_context = int(workload.mean_input_tokens + workload.mean_output_tokens)
        running = max(1.0, min(float(s.max_num_seqs), m.concurrency_at(mean_context) if feasible else 1.0))
    usable_rps = roof.requests_per_second(running, workload.mean_input_tokens, workload.mean_output_tokens)
    if not feasible:
        usable_rps = 0.0
    replicas = fleet.replicas_for_peak(workload.tier_peak_rps, usable_rps, headroom) if feasible else 0
    bandwidth, storage_text = fleet.storage_bandwidth_gbps(spec.cache)
    cold_start = fleet.cold_start_seconds(
        chosen.layout.checkpoint_bytes, chosen.nodes, bandwidth, s.enforce_eager
    )
    tokens_per_request = workload.mean_input_tokens + workload.mean_output_tokens
    cost = fleet.cost_per_million_tokens(tier.cost_per_gpu_hour, chosen.gpus, usable_rps, tokens_per_request)

    reasons: list[str] = []
    if not feasible:
        reasons.append(_infeasible_reason(chosen, gpu, level, arch, gpus_per_node))
    reasons.append(
        f"model {arch.name}: {arch.describe()}; GPU {gpu.name}: {gpu.memory_gib:g} GiB, "
        f"{gpu.bandwidth_t_bs:g} TB/s, {gpu.interconnect}" + (" (inline)" if gpu.inline else "")
    )
    reasons.append(chosen.quant.reason)
    reasons.append(chosen.quant.kv_reason)
    reasons.extend(notes)
    reasons.append(
        _layout_reason(
            c=chosen,
            level=level,
            workload=workload,
            overrides=overrides,
            gpu=gpu,
            gpus_per_node=gpus_per_node,
        )
    )
    if slo_note:
        reasons.append(slo_note)
    reasons.append(
        f"gpu-memory-utilization {s.gpu_memory_utilization:g}: "
        f"{engine.gpu_memory_utilization(workload, overrides)[1]}"
    )
    reasons.append(f"max-model-len {s.max_model_len:,}: {engine.max_model_len(workload, arch, overrides)[1]}")
    reasons.extend(batch_notes)
    reasons.append(
        f"prefix caching {'on' if prefix else 'off'}, chunked prefill {'on' if chunked else 'off'} "
        "(from spec.serving)"
    )
    reasons.append(_memory_reason(chosen, workload))
    if feasible:
        reasons.append(
            f"roofline: prefill ~{roof.prefill_tokens_per_second:,.0f} tokens/s, decode step "
            f"{roof.decode_step_base_ms:.1f} ms + {roof.decode_step_per_seq_ms:.3f} ms per sequence; at "
            f"{running:.0f} running requests a replica serves ~{usable_rps:.2f} req/s"
        )
        share = f" × {workload.tier_share:g} routed here" if workload.tier_share != 1 else ""
        reasons.append(
            f"replicas for peak: ceil({spec.workload.peak_requests_per_second:g} req/s{share} × "
            f"{1 + headroom:g} safety / {usable_rps:.2f}) = {replicas}"
            + (
                f", above maxReplicas {tier.max_replicas}"
                if tier.max_replicas is not None and replicas > tier.max_replicas
                else ""
            )
        )
    reasons.append(
        f"cold start ~{cold_start:.0f} s: {to_gib(chosen.layout.checkpoint_bytes):.1f} GiB of weights "
        f"from {storage_text}"
        + (f" split over {chosen.nodes} nodes" if chosen.nodes > 1 else "")
        + " plus engine start-up"
    )
    if cost is not None:
        reasons.append(
            f"cost ~${cost:.3f} per million tokens: {chosen.gpus} GPU(s) × ${tier.cost_per_gpu_hour:g}/h "
            f"at {usable_rps:.2f} req/s of ~{tokens_per_request:.0f} tokens"
        )

    b = m.binding
    return TierPlan(
        name=tier.name,
        gpu=gpu.name,
        feasible=feasible,
        tensor_parallel_size=chosen.tp,
        pipeline_parallel_size=chosen.pp,
        gpus_per_replica=chosen.gpus,
        nodes_per_replica=chosen.nodes,
        quantization=chosen.quant.weight_format,
        kv_cache_dtype=chosen.quant.kv_cache_dtype,
        dtype=s.dtype,
        gpu_memory_utilization=s.gpu_memory_utilization,
        max_model_len=s.max_model_len,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        block_size=s.block_size,
        enforce_eager=s.enforce_eager,
        prefix_caching=prefix,
        chunked_prefill=chunked,
        memory_gi_b=MemoryBreakdownGiB(
            weights=round(to_gib(b.weights_bytes), 3),
            activations=round(to_gib(b.activation_bytes), 3),
            overhead=round(to_gib(b.non_torch_bytes), 3),
            kv_cache=round(max(0.0, b.kv_bytes) / GIB, 3),
        ),
        kv_cache_tokens=m.kv_tokens,
        max_concurrency=round(m.max_concurrency, 2),
        concurrency_at_p95=round(concurrency_p95, 2),
        usable_rps=round(usable_rps, 3),
        replicas_for_peak=replicas,
        cold_start_seconds=round(cold_start, 1),
        cost_per_million_tokens_usd=round(cost, 4) if cost is not None else None,
        performance=Performance(
            prefill_tokens_per_second=round(roof.prefill_tokens_per_second, 1),
            decode_step_base_ms=round(roof.decode_step_base_ms, 3),
            decode_step_per_seq_ms=round(roof.decode_step_per_seq_ms, 4),
        ),
        reasons=reasons,
    )


def _unplannable(
    tier: TierSpec,
    gpu: GpuSpec | None,
    settings: Settings | None,
    reason: str,
    extra: list[str] | None = None,
) -> TierPlan:
    """A full TierPlan for a tier that cannot be planned at all (unknown model, unsupported GPU)."""
    overrides = tier.overrides or TierOverrides()
    tp = overrides.tensor_parallel_size or 1
    pp = overrides.pipeline_parallel_size or 1
    return TierPlan(
        name=tier.name,
        gpu=gpu.name if gpu is not None else (tier.gpu if isinstance(tier.gpu, str) else tier.gpu.name),
        feasible=False,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpus_per_replica=tp * pp,
        nodes_per_replica=1,
        quantization=overrides.quantization if overrides.quantization not in (None, "auto") else "none",
        kv_cache_dtype=overrides.kv_cache_dtype or "auto",
        dtype=settings.dtype if settings else (overrides.dtype or "auto"),
        gpu_memory_utilization=settings.gpu_memory_utilization
        if settings
        else (overrides.gpu_memory_utilization or engine.ONLINE_GPU_MEMORY_UTILIZATION),
        max_model_len=settings.max_model_len if settings else (overrides.max_model_len or 0),
        max_num_seqs=settings.max_num_seqs if settings else (overrides.max_num_seqs or 0),
        max_num_batched_tokens=settings.max_num_batched_tokens
        if settings
        else (overrides.max_num_batched_tokens or 0),
        block_size=overrides.block_size or 16,
        enforce_eager=bool(overrides.enforce_eager),
        memory_gi_b=MemoryBreakdownGiB(weights=0.0, activations=0.0, overhead=0.0, kv_cache=0.0),
        kv_cache_tokens=0,
        max_concurrency=0.0,
        concurrency_at_p95=0.0,
        usable_rps=0.0,
        replicas_for_peak=0,
        cold_start_seconds=0.0,
        cost_per_million_tokens_usd=None,
        performance=Performance(
            prefill_tokens_per_second=0.0, decode_step_base_ms=0.0, decode_step_per_seq_ms=0.0
        ),
        reasons=[reason, *(extra or [])],
    )


unplannable_tier = _unplannable
