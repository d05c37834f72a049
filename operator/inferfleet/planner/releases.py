"""Which vLLM release a tier runs, and what that release does at startup (pure).

The release comes from `spec.serving.vllmVersion` when set, else from the tag of the
image the tier runs (`vllm/vllm-openai:v0.11.0`, `rocm/vllm:..._vllm_0.6.4...`). What
moved the KV budget between releases, as read from vLLM's own workers and startup logs
(sources listed in hack/bench/data/README.md):

- v0-legacy (0.2.0 - 0.6.3): V0 engine; the profile's peak is the drop in free memory
  (torch's reserved peak plus what NCCL and cuBLAS allocated after init); up to 0.2.4
  only torch's allocated peak counted.
- v0 (0.6.4 - 0.7.x): V0 with `memory_profiling`: weights + non-torch increase + torch
  activation peak. The profile runs all of `max_num_batched_tokens` at once; without
  chunked prefill that is max(max_model_len, 2048).
- v1-early (0.8.0 - 0.9.x): V1 engine by default; the worker counts everything the GPU
  has in use beyond torch's tensors as non-torch, the CUDA context included.
- v1 (0.10.0 - 0.20.x): V1 with the increase-only profile; CUDA graphs are captured
  after the KV cache is sized, outside the budget.
- v1-graph-reserve (0.21.0 on): the estimated CUDA-graph memory is taken out of the
  budget before the KV cache is sized (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS,
  "default since v0.21.0" in vLLM's own startup log).

A release outside 0.2.0 - 0.33.x, or one the image does not name, is planned with the
nearest family and an extra reserve, and the plan says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from inferfleet.catalog.vllm_releases import ReleaseFacts, device_class, release_facts

Family = Literal["v0-legacy", "v0", "v1-early", "v1", "v1-graph-reserve"]
Engine = Literal["v0", "v1"]
FAMILIES: tuple[Family, ...] = ("v0-legacy", "v0", "v1-early", "v1", "v1-graph-reserve")


@dataclass(frozen=True, order=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# The image tiers run when neither the spec nor the operator names one (the operator's
# `vllm_image` setting defaults to it too): vLLM 0.33.0, the newest stable release on
# PyPI on 2026-11-26 (released 2026-11-02), family v1-graph-reserve; its startup facts
# are in catalog/data/vllm_releases.json.
DEFAULT_VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"

OLDEST_MODELLED = Version(0, 2, 0)
# The newest release whose engine arguments we read (vllm/engine/arg_utils.py of 0.33).
NEWEST_MODELLED = Version(0, 33, 99)
# The budget share held back when the release is unknown or outside the modelled range:
# releases change their profiling pass without notice, so the plan promises less.
UNMODELLED_RESERVE_FRACTION = 0.05

V0_PROFILED = Version(0, 6, 4)
V1_DEFAULT = Version(0, 8, 0)
# vLLM PR #19312 (merged June 2025, the 0.9.1/0.9.2 window) moved V1 to the increase-only
# profile; 0.9.x logs still show more overhead than that explains (a 0.9.2 H100 run in
# vLLM issue #21348), so the 0.9 series is planned with the older, larger count.
V1_INCREASE_ONLY = Version(0, 10, 0)
V0_REMOVED = Version(0, 11, 0)
GRAPH_RESERVE = Version(0, 21, 0)
# V1's hybrid KV-cache manager (one pool for sliding-window and full-attention layers);
# before it every layer got a full-length cache.
HYBRID_ALLOCATOR = Version(0, 10, 0)
# Only torch's allocated peak was subtracted up to 0.2.4 (vLLM PR #2031 added the rest).
TORCH_ONLY_PEAK_UNTIL = Version(0, 2, 5)
# V0's MLA backends pad each cached latent to 256 bytes (VLLM_CUDA_MEM_ALIGN_KV_CACHE).
V0_MLA_ALIGNMENT = Version(0, 7, 1)

_VERSION = re.compile(r"(?<![0-9.])v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> Version | None:
    """`0.11.0`, `v0.6.4.post1`, `0.10.1.1`, `0.7.4.dev713+g...` → a Version; else None."""
    match = _VERSION.search(text.strip())
    if match is None:
        return None
    major, minor, patch = match.group(1), match.group(2), match.group(3)
    return Version(int(major), int(minor), int(patch or 0))


def version_from_image(image: str) -> Version | None:
    """The vLLM release an image's tag names, if it names one.

    `vllm/vllm-openai:v0.11.0` → 0.11.0; ROCm builds carry it after `vllm` inside the tag
    (`rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250415`); `latest`, `nightly` and digests
    name none.
    """
    name, _, tag = image.partition("@")[0].rpartition(":")
    if not name or "/" in tag:
        return None  # no tag (a registry port is not one)
    lowered = tag.lower()
    marked = re.search(r"vllm[-_]?v?(\d+\.\d+(?:\.\d+)?)", lowered)
    if marked:
        return parse_version(marked.group(1))
    if re.fullmatch(r"v?\d+\.\d+(\.\d+)?([._+-].*)?", lowered):
        return parse_version(lowered)
    return None


def family_of(version: Version) -> Family:
    if version < V0_PROFILED:
        return "v0-legacy"
    if version < V1_DEFAULT:
        return "v0"
    if version < V1_INCREASE_ONLY:
        return "v1-early"
    if version < GRAPH_RESERVE:
        return "v1"
    return "v1-graph-reserve"


@dataclass(frozen=True, slots=True)
class Release:
    """The vLLM release one tier is planned for."""

    version: Version | None
    source: str  # where the version came from, for the reasons
    family: Family
    modelled: bool
    note: str  # why the estimate is conservative, or ""

    @property
    def label(self) -> str:
        return str(self.version) if self.version is not None else "unknown"

    def engine(self, pipeline_parallel: int = 1) -> Engine:
        """V0 or V1; 0.8.x fell back to V0 for pipeline parallelism."""
        if self.family in ("v0-legacy", "v0"):
            return "v0"
        if self.version is not None and self.version < Version(0, 9, 0) and pipeline_parallel > 1:
            return "v0"
        return "v1"

    @property
    def reserve_fraction(self) -> float:
        return 0.0 if self.modelled else UNMODELLED_RESERVE_FRACTION

    def at_least(self, version: Version) -> bool:
        """True for releases at or after `version`; an unknown release counts as new."""
        return self.version is None or self.version >= version

    def before(self, version: Version) -> bool:
        return self.version is not None and self.version < version

    @property
    def facts(self) -> ReleaseFacts | None:
        """What the release's own source says (catalog/data/vllm_releases.json); for a
        release the table lacks, the closest older tabled one's."""
        return release_facts(str(self.version)) if self.version is not None else None

    def describe(self) -> str:
        text = f"vLLM {self.label} ({self.family} memory accounting; from {self.source})"
        facts = self.facts
        if facts is not None and self.modelled:
            text += (
                f"; startup facts read from vLLM {facts.release}'s source"
                if facts.exact
                else f"; startup facts of vLLM {facts.release}, the closest release read"
            )
        return f"{text}; {self.note}" if self.note else text


def resolve_release(image: str | None, explicit: str | None) -> Release:
    """The release from the explicit field, else the image tag; a clear note otherwise."""
    if explicit:
        version = parse_version(explicit)
        source = f"spec.serving.vllmVersion {explicit}"
    elif image:
        version = version_from_image(image)
        source = f"image {image}"
    else:
        version, source = None, "no image"
    if version is None:
        return Release(
            version=None,
            source=source,
            family="v1-graph-reserve",
            modelled=False,
            note=(
                "the image tag names no vLLM release, so the newest accounting is used with "
                f"{UNMODELLED_RESERVE_FRACTION:.0%} of the budget held back; set "
                "spec.serving.vllmVersion to the release the image runs"
            ),
        )
    if version < OLDEST_MODELLED:
        return Release(
            version, source, "v0-legacy", False,
            f"older than {OLDEST_MODELLED}, the oldest modelled release: planned as {OLDEST_MODELLED} "
            f"with {UNMODELLED_RESERVE_FRACTION:.0%} of the budget held back",
        )  # fmt: skip
    if version > NEWEST_MODELLED:
        return Release(
            version, source, "v1-graph-reserve", False,
            f"newer than the modelled releases (up to {NEWEST_MODELLED.major}.{NEWEST_MODELLED.minor}.x): "
            f"planned with the newest accounting and {UNMODELLED_RESERVE_FRACTION:.0%} of the budget "
            "held back",
        )  # fmt: skip
    return Release(version, source, family_of(version), True, "")


# --- engine defaults: what a release picks when a flag is not given ------------------


EntryPoint = Literal["api_server", "llm_class"]
LARGE_GPU_GIB = 70.0
HUGE_GPU_GIB = 160.0
# vLLM raised --gpu-memory-utilization's default from 0.90 to 0.92 in 0.20.0 (the release
# table: 0.19.1 has 0.9, 0.20.0 has 0.92); the table's own value wins where it has one.
UTILIZATION_092_FROM = Version(0, 20, 0)
# V1 picked batch defaults by GPU from 0.9.0 (≥70 GiB and not an A100; vLLM PR #17885),
# by name (H100/H200) a little before, and 16384 tokens on ≥160 GiB GPUs later.
V1_GPU_DEFAULTS = Version(0, 9, 0)
V1_H100_BY_NAME = Version(0, 8, 3)
V1_HUGE_GPU_BATCH = Version(0, 11, 0)
# V0 switched chunked prefill on by itself for the API server above 32k context.
V0_LONG_CONTEXT = 32768
V0_CHUNKED_DEFAULT_TOKENS_FROM = Version(0, 6, 0)


@dataclass(frozen=True, slots=True)
class EngineDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    chunked_prefill: bool
    source: str


def engine_defaults(
    release: Release,
    *,
    gpu_name: str,
    gpu_memory_gib: float,
    max_model_len: int,
    chunked_prefill: bool | None = None,
    entry_point: EntryPoint = "api_server",
    pipeline_parallel: int = 1,
) -> EngineDefaults:
    """`--max-num-seqs`, `--max-num-batched-tokens`, `--gpu-memory-utilization` as this
    release picks them itself (chunked_prefill None: the release's own choice). The
    release table's values win where it has them (read from the release's arg_utils.py
    and config); the rules below cover releases it lacks."""
    facts = release.facts if release.modelled else None
    utilization = 0.92 if release.at_least(UTILIZATION_092_FROM) else 0.90
    if facts is not None and facts.gpu_memory_utilization is not None:
        utilization = facts.gpu_memory_utilization
    if release.engine(pipeline_parallel) == "v0":
        chunked = (
            chunked_prefill
            if chunked_prefill is not None
            else (
                entry_point == "api_server"
                and max_model_len > V0_LONG_CONTEXT
                and release.at_least(Version(0, 5, 1))
            )
        )
        if chunked:
            batched = 2048 if release.at_least(V0_CHUNKED_DEFAULT_TOKENS_FROM) else 512
            source = "V0 with chunked prefill: 256 sequences, a small token budget"
        else:
            batched = max(max_model_len, 2048)
            source = "V0 without chunked prefill: 256 sequences, max(max-model-len, 2048) tokens"
        return EngineDefaults(256, batched, utilization, chunked, source)
    if facts is not None and facts.batch_by_device:
        found = facts.batch_default(device_class(gpu_name, gpu_memory_gib), entry_point)
        if found is not None and found.max_num_seqs and found.max_num_batched_tokens:
            return EngineDefaults(
                found.max_num_seqs,
                found.max_num_batched_tokens,
                utilization,
                True,
                f"vLLM {facts.release}'s own defaults for this GPU class (vllm/engine/arg_utils.py)",
            )
    name = gpu_name.lower()
    large = gpu_memory_gib >= LARGE_GPU_GIB and "a100" not in name
    if release.at_least(V1_GPU_DEFAULTS):
        big_defaults = large
    else:
        big_defaults = release.at_least(V1_H100_BY_NAME) and ("h100" in name or "h200" in name)
    if big_defaults:
        seqs = 1024
        batched = 16384 if entry_point == "llm_class" else 8192
        if (
            entry_point == "api_server"
            and gpu_memory_gib >= HUGE_GPU_GIB
            and release.at_least(V1_HUGE_GPU_BATCH)
        ):
            batched = 16384
        source = "V1 on a large GPU: 1024 sequences"
    else:
        seqs = 256
        batched = 8192 if entry_point == "llm_class" else 2048
        source = "V1: 256 sequences"
    return EngineDefaults(seqs, batched, utilization, True, source)
