"""The hardware catalog: one immutable record per accelerator model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferfleet.api.base import wire_name
from inferfleet.api.node_labels import NodeLabels
from inferfleet.api.spec import NO_ACCELERATOR, InlineGpu
from inferfleet.api.yaml_input import load_one

Family = Literal["turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "gaudi", "neuron", "tpu", "other"]

# Families whose tensor cores run FP8 natively (W8A8 + FP8 KV is the default there).
FP8_NATIVE_FAMILIES: frozenset[str] = frozenset({"ada", "hopper", "blackwell", "cdna3"})
# Families with native FP4 (NVFP4/MXFP4) tensor cores.
FP4_NATIVE_FAMILIES: frozenset[str] = frozenset({"blackwell"})

# An inline GPU that leaves out its bandwidth or compute gets these modest figures (an
# L40S-class card) so the roofline still yields numbers; the plan says so in words.
INLINE_DEFAULT_BANDWIDTH_TBS = 0.8
INLINE_DEFAULT_BF16_TFLOPS = 300.0


class CatalogInvalid(ValueError):
    """A catalog file (built-in or the operator's `catalog_file`) is malformed."""


class GpuSpec(BaseModel):
    """One accelerator model as the planner sees it."""

    model_config = ConfigDict(alias_generator=wire_name, populate_by_name=True, extra="forbid", frozen=True)

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str = "nvidia"
    family: Family = "other"
    nominal_gb: float | None = Field(default=None, alias="nominalGB")
    memory_gib: float = Field(gt=0, description="Total memory as the driver reports it (GiB).")
    bandwidth_t_bs: float = Field(gt=0, alias="bandwidthTBs")
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp4_tflops: float | None = None
    bf16_supported: bool = True
    interconnect: Literal["nvlink", "pcie", "infinity-fabric", "none"] = "pcie"
    nvlink_domain: int = Field(default=1, ge=1)
    gpus_per_node: int = Field(default=8, ge=1)
    # Host memory of the usual node, per GPU (GiB), and the GPU's link to it (GB/s per
    # direction): what a KV-cache tier in host memory is sized and reloaded by. None:
    # unknown (a tier then gives its nodes' hostMemoryGiB).
    host_memory_gib_per_gpu: float | None = Field(default=None, gt=0, alias="hostMemoryGiBPerGpu")
    host_link_g_bs: float | None = Field(default=None, gt=0, alias="hostLinkGBs")
    # The usual node's network for GPU-to-GPU traffic across nodes (RDMA / GPUDirect), per
    # GPU (GB/s): what a disaggregated KV transfer crosses. None: unknown.
    network_g_bs: float | None = Field(default=None, gt=0, alias="networkGBsPerGpu")
    resource_name: str = "nvidia.com/gpu"
    # Each key is one way clusters label nodes with this GPU (api.node_labels); any matching
    # key places a pod there (catalog.placement).
    node_labels: NodeLabels = Field(default_factory=dict)
    unsupported_reason: str | None = None
    inline: bool = False

    @property
    def fp8_native(self) -> bool:
        return self.family in FP8_NATIVE_FAMILIES and self.fp8_tflops is not None

    @property
    def fp4_native(self) -> bool:
        return self.family in FP4_NATIVE_FAMILIES

    @property
    def served_by_vllm(self) -> bool:
        return self.unsupported_reason is None

    def fast_link(self, gpus: int) -> bool:
        """Whether `gpus` GPUs of one replica all talk over NVLink/Infinity Fabric."""
        return gpus <= self.nvlink_domain


# Vendors by the extended resource their device plugin advertises.
VENDOR_BY_RESOURCE = {"nvidia.com/gpu": "nvidia", "amd.com/gpu": "amd", NO_ACCELERATOR: "none"}


def vendor_of_resource(resource_name: str) -> str:
    """The vendor an inline GPU's device-plugin resource names (`amd.com/gpu` -> amd)."""
    known = VENDOR_BY_RESOURCE.get(resource_name)
    if known is not None:
        return known
    domain = resource_name.split("/", 1)[0]
    if domain.endswith("nvidia.com"):
        return "nvidia"
    return "amd" if domain.endswith("amd.com") else domain


def gpu_from_inline(inline: InlineGpu) -> GpuSpec:
    """A catalog record for a GPU the spec describes inline."""
    return GpuSpec(
        name=inline.name,
        vendor=vendor_of_resource(inline.resource_name),
        family="ada" if inline.fp8 else "ampere",
        memory_gib=inline.memory_gib,
        bandwidth_t_bs=inline.memory_bandwidth_t_bs or INLINE_DEFAULT_BANDWIDTH_TBS,
        bf16_tflops=inline.bf16_tflops or INLINE_DEFAULT_BF16_TFLOPS,
        fp8_tflops=(inline.bf16_tflops or INLINE_DEFAULT_BF16_TFLOPS) * 2 if inline.fp8 else None,
        interconnect=inline.interconnect,
        nvlink_domain=8 if inline.interconnect in ("nvlink", "infinity-fabric") else 1,
        gpus_per_node=8,
        resource_name=inline.resource_name,
        node_labels=dict(inline.node_labels or {}),
        inline=True,
    )


def parse_gpus(document: Any, source: str) -> list[GpuSpec]:
    """GPU records from a decoded YAML document `{gpus: [...]}`."""
    if not isinstance(document, Mapping) or not isinstance(document.get("gpus"), list):
        raise CatalogInvalid(f"{source}: expected a mapping with a `gpus` list")
    found: list[GpuSpec] = []
    for index, entry in enumerate(document["gpus"]):
        try:
            found.append(GpuSpec.model_validate(entry))
        except ValidationError as error:
            raise CatalogInvalid(f"{source}: gpus[{index}]: {error}") from None
    return found


def load_gpu_file(path: str | Path) -> list[GpuSpec]:
    """Read extra GPUs from a YAML file (the operator's `catalog_file` setting)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = load_one(text)
    except yaml.YAMLError as error:
        raise CatalogInvalid(f"{path}: not valid YAML: {error}") from None
    return parse_gpus(document, str(path))


def index_gpus(gpus: Iterable[GpuSpec]) -> dict[str, GpuSpec]:
    """Lookup table by lower-cased name and alias; later entries win (extra files override)."""
    table: dict[str, GpuSpec] = {}
    for gpu in gpus:
        for key in (gpu.name, *gpu.aliases):
            table[key.lower()] = gpu
    return table
