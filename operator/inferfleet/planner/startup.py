"""A replica's start, twice: the first one on a node, and one with a warm compile cache (pure).

The first start (`fleet.cold_start_seconds`) reads the weights, initialises the engine,
compiles (torch.compile: Dynamo traces the model, Inductor compiles vLLM's graphs and
Triton its kernels) and captures CUDA graphs. With the node cache (`cache.mode: nvme`)
the engine's compile caches are kept beside the weights (caching/precache/compile_cache.py):
the first replica on a node compiles and its artifacts are published before it turns
Ready; a later replica on that node restores them before vLLM starts, so torch.compile's
work is replaced by Dynamo's trace again plus loading the artifacts. CUDA graphs are
captured again on every start (they are device memory, not files), and so is the rest.

Figures (estimates of typical vLLM start-up logs until the cluster measures its own):
- the first start's compile and capture are `fleet.COMPILE_S` + `fleet.CUDA_GRAPHS_S`
  (about 30 s together, the figure the planner has always used for both);
- a warm compile costs `COMPILE_WARM_S`, 9 s: vLLM PR #16848 logs, for Llama-3-8B with a
  populated cache, "Dynamo bytecode transform time: 5.03 s" and "Directly load the
  compiled graph(s) ... from the cache, took 4.190 s";
- public runs agree on the direction and show the saving can be larger than the 11 s
  taken here: an llm-d guide (guides/workload-autoscaling, Qwen3-32B TP2 on H100)
  persisting the compile cache saw pod-ready fall from 2 m 15 s to ~100 s, and another
  public report had engine init take 94.6 s of a 181 s Ready time. A smaller saving is
  the safe side: the warm figure shortens the front door's hold and the autoscaler's lead
  time, and promising a start faster than it is drops requests.

No saving is promised where the release keeps no torch.compile cache (`compileCache` in
the release table: before 0.7), where its engine does not compile by default (V0), with
`enforceEager` (nothing is compiled or captured) or for a release the table does not
know; the artifacts are still kept and the measured warm starts say what they buy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.planner import fleet
from inferfleet.planner.releases import Release

COMPILE_WARM_S: Final = 9.0
WARM_PREFIX: Final = "warm start ~"
LOADER_PREFIX: Final = "load format: "
# Variables that move the engine's caches away from where the node cache keeps them, or
# turn the compile cache off (vLLM's envs.py): with any of them in serving.env the node
# keeps nothing for the service.
CACHE_LOCATION_ENV: Final = frozenset(
    {"VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "VLLM_DISABLE_COMPILE_CACHE"}
)
# Loaders the planner never picks on its own: none has a start measured here, and the
# whole-file readers need packages an image may lack (vLLM imports them as placeholders).
UNPROVEN_LOADERS: Final = ("runai_streamer", "fastsafetensors", "instanttensor", "tensorizer")


@dataclass(frozen=True)
class CompileCacheUse:
    """Whether the node cache keeps this tier's compile caches, and if not, why."""

    kept: bool
    why_not: str = ""


def compile_cache_use(spec: InferenceServiceSpec, nodes_per_replica: int) -> CompileCacheUse:
    """The node cache keeps a tier's compile caches when its weights are on the node cache
    (cache.mode nvme, a source that is not a local path), a replica is one node, and
    serving.env leaves the engine's caches where the pod puts them."""
    cache = spec.cache
    mode = cache.mode if cache is not None else "nvme"
    source = spec.model.source or ""
    if mode != "nvme":
        return CompileCacheUse(False, f"cache.mode {mode}: no node cache to keep the compile caches in")
    if source.startswith("file://"):
        return CompileCacheUse(False, "the weights are a local path (file://): no node cache")
    if nodes_per_replica > 1:
        return CompileCacheUse(
            False, "a replica spans nodes: each node compiles its own ranks, and those caches are not kept"
        )
    serving = spec.serving
    moved = sorted(
        {entry.name for entry in (serving.env if serving is not None else None) or []} & CACHE_LOCATION_ENV
    )
    if moved:
        return CompileCacheUse(
            False,
            f"serving.env sets {', '.join(moved)}: the engine's caches are not where the node keeps them",
        )
    return CompileCacheUse(True)


@dataclass(frozen=True)
class Startup:
    """Seconds from a replica's start to Ready: first on its node, and with a warm compile
    cache (None: the node cache keeps none for this tier); why, in words."""

    first_s: float
    warm_s: float | None
    warm_reason: str


def _saving(release: Release, enforce_eager: bool, pipeline_parallel: int) -> tuple[float, str]:
    """Seconds a warm compile cache saves, and why that much."""
    if enforce_eager:
        return 0.0, "enforceEager: nothing is compiled or captured, so no saving is counted"
    facts = release.facts
    if facts is None or not facts.torch_compile_cache:
        return (
            0.0,
            f"vLLM {release.label} is not known to keep a torch.compile cache, so no saving is counted",
        )
    if release.engine(pipeline_parallel) != "v1":
        return 0.0, f"vLLM {release.label} runs the V0 engine, which does not compile by default"
    saving = fleet.COMPILE_S - COMPILE_WARM_S
    return saving, (
        f"torch.compile's ~{fleet.COMPILE_S:.0f} s replaced by ~{COMPILE_WARM_S:.0f} s of Dynamo's trace and "
        "loading the artifacts (vLLM PR #16848: 5.0 s + 4.2 s for Llama-3-8B); public runs saved more "
        "(an llm-d guide: pod-ready 2 m 15 s → ~100 s, Qwen3-32B TP2 on H100), the smaller figure is "
        "the safe one"
    )


def startup(
    spec: InferenceServiceSpec,
    release: Release,
    *,
    first_s: float,
    nodes_per_replica: int,
    pipeline_parallel: int,
    enforce_eager: bool,
) -> Startup:
    """The first start (given) and the start with a warm compile cache, with the reason."""
    use = compile_cache_use(spec, nodes_per_replica)
    if not use.kept:
        return Startup(first_s, None, f"{WARM_PREFIX}n/a: compile caches not kept: {use.why_not}")
    saving, why = _saving(release, enforce_eager, pipeline_parallel)
    warm_s = max(0.0, first_s - saving)
    return Startup(
        first_s,
        warm_s,
        f"{WARM_PREFIX}{warm_s:.0f} s with the node's compile cache: {why}; the first replica on each node "
        "compiles and publishes it (no GPU to pre-warm it with), and the front door's hold and the "
        "autoscaler's lead time use this figure only once every eligible node has shown it",
    )


def load_format_reason(release: Release, load_s: float, first_s: float, spec: InferenceServiceSpec) -> str:
    """Why the weights load with vLLM's default loader, naming the faster ones the release
    offers (read from its model loader registry) and why none is chosen."""
    cache = spec.cache
    mode = cache.mode if cache is not None else "nvme"
    source = spec.model.source or ""
    if mode == "none" and source.startswith(("s3://", "gs://")):
        return (
            f"{LOADER_PREFIX}runai_streamer: without a pre-cache vLLM streams safetensors from object storage"
        )
    facts = release.facts
    offered = [name for name in UNPROVEN_LOADERS if facts is not None and name in facts.load_formats]
    share = load_s / first_s if first_s > 0 else 0.0
    text = (
        f"{LOADER_PREFIX}vLLM's default (safetensors), reading ~{load_s:.1f} s "
        f"({share:.0%} of the first start)"
    )
    if offered:
        named = facts.release if facts is not None else release.label
        text += (
            f"; vLLM {named} also offers {', '.join(offered)}, not chosen: no start with them has been "
            "measured here, and fastsafetensors and instanttensor need packages an image may lack"
        )
    return text + "; serving.extraArgs --load-format overrides"
