"""What each vLLM release does at startup, as read from its own source (pure).

`catalog/data/vllm_releases.json` is written by `hack/vllm_releases.py` from each
release's sdist (or wheel) on PyPI; every fact there names the file (and line) it was
read from. Nothing is fetched at run time. `release_facts("0.33.0")` gives the typed facts
of that release, or of the nearest release in the table (same minor series first, else
the closest older one; `exact` says so).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

EntryPoint = Literal["api_server", "llm_class"]

# Device classes the generator walks each release's default-picking function with
# (hack/vllm_releases.py DEVICES): (class, memory in GiB as vLLM logs it).
DEVICE_CLASSES: tuple[tuple[str, float], ...] = (
    ("B200", 178.4),
    ("H200", 139.8),
    ("H100", 79.18),
    ("A100-80GB", 79.15),
    ("A100-40GB", 39.39),
    ("L40S", 44.39),
    ("L4", 22.05),
    ("MI300X", 191.45),
)
_NAMED_CLASSES = (
    ("b200", "B200"),
    ("b300", "B200"),
    ("h200", "H200"),
    ("h100", "H100"),
    ("h800", "H100"),
    ("gh200", "H100"),
    ("l40", "L40S"),
    ("mi3", "MI300X"),
)


def device_class(gpu_name: str, memory_gib: float) -> str:
    """The generator's device class a GPU is decided like: by name where the releases
    name-check (A100), else by total memory (the releases' thresholds are in GiB)."""
    lowered = gpu_name.lower()
    if "a100" in lowered:
        return "A100-80GB" if memory_gib >= 70 else "A100-40GB"
    for needle, label in _NAMED_CLASSES:
        if needle in lowered:
            return label
    if lowered in ("l4", "nvidia-l4") or lowered.startswith("l4-"):
        return "L4"
    # An unlisted GPU: the non-A100 class with the most memory not above its own.
    fitting = [
        (mem, label) for label, mem in DEVICE_CLASSES if "A100" not in label and mem <= memory_gib + 0.5
    ]
    return max(fitting)[1] if fitting else "L4"


@dataclass(frozen=True, slots=True)
class BatchDefault:
    max_num_seqs: int | None
    max_num_batched_tokens: int | None


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    """One release's startup behaviour; `source` cites where each group came from."""

    release: str
    exact: bool  # False: the facts are the closest older tabled release's
    gpu_memory_utilization: float | None
    batch_by_device: tuple[tuple[str, EntryPoint, BatchDefault], ...]  # empty: one default for all
    max_num_seqs_default: int | None
    sampler_warmup_after_kv: bool
    model_runner_v2_default: bool
    v2_profile_pays_fp32_logits: bool
    graph_estimated_before_kv: bool
    graph_capture_cap: int | None  # the largest captured batch's cap (non-Blackwell)
    hybrid_pages: bool
    chunked_local_pages: bool
    group_larger_within_ratio: float | None  # None: groups are the smaller layer count
    redundancy_buffer_mib: int | None
    non_kv_accounting: str
    source: str
    # Model Runner V2 (vllm/v1/worker/gpu/): which models it runs by default ("all",
    # "dense-or-listed", "listed", "listed-dense-unquantized"; None: no model), the listed
    # architectures, whether its profile estimates the CUDA-graph pool (it returned 0 up
    # to 0.28), and the penalty state it keeps per sequence slot and vocabulary entry.
    v2_default_scope: str | None = None
    v2_default_architectures: tuple[str, ...] = ()
    v2_graph_estimate: bool = False
    v2_penalty_state_bytes_per_logit: float = 0.0
    # The CPU KV-cache tier: `--kv-offloading-size` (GiB over the TP ranks), the
    # OffloadingConnector behind `--kv-transfer-config` and its CPU spec's size key
    # (`num_cpu_blocks` or `cpu_bytes_to_use`), and whether that connector keeps the
    # hybrid KV-cache manager on (else vLLM turns it off).
    kv_offload_size_flag: bool = False
    kv_offload_connector: bool = False
    kv_offload_sized_by: str | None = None
    kv_offload_keeps_hybrid: bool = False
    # Where the engine keeps what it compiles: vLLM-compile's `torch_compile_cache` under
    # VLLM_CACHE_ROOT (absent before vLLM-compile existed), whether a TRITON_CACHE_DIR the
    # caller set is kept (older releases point it into the compile directory), and the
    # `--load-format` values the model loader registry accepts.
    torch_compile_cache: bool = False
    keeps_caller_triton_dir: bool = False
    load_formats: tuple[str, ...] = ()

    def batch_default(self, device: str, entry_point: EntryPoint) -> BatchDefault | None:
        for label, entry, value in self.batch_by_device:
            if label == device and entry == entry_point:
                return value
        return None

    @property
    def warmup_logits_unprofiled(self) -> bool:
        """The default model runner warms the sampler up with fp32 logits after the KV
        cache is sized, and the profile did not run that pipeline (so its peak is
        outside the activation reserve)."""
        return (
            self.sampler_warmup_after_kv
            and self.model_runner_v2_default
            and not self.v2_profile_pays_fp32_logits
        )


def _value(fact: Any) -> Any:
    return fact.get("value") if isinstance(fact, dict) else None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:4])


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = (
        resources.files("inferfleet.catalog").joinpath("data/vllm_releases.json").read_text(encoding="utf-8")
    )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def tabled_releases() -> tuple[str, ...]:
    return tuple(sorted(_table()["releases"], key=_key))


def _batch(entry: dict[str, Any]) -> tuple[tuple[tuple[str, EntryPoint, BatchDefault], ...], int | None]:
    defaults = entry.get("batchDefaults") or {}
    by_device = defaults.get("byDevice")
    if not by_device:
        return (), _value(defaults.get("maxNumSeqs"))
    out: list[tuple[str, EntryPoint, BatchDefault]] = []
    entries: tuple[EntryPoint, ...] = ("api_server", "llm_class")
    for label, values in by_device.items():
        for entry_point in entries:
            found = values.get(entry_point)
            if found:
                out.append(
                    (
                        label,
                        entry_point,
                        BatchDefault(found.get("maxNumSeqs"), found.get("maxNumBatchedTokens")),
                    )
                )
    return tuple(out), None


def _parse(name: str, entry: dict[str, Any], *, exact: bool) -> ReleaseFacts:
    warmup = entry.get("samplerWarmup") or {}
    graphs = entry.get("cudaGraphs") or {}
    hybrid = entry.get("hybridKv") or {}
    profiling = entry.get("profiling") or {}
    largest = _value(graphs.get("largestCaptured")) or {}
    cap = largest.get("cap")
    by_device, seqs = _batch(entry)
    estimate_on = graphs.get("estimateDefaultOn")
    runner_v2 = entry.get("modelRunnerV2") or {}
    offload = entry.get("kvOffload") or {}
    v2_default = _value(runner_v2.get("defaultFor")) or {}
    compiled = entry.get("compileCache") or {}
    return ReleaseFacts(
        release=name,
        exact=exact,
        gpu_memory_utilization=_value(entry.get("gpuMemoryUtilization")),
        batch_by_device=by_device,
        max_num_seqs_default=seqs,
        sampler_warmup_after_kv=bool(_value(warmup.get("afterKvSizing"))),
        model_runner_v2_default=bool(_value(warmup.get("modelRunnerV2Default"))),
        v2_profile_pays_fp32_logits=bool(_value(warmup.get("v2ProfilePaysFp32Logits"))),
        graph_estimated_before_kv=bool(_value(graphs.get("estimatedBeforeKv")))
        and (estimate_on is None or bool(_value(estimate_on))),
        graph_capture_cap=cap.get("other")
        if isinstance(cap, dict)
        else cap
        if isinstance(cap, int)
        else None,
        hybrid_pages=bool(hybrid.get("slidingWindowPages")),
        chunked_local_pages=bool(hybrid.get("chunkedLocalPages")),
        group_larger_within_ratio=_value(hybrid.get("largerCountWithinRatio")),
        redundancy_buffer_mib=_value(profiling.get("redundancyBufferMib")),
        non_kv_accounting=str(_value(profiling.get("nonKvAccounting")) or ""),
        source=f"vLLM {name} ({entry.get('artifact', 'PyPI')}), read by hack/vllm_releases.py",
        v2_default_scope=v2_default.get("scope"),
        v2_default_architectures=tuple(v2_default.get("architectures") or ()),
        v2_graph_estimate=bool(_value(runner_v2.get("graphEstimate"))),
        v2_penalty_state_bytes_per_logit=float(_value(runner_v2.get("penaltyStateBytesPerLogit")) or 0.0),
        kv_offload_size_flag=bool(_value(offload.get("sizeFlag"))),
        kv_offload_connector=bool(_value(offload.get("connector"))),
        kv_offload_sized_by=_value(offload.get("connectorSizedBy")),
        kv_offload_keeps_hybrid=bool(_value(offload.get("keepsHybridKv"))),
        torch_compile_cache=_value(compiled.get("torchCompileDir")) is not None,
        keeps_caller_triton_dir=bool(_value(compiled.get("keepsCallerTritonDir"))),
        load_formats=tuple(_value(entry.get("loadFormats")) or ()),
    )


@functools.lru_cache(maxsize=256)
def release_facts(version: str) -> ReleaseFacts | None:
    """The facts of `version`; else of a tabled patch release of the same minor series
    (the older one first); else of the closest older tabled release; None when the table
    holds no release at or before it."""
    releases = _table()["releases"]
    if version in releases:
        return _parse(version, releases[version], exact=True)
    wanted = _key(version)
    series = [name for name in releases if _key(name)[:2] == wanted[:2]]
    if series:
        name = min(
            series, key=lambda n: (_key(n) > wanted, abs(_key(n)[2] - wanted[2]) if len(_key(n)) > 2 else 0)
        )
        return _parse(name, releases[name], exact=False)
    older = [name for name in releases if _key(name) <= wanted]
    if not older:
        return None
    name = max(older, key=_key)
    return _parse(name, releases[name], exact=False)
