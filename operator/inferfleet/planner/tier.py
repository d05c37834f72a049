"""Plan one tier: quantization, parallel layout, engine settings, capacity, cost.

The order is the usual sizing algorithm for vLLM (docs/concepts/planning.md): quantize
first, then pick the lowest tensor-parallel degree that fits, pipeline stages across
nodes only when one node cannot hold the model, then batching settings, usable
throughput at the SLO, fleet size, cost. Every layout is evaluated with the batch
settings it would deploy and the memory accounting of the vLLM release the tier runs,
and must also fit while its weights load.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from inferfleet.api.plan import MemoryBreakdownGiB, Performance, TierPlan
from inferfleet.api.spec import InferenceServiceSpec, TierOverrides, TierSpec
from inferfleet.api.vllm_flags import flag_name
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.planner import engine_settings, fleet
from inferfleet.planner import startup as startup_figures
from inferfleet.planner.accounting import WARMUP_MARGIN_GIB, Accounting, model_accounting
from inferfleet.planner.batching import ITL_HEADROOM, Batching, deployed_batching
from inferfleet.planner.kv import kv_dtype_bytes, kv_pool
from inferfleet.planner.load import NO_EXTRAS, Extras, load_peak_bytes, online_quantization
from inferfleet.planner.memory import MemoryEstimate, estimate
from inferfleet.planner.parallel import tp_options, valid_tensor_parallel
from inferfleet.planner.performance import Roofline, roofline
from inferfleet.planner.quantization import FORMAT_NAMES, QuantChoice, choices
from inferfleet.planner.releases import Release
from inferfleet.planner.units import GB, GIB, to_gib
from inferfleet.planner.weights import WeightLayout, body_scale, weight_layout
from inferfleet.planner.workload import TierWorkload, derive

# Most nodes one replica may span. Beyond a few nodes pipeline bubbles and inter-node
# hops dominate and one failing node takes a large replica down; such a model wants
# quantization or larger GPUs instead.
MAX_NODES_PER_REPLICA = 4
# A plan whose KV could be more than this share above what it says (the issue's ±10 %)
# says so in its memory reason.
TIGHT_FIT_SHARE = 0.10


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
    batching: Batching
    roof: Roofline
    accounting: Accounting
    concurrency_p95: float
    load_peak_bytes: float
    load_problem: str | None
    layout_problem: str | None

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def starts(self) -> bool:
        return (
            self.memory.starts
            and self.load_problem is None
            and self.layout_problem is None
            and self.quant.problem is None
        )

    def meets(self, target: int) -> bool:
        return self.starts and self.concurrency_p95 >= target


@dataclass(frozen=True, slots=True)
class TierInputs:
    """Everything a tier is planned from besides the spec."""

    arch: ModelArch
    gpu: GpuSpec
    release: Release
    extras: Extras = NO_EXTRAS
    # Pre-quantized checkpoints of the model: (format, name, architecture).
    pre_quantized: tuple[tuple[str, str, ModelArch], ...] = ()


class _Evaluator:
    """Evaluates (quantization, TP, PP) layouts of one tier, each with the batch settings
    it would deploy and its release's memory accounting."""

    def __init__(
        self,
        inputs: TierInputs,
        workload: TierWorkload,
        base: Settings,
        *,
        gpus_per_node: int,
        overrides: TierOverrides,
        chunked_prefill: bool,
        prefix_caching: bool = True,
        expert_parallel: bool = False,
    ) -> None:
        self.arch = inputs.arch
        self.expert_parallel = expert_parallel
        self.gpu = inputs.gpu
        self.release = inputs.release
        self.extras = inputs.extras
        self.workload = workload
        self.base = base
        self.gpus_per_node = gpus_per_node
        self.overrides = overrides
        self.chunked_prefill = chunked_prefill
        self.prefix_caching = prefix_caching
        self.scale = _scale(inputs.arch)
        self._seen: dict[tuple[str, str, int, int], Candidate] = {}
        # A layout that would run but cannot load (online quantization's 16-bit peak).
        self.refused_at_load = False

    def tp_options(self, quant: QuantChoice) -> list[int]:
        if self.overrides.tensor_parallel_size:
            return [self.overrides.tensor_parallel_size]
        return tp_options(
            self.arch, self.gpus_per_node, quant.weight_format, expert_parallel=self.expert_parallel
        ) or [1]

    def evaluate(self, quant: QuantChoice, tp: int, pp: int) -> Candidate:
        key = (quant.weight_format, quant.kv_cache_dtype, tp, pp)
        found = self._seen.get(key)
        if found is None:
            found = self._evaluate(quant, tp, pp)
            self._seen[key] = found
            if found.load_problem is not None:
                self.refused_at_load = True
        return found

    def _evaluate(self, quant: QuantChoice, tp: int, pp: int) -> Candidate:
        """One layout: its weights, KV pool, speed and batching, memory, load peak."""
        base = self.base
        nodes = math.ceil(tp * pp / self.gpus_per_node)
        layout = weight_layout(
            self.arch,
            weight_format=quant.weight_format,
            dtype_bytes=base.act_bytes,
            tp=tp,
            pp=pp,
            family=self.gpu.family,
            scale=self.scale,
        )
        acct = model_accounting(
            self.release,
            self.arch,
            weight_format=quant.weight_format,
            pipeline_parallel=pp,
            vendor=self.gpu.vendor,
        )
        kv_bytes = kv_dtype_bytes(quant.kv_cache_dtype, base.act_bytes)
        roof, batching = self._speed(quant, tp, pp, layout, acct, kv_bytes, nodes)
        settings = replace(
            base, max_num_seqs=batching.max_num_seqs, max_num_batched_tokens=batching.max_num_batched_tokens
        )
        extra = self.extras.weight_bytes(tp, base.act_bytes)
        memory = self._memory(tp, layout, acct, settings, kv_bytes, extra)
        load_peak, load_problem = self._load(quant, tp, pp, layout, extra)
        concurrency = memory.concurrency_at(self.workload.p95_context_tokens) if memory.starts else 0.0
        return Candidate(
            quant=quant,
            tp=tp,
            pp=pp,
            nodes=nodes,
            layout=layout,
            memory=memory,
            settings=settings,
            batching=batching,
            roof=roof,
            accounting=acct,
            concurrency_p95=concurrency,
            load_peak_bytes=load_peak,
            load_problem=load_problem,
            layout_problem=valid_tensor_parallel(
                self.arch, tp, quant.weight_format, expert_parallel=self.expert_parallel
            ),
        )

    def _speed(  # noqa: PLR0917 - one layout's figures, passed through from _evaluate
        self,
        quant: QuantChoice,
        tp: int,
        pp: int,
        layout: WeightLayout,
        acct: Accounting,
        kv_bytes: int,
        nodes: int,
    ) -> tuple[Roofline, Batching]:
        """The layout's roofline and the batch settings it would deploy."""
        arch, gpu, base, w = self.arch, self.gpu, self.base, self.workload
        geometry = kv_pool(
            arch, arch.kinds, tp, kv_bytes, base.block_size,
            hybrid=acct.hybrid_pool, mla_align_bytes=acct.mla_align_bytes,
            group_ratio=acct.group_larger_within_ratio,
        )  # fmt: skip
        roof = roofline(
            arch,
            gpu,
            layout,
            geometry,
            weight_format=quant.weight_format,
            tp=tp,
            pp=pp,
            multi_node=nodes > 1,
            mean_context_tokens=w.mean_input_tokens + w.mean_output_tokens / 2,
            mean_prompt_tokens=w.mean_input_tokens,
            reference_batch=max(2, w.target_concurrency),
            enforce_eager=base.enforce_eager,
        )
        batching = deployed_batching(
            roof,
            w,
            max_num_seqs_override=self.overrides.max_num_seqs,
            max_num_batched_tokens_override=self.overrides.max_num_batched_tokens,
            chunked_prefill=self.chunked_prefill,
            max_model_len=base.max_model_len,
            large_gpu=gpu.memory_gib >= engine_settings.LARGE_GPU_GIB,
        )
        return roof, batching

    def _memory(  # noqa: PLR0917 - one layout's figures, passed through from _evaluate
        self,
        tp: int,
        layout: WeightLayout,
        acct: Accounting,
        settings: Settings,
        kv_bytes: int,
        extra: float,
    ) -> MemoryEstimate:
        """What vLLM would report at startup for this layout and these settings."""
        return estimate(
            self.arch,
            layout,
            tp=tp,
            total_memory_gib=self.gpu.memory_gib,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            kv_element_bytes=kv_bytes,
            act_bytes=settings.act_bytes,
            block_size=settings.block_size,
            max_model_len=settings.max_model_len,
            max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            accounting=acct,
            enforce_eager=settings.enforce_eager,
            extra_weight_bytes=extra,
            extra_kv_layers=self.extras.draft_kv_layers,
        )

    def _load(
        self, quant: QuantChoice, tp: int, pp: int, layout: WeightLayout, extra: float
    ) -> tuple[float, str | None]:
        """(peak bytes per GPU while loading, why it does not fit or None)."""
        arch, gpu = self.arch, self.gpu
        load_peak = load_peak_bytes(
            arch,
            layout,
            weight_format=quant.weight_format,
            dtype_bytes=self.base.act_bytes,
            tp=tp,
            pp=pp,
            family=gpu.family,
            scale=self.scale,
            extra_bytes=extra,
        )
        if load_peak <= gpu.memory_gib * GIB:
            return load_peak, None
        what = (
            "the 16-bit checkpoint, loaded whole before online quantization"
            if online_quantization(arch, quant.weight_format)
            else "the weights"
        )
        return load_peak, (
            f"loading needs {to_gib(load_peak):.1f} GiB per GPU at TP={tp} PP={pp} ({what}), "
            f"more than the GPU's {gpu.memory_gib:g} GiB"
        )

    def search(self, quant: QuantChoice) -> tuple[int, Candidate]:
        """(level, candidate): 0 one node meets the KV target, 1 one node starts,
        2 several nodes meet it, 3 several nodes start, 4 nothing starts."""
        target = self.workload.target_concurrency
        tps = self.tp_options(quant)
        fixed_pp = self.overrides.pipeline_parallel_size
        single = [(tp, fixed_pp or 1) for tp in tps if tp * (fixed_pp or 1) <= self.gpus_per_node]
        starters: list[Candidate] = []
        last: Candidate | None = None
        for tp, pp in single:
            candidate = self.evaluate(quant, tp, pp)
            last = candidate
            if candidate.meets(target):
                return (0, candidate)
            if candidate.starts:
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
            if candidate.meets(target):
                return (2, candidate)
            if candidate.starts and first_starter is None:
                first_starter = candidate
                break
        if first_starter is not None:
            return (3, first_starter)
        if last is None:
            last = self.evaluate(quant, tps[0], fixed_pp or 1)
        return (4, last)


def _base_settings(
    *,
    spec: InferenceServiceSpec,
    arch: ModelArch,
    gpu: GpuSpec,
    workload: TierWorkload,
    overrides: TierOverrides,
) -> tuple[Settings, list[str]]:
    """Settings every layout shares; batch sizes are filled in per layout."""
    notes: list[str] = []
    dtype, act_bytes, dtype_reason = engine_settings.choose_dtype(arch, gpu, overrides)
    if dtype_reason:
        notes.append(dtype_reason)
    if overrides.block_size is not None:
        notes.append(f"block size {overrides.block_size}: set by the tier override")
    if overrides.enforce_eager is not None:
        notes.append(f"enforce-eager {str(overrides.enforce_eager).lower()}: set by the tier override")
    gmu, _ = engine_settings.gpu_memory_utilization(workload, overrides)
    mml, _ = engine_settings.max_model_len(workload, arch, overrides)
    return (
        Settings(
            dtype=dtype,
            act_bytes=act_bytes,
            gpu_memory_utilization=gmu,
            max_model_len=mml,
            max_num_seqs=overrides.max_num_seqs or workload.max_num_seqs_cap,
            max_num_batched_tokens=overrides.max_num_batched_tokens or mml,
            block_size=engine_settings.block_size(arch, gpu, overrides),
            enforce_eager=bool(overrides.enforce_eager),
        ),
        notes,
    )


def _capacity(c: Candidate, workload: TierWorkload) -> tuple[float, float]:
    """(running sequences, usable requests/s) of one replica of this layout as deployed."""
    s = c.settings
    roof = c.roof
    if workload.online:
        within = roof.max_batch_within(workload.itl_slo_s * 1000 * ITL_HEADROOM)
        running = max(1.0, min(float(s.max_num_seqs), math.floor(c.concurrency_p95), float(within)))
    else:
        mean_context = int(workload.mean_input_tokens + workload.mean_output_tokens)
        running = max(
            1.0, min(float(s.max_num_seqs), c.memory.concurrency_at(mean_context) if c.starts else 1.0)
        )
    rps = roof.requests_per_second(
        running, workload.mean_input_tokens, workload.mean_output_tokens, c.batching.prefill_tokens_per_s
    )
    return (running, rps)


# A wider layout is taken over the lowest that fits only when it serves this much more
# per GPU: wider replicas cost more in lost redundancy and scheduling granularity.
WIDER_GAIN_PER_GPU = 1.10


def _cheaper_wider(
    ev: _Evaluator, chosen: Candidate, overrides: TierOverrides
) -> tuple[Candidate, str | None]:
    """A wider TP (fast links, one node) when, with the settings each would deploy, it
    serves clearly more requests per GPU, e.g. because the narrow layout must cut its
    prefill chunks to small pieces to keep the ITL SLO."""
    if overrides.tensor_parallel_size or chosen.pp > 1:
        return (chosen, None)
    _, base_rps = _capacity(chosen, ev.workload)
    best, best_per_gpu = chosen, base_rps / chosen.gpus
    # The bar is the best per-GPU figure of every narrower layout that serves, not only
    # of the one kept: otherwise TP=4 could win against TP=1 by the margin while losing
    # to TP=2, and more memory (TP=1 fitting) would pick a wider layout than less.
    bar_per_gpu = best_per_gpu
    for tp in ev.tp_options(chosen.quant):
        if tp <= chosen.tp or not ev.gpu.fast_link(tp):
            continue
        candidate = ev.evaluate(chosen.quant, tp, 1)
        if not candidate.meets(ev.workload.target_concurrency) or not candidate.batching.meets_slo:
            continue
        _, rps = _capacity(candidate, ev.workload)
        if rps / candidate.gpus > bar_per_gpu * WIDER_GAIN_PER_GPU:
            best, best_per_gpu = candidate, rps / candidate.gpus
        bar_per_gpu = max(bar_per_gpu, rps / candidate.gpus)
    if best is chosen:
        return (chosen, None)
    return (
        best,
        f"TP={best.tp} rather than {chosen.tp}: with the settings each deploys it serves "
        f"{best_per_gpu:.2f} req/s per GPU against {base_rps / chosen.gpus:.2f} "
        f"(max-num-batched-tokens {best.settings.max_num_batched_tokens} against "
        f"{chosen.settings.max_num_batched_tokens})",
    )


def _raise_for_slo(
    ev: _Evaluator, chosen: Candidate, overrides: TierOverrides
) -> tuple[Candidate, str | None]:
    """A higher TP on fast links when the lowest fitting one cannot meet the latency SLO
    with the settings it would deploy."""
    if overrides.tensor_parallel_size or not ev.workload.online or chosen.pp > 1 or chosen.batching.meets_slo:
        return (chosen, None)
    widest: Candidate | None = None
    for tp in ev.tp_options(chosen.quant):
        if tp <= chosen.tp or not (ev.gpu.fast_link(tp) or tp <= 2):
            continue
        candidate = ev.evaluate(chosen.quant, tp, 1)
        if not candidate.starts:
            continue
        if candidate.batching.meets_slo:
            return (
                candidate,
                f"TP raised from {chosen.tp} to {tp}: at TP={chosen.tp} the latency SLO is out of reach "
                f"({chosen.batching.slo_misses[0]})",
            )
        widest = candidate
    if widest is not None:
        # No degree meets the SLO: take the fastest the interconnect allows (a larger
        # model then never ends up on fewer GPUs than a smaller one).
        return (
            widest,
            f"TP raised from {chosen.tp} to {widest.tp}, the most this interconnect allows; the latency "
            "SLO stays out of reach even there (see the warnings)",
        )
    return (chosen, None)


def _infeasible_reason(c: Candidate, gpu: GpuSpec, level: int, arch: ModelArch, gpus_per_node: int) -> str:
    if c.quant.problem is not None:
        return f"infeasible: {c.quant.problem}"
    if c.layout_problem is not None:
        return f"infeasible: TP={c.tp}: {c.layout_problem}"
    m = c.memory
    b = m.binding
    settings = c.settings
    budget = gpu.memory_gib * settings.gpu_memory_utilization
    where = f"TP={c.tp} PP={c.pp}" + (f" over {c.nodes} nodes" if c.nodes > 1 else "")
    fmt = FORMAT_NAMES[c.quant.weight_format]
    overheads = b.activation_bytes + b.non_torch_bytes + b.graph_reserve_bytes + b.reserve_bytes
    weights_total = sum(stage * c.tp for stage in c.layout.stage_bytes_per_gpu)
    per_node = gpus_per_node * max(1.0, budget * GIB - overheads)
    nodes_needed = math.ceil(weights_total / per_node)
    if c.nodes >= MAX_NODES_PER_REPLICA and nodes_needed >= MAX_NODES_PER_REPLICA:
        text = (
            f"{arch.parameters_billion:g}B at {fmt} ({to_gib(weights_total):.0f} GiB of weights) needs "
            f"more than {MAX_NODES_PER_REPLICA} {gpus_per_node}-GPU {gpu.name} nodes per replica, "
            "the most one replica may span"
        )
    elif c.load_problem is not None:
        text = c.load_problem
    elif b.kv_bytes <= 0:
        text = (
            f"does not fit: at {where} each GPU needs {to_gib(b.weights_bytes):.1f} GiB of weights ({fmt}) "
            f"+ {to_gib(b.activation_bytes):.1f} GiB activations "
            f"+ {to_gib(b.non_torch_bytes + b.graph_reserve_bytes + b.reserve_bytes):.1f} GiB overhead, "
            f"more than its {budget:.1f} GiB budget ({settings.gpu_memory_utilization:g} × "
            f"{gpu.memory_gib:g} GiB)"
        )
        if nodes_needed > 1 and c.nodes == 1:
            text += f"; the weights alone need {nodes_needed} such nodes: exceeds one node"
    elif m.warmup.fails and b.kv_bytes > 0 and m.max_concurrency >= 1.0:
        text = f"does not start: at {where} " + warmup_text(c, gpu)
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
    if b.kv_bytes > 0 and c.load_problem is None:
        hints.append("lower maxModelLen")
    return f"infeasible: {text}; " + " or ".join(hints)


def warmup_text(c: Candidate, gpu: GpuSpec) -> str:
    """The post-KV warm-up against what the budget leaves, with the settings that fit."""
    w = c.memory.warmup
    s = c.settings
    parts = [f"CUDA context and vLLM's buffer {to_gib(w.fixed_bytes):.2f} GiB"]
    if w.graphs_bytes:
        parts.append(
            f"CUDA graphs ~{to_gib(w.graphs_bytes):.2f} GiB (captured after the KV cache, outside the budget)"
        )
    if w.sampler_bytes:
        parts.append(
            f"the sampler warm-up {w.sampler_bytes / 2**20:,.0f} MiB ({w.rows} rows × {w.vocab_size:,} "
            "vocabulary × 16 B: fp32 logits + sort)"
        )
    need = w.fixed_bytes + w.graphs_bytes + w.sampler_bytes + WARMUP_MARGIN_GIB * GIB
    utilization = math.floor((1 - need / (gpu.memory_gib * GIB)) * 100) / 100
    per_row = w.sampler_bytes / w.rows if w.rows and w.sampler_bytes else 0.0
    room = w.outside_bytes - w.fixed_bytes - w.graphs_bytes - WARMUP_MARGIN_GIB * GIB
    fixes = [f"gpu-memory-utilization ≤ {utilization:.2f}"]
    if per_row and room > 0:
        fixes.append(f"max-num-seqs ≤ {max(1, int(room // per_row))}")
    return (
        f"after the KV cache is sized, vLLM needs {to_gib(need - WARMUP_MARGIN_GIB * GIB):.2f} GiB "
        "outside its budget: " + " + ".join(parts) + f"; gpu-memory-utilization "
        f"{s.gpu_memory_utilization:g} leaves {to_gib(w.outside_bytes):.2f} GiB of {gpu.memory_gib:g} GiB "
        f"({to_gib(w.leftover_bytes):+.2f} GiB spare, {WARMUP_MARGIN_GIB:g} GiB wanted for allocator "
        "fragmentation); starts OOM there (llm-d/llm-d#787, vLLM #15105): set " + " or ".join(fixes)
    )


def _memory_reason(c: Candidate, workload: TierWorkload) -> str:
    m = c.memory
    b = m.binding
    extra = ""
    if b.graph_reserve_bytes:
        extra += f", CUDA-graph reserve {to_gib(b.graph_reserve_bytes):.2f} GiB"
    if b.reserve_bytes:
        extra += f", unmodelled-release reserve {to_gib(b.reserve_bytes):.2f} GiB"
    tight = ""
    if m.sampler_spread_bytes > TIGHT_FIT_SHARE * max(b.kv_bytes, 0.0):
        # Tight fits (weights near the budget): the sampler's share of the activation
        # peak is planned at the sort path's 39 B/logit; a FlashInfer sampler holds ~12 B
        # (planner.accounting), so vLLM may report more KV, never less, than planned here.
        tight = (
            f"; tight fit: the KV cache is planned on the safe side, the activation peak counts "
            f"the sampler's sort path, and where the image samples with FlashInfer vLLM reports "
            f"up to {to_gib(m.sampler_spread_bytes):.2f} GiB more KV per GPU"
        )
    return (
        f"per GPU: weights {to_gib(b.weights_bytes):.2f} GiB, "
        f"activation peak {to_gib(b.activation_bytes):.2f} GiB, "
        f"non-torch {to_gib(b.non_torch_bytes):.2f} GiB{extra}, "
        f"KV cache {to_gib(max(0.0, b.kv_bytes)):.2f} GiB → "
        f"{m.kv_tokens:,} KV tokens per replica ({m.max_concurrency:.2f}× max-model-len); "
        f"{c.concurrency_p95:.1f} requests of P95 context ({workload.p95_context_tokens:,} tokens) "
        "fit at once" + tight
    )


def _load_reason(c: Candidate, gpu: GpuSpec, arch: ModelArch) -> str:
    peak = to_gib(c.load_peak_bytes)
    if online_quantization(arch, c.quant.weight_format):
        return (
            f"load peak {peak:.1f} GiB per GPU: {FORMAT_NAMES[c.quant.weight_format]} is applied online, "
            f"so vLLM loads the 16-bit checkpoint whole first (fits the {gpu.memory_gib:g} GiB GPU)"
        )
    return (
        f"load peak {peak:.1f} GiB per GPU (weights as stored, CUDA context): "
        f"fits the {gpu.memory_gib:g} GiB GPU"
    )


def _pre_quantized_note(
    spec: InferenceServiceSpec,
    tier: TierSpec,
    inputs: TierInputs,
    chosen: Candidate,
    *,
    feasible: bool,
    refused_at_load: bool,
) -> str | None:
    """Names a pre-quantized checkpoint when online quantization's 16-bit load forced a
    larger layout (or no layout), with the layout that checkpoint would take."""
    arch = inputs.arch
    if not inputs.pre_quantized or not refused_at_load:
        return None
    refused_at_load = not feasible and chosen.load_problem is not None
    online = online_quantization(arch, chosen.quant.weight_format) or refused_at_load
    if not online:
        return None
    for fmt, name, other in inputs.pre_quantized:
        if fmt != chosen.quant.weight_format and not refused_at_load:
            continue
        alternative = build_tier_plan(
            spec, tier, TierInputs(arch=other, gpu=inputs.gpu, release=inputs.release, extras=inputs.extras)
        )
        if not alternative.feasible:
            continue
        cheaper = alternative.gpus_per_replica < chosen.gpus or not feasible
        if not cheaper:
            return None
        return (
            f"pre-quantized checkpoint {name} ({FORMAT_NAMES.get(fmt, fmt)}) loads without the 16-bit peak: "
            f"it plans as TP={alternative.tensor_parallel_size} PP={alternative.pipeline_parallel_size} "
            f"({alternative.gpus_per_replica} GPU(s) per replica"
            + (f", {alternative.nodes_per_replica} nodes" if alternative.nodes_per_replica > 1 else "")
            + f"); set spec.model.name to {name} to serve it"
        )
    return None


def _layout_reason(
    *,
    c: Candidate,
    level: int,
    workload: TierWorkload,
    overrides: TierOverrides,
    gpu: GpuSpec,
    gpus_per_node: int,
) -> str:
    where = f"TP={c.tp}, PP={c.pp}"
    if overrides.tensor_parallel_size or overrides.pipeline_parallel_size:
        text = f"{where}: set by the tier override"
    elif level == 0:
        text = (
            f"{where}: its KV cache holds the target of {workload.target_concurrency} concurrent "
            "requests at P95 context"
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


@dataclass(frozen=True)
class Choice:
    """The layout a tier gets: the search level it was found at (0 best, 4 nothing
    starts), the candidate, and the note of an SLO raise or a cheaper wider layout."""

    level: int
    candidate: Candidate
    slo_note: str | None

    @property
    def feasible(self) -> bool:
        return self.level < 4 and self.candidate.starts


@dataclass(frozen=True)
class Sizing:
    """One replica's capacity at the SLO and what the fleet for the peak costs."""

    headroom: float
    concurrency_p95: float
    running: float
    usable_rps: float
    replicas: int
    cold_start_s: float
    storage_text: str
    tokens_per_request: float
    cost_per_million_tokens: float | None
    # The start with a warm compile cache, and how the weights load (planner.startup).
    startup: startup_figures.Startup | None = None
    loader_reason: str = ""


def choose_layout(
    spec: InferenceServiceSpec, tier: TierSpec, ev: _Evaluator, overrides: TierOverrides
) -> Choice:
    """The best layout over every weight format. Each format gets its layout (SLO raise
    included) before formats are compared, so the comparison sees the GPUs each would
    really take."""
    results: list[tuple[int, int, int, Candidate, str | None]] = []
    for order, quant in enumerate(choices(spec, tier, ev.arch, ev.gpu)):
        level, candidate = ev.search(quant)
        note = None
        if level == 0:
            candidate, note = _raise_for_slo(ev, candidate, overrides)
            if note is None:
                candidate, note = _cheaper_wider(ev, candidate, overrides)
        results.append((level, candidate.gpus, order, candidate, note))
    level, _, _, chosen, slo_note = min(results, key=lambda r: r[:3])
    return Choice(level, chosen, slo_note)


def size_fleet(
    spec: InferenceServiceSpec, tier: TierSpec, choice: Choice, workload: TierWorkload, release: Release
) -> Sizing:
    """Capacity at the SLO (with the prefill rate the chosen chunk leaves), replicas for
    the peak, cold start (first, and with a warm compile cache) and cost."""
    chosen = choice.candidate
    headroom = (
        spec.scaling.headroom
        if spec.scaling and spec.scaling.headroom is not None
        else fleet.DEFAULT_HEADROOM
    )
    running, usable_rps = _capacity(chosen, workload)
    if not choice.feasible:
        usable_rps = 0.0
    replicas = fleet.replicas_for_peak(workload.tier_peak_rps, usable_rps, headroom) if choice.feasible else 0
    bandwidth, storage_text = fleet.storage_bandwidth_gbps(spec.cache)
    cold_start = fleet.cold_start_seconds(
        chosen.layout.checkpoint_bytes, chosen.nodes, bandwidth, chosen.settings.enforce_eager
    )
    starts = startup_figures.startup(
        spec,
        release,
        first_s=cold_start,
        nodes_per_replica=chosen.nodes,
        pipeline_parallel=chosen.pp,
        enforce_eager=chosen.settings.enforce_eager,
    )
    load_s = chosen.layout.checkpoint_bytes / max(1, chosen.nodes) / (bandwidth * GB)
    tokens_per_request = workload.mean_input_tokens + workload.mean_output_tokens
    cost = fleet.cost_per_million_tokens(tier.cost_per_gpu_hour, chosen.gpus, usable_rps, tokens_per_request)
    return Sizing(
        headroom=headroom,
        concurrency_p95=min(float(chosen.settings.max_num_seqs), chosen.concurrency_p95),
        running=running,
        usable_rps=usable_rps,
        replicas=replicas,
        cold_start_s=cold_start,
        storage_text=storage_text,
        tokens_per_request=tokens_per_request,
        cost_per_million_tokens=cost,
        startup=starts,
        loader_reason=startup_figures.load_format_reason(release, load_s, cold_start, spec),
    )


def setup_reasons(
    spec: InferenceServiceSpec,
    tier: TierSpec,
    inputs: TierInputs,
    *,
    ev: _Evaluator,
    choice: Choice,
    notes: list[str],
) -> list[str]:
    """Why this model, release, format, layout and engine settings, in words."""
    arch, gpu, release = inputs.arch, inputs.gpu, inputs.release
    chosen, workload, overrides = choice.candidate, ev.workload, ev.overrides
    s = chosen.settings
    reasons: list[str] = []
    if not choice.feasible:
        reasons.append(_infeasible_reason(chosen, gpu, choice.level, arch, ev.gpus_per_node))
    reasons.append(
        f"model {arch.name}: {arch.describe()}; GPU {gpu.name}: {gpu.memory_gib:g} GiB, "
        f"{gpu.bandwidth_t_bs:g} TB/s, {gpu.interconnect}" + (" (inline)" if gpu.inline else "")
    )
    reasons.append(f"memory modelled for {release.describe()}; {chosen.accounting.engine.upper()} engine")
    reasons.append(chosen.quant.reason)
    reasons.append(chosen.quant.kv_reason)
    reasons.extend(notes)
    reasons.append(
        _layout_reason(
            c=chosen,
            level=choice.level,
            workload=workload,
            overrides=overrides,
            gpu=gpu,
            gpus_per_node=ev.gpus_per_node,
        )
    )
    if choice.slo_note:
        reasons.append(choice.slo_note)
    pre_quantized = _pre_quantized_note(
        spec, tier, inputs, chosen, feasible=choice.feasible, refused_at_load=ev.refused_at_load
    )
    if pre_quantized:
        reasons.append(pre_quantized)
    if choice.feasible:
        reasons.append(_load_reason(chosen, gpu, arch))
    if inputs.extras.draft_note:
        reasons.append(f"speculative decoding: {inputs.extras.draft_note}")
    if inputs.extras.lora_adapters:
        reasons.append(
            f"LoRA: {inputs.extras.lora_adapters} adapter slot(s) of rank {inputs.extras.lora_rank} "
            "preallocated with the weights"
        )
    reasons.append(
        f"gpu-memory-utilization {s.gpu_memory_utilization:g}: "
        f"{engine_settings.gpu_memory_utilization(workload, overrides)[1]}"
    )
    mml_reason = engine_settings.max_model_len(workload, arch, overrides)[1]
    reasons.append(f"max-model-len {s.max_model_len:,}: {mml_reason}")
    reasons.extend(chosen.batching.notes)
    reasons.append(
        f"prefix caching {'on' if ev.prefix_caching else 'off'}, chunked prefill "
        f"{'on' if ev.chunked_prefill else 'off'} (from spec.serving)"
    )
    reasons.append(_memory_reason(chosen, workload))
    return reasons


def capacity_reasons(  # noqa: PLR0917 - the tier's figures, passed through from build_tier_plan
    spec: InferenceServiceSpec,
    tier: TierSpec,
    choice: Choice,
    sizing: Sizing,
    workload: TierWorkload,
    tier_gpu: GpuSpec,
) -> tuple[list[str], list[str]]:
    """(reasons, warnings) on throughput, replicas, cold start, cost, the SLOs and a
    start the warm-up after KV sizing puts at risk."""
    chosen = choice.candidate
    roof = chosen.roof
    reasons: list[str] = []
    warnings: list[str] = list(chosen.batching.slo_misses) if choice.feasible else []
    if choice.feasible and chosen.memory.warmup.at_risk:
        warnings.append("start at risk: " + warmup_text(chosen, tier_gpu))
    if choice.feasible:
        reasons.append(
            f"roofline: prefill ~{roof.prefill_tokens_per_second:,.0f} tokens/s "
            f"(~{chosen.batching.prefill_tokens_per_s:,.0f} with the chosen chunk), decode step "
            f"{roof.decode_step_base_ms:.1f} ms + {roof.decode_step_per_seq_ms:.3f} ms per sequence; at "
            f"{sizing.running:.0f} running requests a replica serves ~{sizing.usable_rps:.2f} req/s"
        )
        share = f" × {workload.tier_share:g} routed here" if workload.tier_share != 1 else ""
        reasons.append(
            f"replicas for peak: ceil({spec.workload.peak_requests_per_second:g} req/s{share} × "
            f"{1 + sizing.headroom:g} safety / {sizing.usable_rps:.2f}) = {sizing.replicas}"
            + (
                f", above maxReplicas {tier.max_replicas}"
                if tier.max_replicas is not None and sizing.replicas > tier.max_replicas
                else ""
            )
        )
    reasons.append(
        f"cold start ~{sizing.cold_start_s:.0f} s: "
        f"{to_gib(chosen.layout.checkpoint_bytes):.1f} GiB of weights "
        f"from {sizing.storage_text}"
        + (f" split over {chosen.nodes} nodes" if chosen.nodes > 1 else "")
        + " plus engine start-up"
    )
    if sizing.startup is not None:
        reasons.append(sizing.startup.warm_reason)
    if sizing.loader_reason:
        reasons.append(sizing.loader_reason)
    cost = sizing.cost_per_million_tokens
    if cost is not None:
        reasons.append(
            f"cost ~${cost:.3f} per million tokens: {chosen.gpus} GPU(s) × ${tier.cost_per_gpu_hour:g}/h "
            f"at {sizing.usable_rps:.2f} req/s of ~{sizing.tokens_per_request:.0f} tokens"
        )
    for warning in warnings:
        reasons.append(f"SLO at risk: {warning}")
    return reasons, warnings


def assemble_tier_plan(
    tier: TierSpec,
    inputs: TierInputs,
    ev: _Evaluator,
    *,
    choice: Choice,
    sizing: Sizing,
    reasons: list[str],
    warnings: list[str],
) -> TierPlan:
    """The wire shape of the chosen layout and its sizing."""
    chosen = choice.candidate
    s, m, roof, b = chosen.settings, chosen.memory, chosen.roof, chosen.memory.binding
    cost = sizing.cost_per_million_tokens
    return TierPlan(
        name=tier.name,
        gpu=inputs.gpu.name,
        feasible=choice.feasible,
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
        prefix_caching=ev.prefix_caching,
        chunked_prefill=ev.chunked_prefill,
        memory_gi_b=MemoryBreakdownGiB(
            weights=round(to_gib(b.weights_bytes), 3),
            activations=round(to_gib(b.activation_bytes), 3),
            overhead=round(to_gib(b.non_torch_bytes), 3),
            kv_cache=round(max(0.0, b.kv_bytes) / GIB, 3),
            cuda_graphs=round(to_gib(b.graph_reserve_bytes), 3),
            reserve=round(to_gib(b.reserve_bytes), 3),
        ),
        kv_cache_tokens=m.kv_tokens,
        max_concurrency=round(m.max_concurrency, 2),
        concurrency_at_p95=round(sizing.concurrency_p95, 2),
        usable_rps=round(sizing.usable_rps, 3),
        replicas_for_peak=sizing.replicas,
        cold_start_seconds=round(sizing.cold_start_s, 1),
        first_start_seconds=round(sizing.cold_start_s, 1),
        warm_start_seconds=round(sizing.startup.warm_s, 1)
        if sizing.startup is not None and sizing.startup.warm_s is not None
        else None,
        cost_per_million_tokens_usd=round(cost, 4) if cost is not None else None,
        performance=Performance(
            prefill_tokens_per_second=round(roof.prefill_tokens_per_second, 1),
            decode_step_base_ms=round(roof.decode_step_base_ms, 3),
            decode_step_per_seq_ms=round(roof.decode_step_per_seq_ms, 4),
        ),
        vllm_release=inputs.release.label,
        release_family=inputs.release.family,
        num_gpu_blocks=m.num_blocks,
        load_peak_gi_b=round(to_gib(chosen.load_peak_bytes), 3),
        warnings=warnings,
        reasons=reasons,
    )


def expert_parallel_requested(spec: InferenceServiceSpec) -> bool:
    """serving.extraArgs turns vLLM's expert parallelism on (--enable-expert-parallel)."""
    enabled = False
    for arg in (spec.serving.extra_args if spec.serving else None) or []:
        name = flag_name(arg)
        if name == "--enable-expert-parallel":
            value = arg.split("=", 1)[1].strip().lower() if "=" in arg else "true"
            enabled = value not in ("false", "0", "no")
        elif name == "--no-enable-expert-parallel":
            enabled = False
    return enabled


def build_tier_plan(spec: InferenceServiceSpec, tier: TierSpec, inputs: TierInputs) -> TierPlan:
    """Plan one tier: choose the layout, size the fleet, explain both, assemble."""
    overrides = tier.overrides or TierOverrides()
    workload = derive(spec, tier)
    gpus_per_node = tier.gpus_per_node or inputs.gpu.gpus_per_node
    settings, notes = _base_settings(
        spec=spec, arch=inputs.arch, gpu=inputs.gpu, workload=workload, overrides=overrides
    )
    chunked = spec.serving.chunked_prefill if spec.serving else True
    prefix = spec.serving.prefix_caching if spec.serving else True
    ev = _Evaluator(
        inputs,
        workload,
        settings,
        gpus_per_node=gpus_per_node,
        overrides=overrides,
        chunked_prefill=chunked,
        prefix_caching=prefix,
        expert_parallel=expert_parallel_requested(spec),
    )
    choice = choose_layout(spec, tier, ev, overrides)
    sizing = size_fleet(spec, tier, choice, workload, inputs.release)
    reasons = setup_reasons(spec, tier, inputs, ev=ev, choice=choice, notes=notes)
    more_reasons, warnings = capacity_reasons(spec, tier, choice, sizing, workload, inputs.gpu)
    return assemble_tier_plan(
        tier, inputs, ev, choice=choice, sizing=sizing, reasons=[*reasons, *more_reasons], warnings=warnings
    )


def _unplannable(
    tier: TierSpec,
    gpu: GpuSpec | None,
    settings: Settings | None,
    reason: str,
    extra: list[str] | None = None,
    *,
    release: Release | None = None,
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
        else (overrides.gpu_memory_utilization or engine_settings.ONLINE_GPU_MEMORY_UTILIZATION),
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
        vllm_release=release.label if release else "unknown",
        release_family=release.family if release else "",
        reasons=[reason, *(extra or [])],
    )


unplannable_tier = _unplannable
