"""The `InferenceService` spec: what a platform team declares.

Each model's docstring and each field's description become the CRD's OpenAPI
descriptions (`kubectl explain inferenceservice.spec...`). Every cross-field rule is
written twice on purpose: once as CEL (`x-kubernetes-validations`, enforced by the API
server at `kubectl apply`) and once as a pydantic validator (enforced by the CLI, the
webhook and the operator). `tests/unit/api/test_cel_rules.py` evaluates the CEL rules
against the same samples so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from inferfleet.api import host_paths, vllm_flags
from inferfleet.api.base import ApiModel, cel, schema_extra
from inferfleet.api.cron import checked_schedule, checked_zone
from inferfleet.api.frontdoor_spec import FrontDoorSpec
from inferfleet.api.model_config_bounds import checked_config
from inferfleet.api.node_labels import NodeLabels
from inferfleet.api.source_paths import (
    checked_model_name,
    checked_object_name,
    checked_revision,
    checked_secret_key,
    checked_source,
)

# --- shared vocabularies -------------------------------------------------------------

QuantizationPolicy = Literal["auto", "none", "fp8", "int8", "awq", "gptq", "mxfp4", "nvfp4"]
KvCacheDtype = Literal["auto", "fp8", "bf16", "fp16"]
ModelDtype = Literal["auto", "bfloat16", "float16", "float32"]
Archetype = Literal["chat", "rag", "code", "agentic", "batch"]
WorkloadMode = Literal["online", "offline"]
CapacityType = Literal["on-demand", "spot"]
Interconnect = Literal["nvlink", "pcie", "infinity-fabric", "none"]
CacheMode = Literal["nvme", "pvc", "none"]
GpuNodeAffinity = Literal["required", "none"]
ScalingMode = Literal["active", "advisory"]
Seasonality = Literal["auto", "daily", "weekly", "none"]
HeadroomMode = Literal["measured", "fixed"]
ReplanMode = Literal["advise", "auto"]
CapacitySlos = Literal["ttft", "ttftAndItl"]

# DNS-1123 label: tier names end up in object names and label values.
DnsLabel = Annotated[
    str,
    StringConstraints(min_length=1, max_length=40, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
]
# Tier names go into object names (`<service>-<tier>`, `-api`, `-cache`) and label
# values; 24 characters keeps a 27-character service name and any tier within the
# workload-name budget the root rule checks (api.resource).
TIER_NAME_MAX_CHARS = 24
TierName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=TIER_NAME_MAX_CHARS, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    ),
]
SourceUri = Annotated[
    str,
    StringConstraints(min_length=6, max_length=1024, pattern=r"^(hf|s3|gs|pvc|file)://[^\s]+$"),
]
ShortString = Annotated[str, StringConstraints(min_length=1, max_length=253)]
# A vLLM release: `0.11.0`, `v0.6.4`, `0.10.1.1`, `0.7.4.dev713+gb4961126`.
VllmVersion = Annotated[
    str,
    StringConstraints(
        min_length=3, max_length=64, pattern=r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?([.+-][0-9A-Za-z.+-]*)?$"
    ),
]
ArgString = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
# A 5-field cron expression (minute hour day-of-month month day-of-week).
Cron = Annotated[
    str, StringConstraints(min_length=9, max_length=100, pattern=r"^\S+\s+\S+\s+\S+\s+\S+\s+\S+$")
]


class SecretKeyRef(ApiModel):
    """A key in a Secret in the InferenceService's own namespace."""

    name: ShortString = Field(description="Name of the Secret.")
    key: ShortString = Field(default="token", description="Key within the Secret.")

    _name_is_an_object_name = field_validator("name")(checked_object_name)
    _key_is_a_key = field_validator("key")(checked_secret_key)


# --- model -----------------------------------------------------------------------------


class LoraAdapter(ApiModel):
    """A LoRA adapter served on top of the base model."""

    name: DnsLabel = Field(description="Name clients use in the `model` field of a request.")
    source: SourceUri = Field(description="Where the adapter weights live (hf://, s3://, gs://, pvc://).")
    rank: int = Field(default=16, ge=1, le=1024, description="LoRA rank (sizes --max-lora-rank).")

    _source_contained = field_validator("source")(checked_source)


class ModelSpec(ApiModel):
    """The model to serve, and where its weights come from."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel(
                "!has(self.adapters) || !has(self.maxSimultaneousAdapters) || "
                "self.maxSimultaneousAdapters <= size(self.adapters)",
                "maxSimultaneousAdapters cannot exceed the number of adapters",
                ".maxSimultaneousAdapters",
            ),
            cel(
                "!has(self.config) || has(self.parametersBillion)",
                "an inline config needs parametersBillion (the planner cannot size weights without it)",
                ".parametersBillion",
            ),
        )
    }

    name: ShortString = Field(
        description=(
            "Catalog key or Hugging Face repo id, e.g. `meta-llama/Llama-3.1-8B-Instruct`. "
            "Also the default served model name."
        )
    )
    source: SourceUri | None = Field(
        default=None,
        description="Weights URI: hf://org/repo, s3://bucket/prefix, gs://bucket/prefix, "
        "pvc://claim/path. Empty means hf://<name>.",
    )
    revision: ShortString | None = Field(
        default=None, description="Revision (branch, tag or commit) of the weights; empty means `main`."
    )
    credentials_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Secret holding the hub token or object-store credentials; read only in this namespace.",
    )
    served_model_name: ShortString | None = Field(
        default=None, description="Name the OpenAI API serves the model under; defaults to `name`."
    )
    config: dict[str, Any] | None = Field(
        default=None,
        description="Inline architecture: the keys of the model's HF config.json, for models "
        "the catalog does not know.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    parameters_billion: float | None = Field(
        default=None, gt=0, le=10000, description="Total parameter count in billions."
    )
    adapters: list[LoraAdapter] | None = Field(
        default=None,
        max_length=64,
        description="LoRA adapters served with the base model.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    max_simultaneous_adapters: int | None = Field(
        default=None, ge=1, le=64, description="Adapters resident on a GPU at once (--max-loras)."
    )

    _name_is_an_argument = field_validator("name", "served_model_name")(checked_model_name)
    _source_contained = field_validator("source")(checked_source)
    _revision_is_a_ref = field_validator("revision")(checked_revision)

    @field_validator("config")
    @classmethod
    def _config_within_bounds(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return checked_config(value)

    @model_validator(mode="after")
    def _adapters_and_config(self) -> ModelSpec:
        if (
            self.adapters is not None
            and self.max_simultaneous_adapters is not None
            and self.max_simultaneous_adapters > len(self.adapters)
        ):
            raise ValueError("maxSimultaneousAdapters cannot exceed the number of adapters")
        if self.config is not None and self.parameters_billion is None:
            raise ValueError(
                "an inline config needs parametersBillion (the planner cannot size weights without it)"
            )
        if self.adapters is not None:
            names = [adapter.name for adapter in self.adapters]
            if len(set(names)) != len(names):
                raise ValueError("adapter names must be unique")
        return self


# --- workload ------------------------------------------------------------------------


class TokenPercentiles(ApiModel):
    """Token-count percentiles of one side of a request."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel("self.p50 <= self.p95 && self.p95 <= self.p99", "percentiles must satisfy p50 <= p95 <= p99")
        )
    }

    p50: int = Field(ge=1, le=10_000_000, description="Median tokens.")
    p95: int = Field(ge=1, le=10_000_000, description="95th-percentile tokens.")
    p99: int = Field(ge=1, le=10_000_000, description="99th-percentile tokens.")

    @model_validator(mode="after")
    def _ordered(self) -> TokenPercentiles:
        if not self.p50 <= self.p95 <= self.p99:
            raise ValueError("percentiles must satisfy p50 <= p95 <= p99")
        return self


class Slo(ApiModel):
    """Latency objectives the planner sizes for and the autoscaler defends."""

    ttft_p99_ms: float = Field(
        default=2000, gt=0, le=3_600_000, description="Time to first token, 99th percentile (ms)."
    )
    itl_p99_ms: float = Field(
        default=100, gt=0, le=60_000, description="Inter-token latency, 99th percentile (ms)."
    )


class WorkloadSpec(ApiModel):
    """The traffic the service must carry."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel(
                "!has(self.routing) || self.routing.all(k, self.routing[k] >= 0.0 && self.routing[k] <= 1.0)",
                "each routing share must be between 0 and 1",
                ".routing",
            ),
        )
    }

    archetype: Archetype = Field(
        default="chat", description="Traffic shape; sets batching defaults (interactive vs batch)."
    )
    mode: WorkloadMode = Field(
        default="online", description="online: latency SLOs apply; offline: throughput first."
    )
    input_tokens: TokenPercentiles = Field(description="Prompt length percentiles.")
    output_tokens: TokenPercentiles = Field(description="Generated length percentiles.")
    peak_requests_per_second: float = Field(
        gt=0, le=1_000_000, description="Peak request rate the fleet must carry (req/s)."
    )
    slo: Slo = Field(default_factory=Slo, description="Latency objectives.")
    routing: dict[str, float] | None = Field(
        default=None,
        max_length=16,
        description="Optional share of traffic per tier name (0..1); shares must sum to at most 1.",
    )

    @field_validator("routing")
    @classmethod
    def _shares_in_range(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None:
            for tier, share in value.items():
                if not 0.0 <= share <= 1.0:
                    raise ValueError(f"routing share for tier {tier!r} must be between 0 and 1")
        return value


# --- tiers ---------------------------------------------------------------------------


# An inline GPU's resourceName that means "no accelerator" (CPU-only test tiers).
NO_ACCELERATOR = "none"


class InlineGpu(ApiModel):
    """A GPU the catalog lacks, described inline."""

    name: ShortString = Field(description="Display name, e.g. `RTX-6000-Ada`.")
    memory_gib: float = Field(gt=0, le=4096, description="Memory per GPU (GiB).")
    memory_bandwidth_t_bs: float | None = Field(
        default=None, gt=0, le=100, alias="memoryBandwidthTBs", description="HBM bandwidth (TB/s)."
    )
    bf16_tflops: float | None = Field(default=None, gt=0, le=100_000, description="Dense BF16 TFLOPS.")
    fp8: bool = Field(default=False, description="Native FP8 tensor cores.")
    interconnect: Interconnect = Field(default="pcie", description="GPU-to-GPU link within a node.")
    resource_name: ShortString = Field(
        default="nvidia.com/gpu",
        description="Extended resource the device plugin advertises (`amd.com/gpu` makes it an AMD "
        "GPU: ROCm image, AMD device groups); `none` for a CPU-only tier.",
    )
    node_labels: NodeLabels | None = Field(
        default=None,
        description="Node labels that identify nodes with this GPU, like the catalog's: each key is "
        "one way to recognise them (any one matching is enough), its value one value or a list.",
    )


class TierOverrides(ApiModel):
    """Settings that always win over the planner (the plan says so in its reasons)."""

    tensor_parallel_size: int | None = Field(default=None, ge=1, le=64)
    pipeline_parallel_size: int | None = Field(default=None, ge=1, le=64)
    dtype: ModelDtype | None = None
    quantization: QuantizationPolicy | None = None
    kv_cache_dtype: KvCacheDtype | None = None
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=16, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=65_536)
    max_num_batched_tokens: int | None = Field(default=None, ge=16, le=10_000_000)
    block_size: Literal[1, 8, 16, 32, 64, 128, 256] | None = None
    enforce_eager: bool | None = None


class Toleration(ApiModel):
    """A Kubernetes toleration (core/v1 Toleration)."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


def _tier_schema_extra() -> dict[str, Any]:
    return schema_extra(
        cel(
            "!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
            "minReplicas must be <= maxReplicas",
            ".minReplicas",
        ),
        cel(
            "!has(self.overrides) || !has(self.overrides.tensorParallelSize) || "
            "!has(self.gpusPerNode) || self.overrides.tensorParallelSize <= self.gpusPerNode",
            "overrides.tensorParallelSize cannot exceed gpusPerNode (tensor parallelism stays in one node)",
            ".overrides.tensorParallelSize",
        ),
        # The API server cannot see inside `affinity` (preserved unknown fields), so it only
        # checks that some placement is given; the operator also checks that it is a
        # required node affinity or a node selector.
        cel(
            "self.gpuNodeAffinity != 'none' || (has(self.nodeSelector) && size(self.nodeSelector) > 0) "
            "|| has(self.affinity)",
            OPT_OUT_MESSAGE,
            ".gpuNodeAffinity",
        ),
    )


OPT_OUT_MESSAGE = (
    "gpuNodeAffinity none needs the tier's own nodeSelector or affinity.nodeAffinity."
    "requiredDuringSchedulingIgnoredDuringExecution; otherwise its pods fit any node with a free GPU "
    "(e.g. nodeSelector {nvidia.com/gpu.present: 'true'} if every GPU node serves this tier)"
)


def required_node_terms(affinity: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The tier affinity's required node-selector terms; None when it has none.

    Raises ValueError naming the field when the part the operator combines with its own
    GPU placement (catalog.placement) is not shaped like core/v1 NodeAffinity.
    """
    node_affinity = (affinity or {}).get("nodeAffinity")
    if node_affinity is None:
        return None
    if not isinstance(node_affinity, dict):
        raise ValueError("affinity.nodeAffinity must be an object (core/v1 NodeAffinity)")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    path = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(terms, list) or not terms:
        raise ValueError(f"{path}.nodeSelectorTerms must be a non-empty list of node selector terms")
    for index, term in enumerate(terms):
        if not isinstance(term, dict) or not (term.get("matchExpressions") or term.get("matchFields")):
            raise ValueError(
                f"{path}.nodeSelectorTerms[{index}] must be an object with matchExpressions or matchFields"
            )
        for key in ("matchExpressions", "matchFields"):
            if key in term and not isinstance(term[key], list):
                raise ValueError(f"{path}.nodeSelectorTerms[{index}].{key} must be a list")
    return terms


class TierSpec(ApiModel):
    """One hardware tier: a pool of identical GPU nodes serving the same model."""

    model_config = ApiModel.model_config | {"json_schema_extra": _tier_schema_extra()}

    name: TierName = Field(description="Tier name, unique in the service; used in object names.")
    gpu: str | InlineGpu = Field(
        description="Catalog GPU name (e.g. `H100-SXM-80GB`, `L4`) or an inline GPU object.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    gpus_per_node: int | None = Field(
        default=None, ge=1, le=16, description="GPUs per node; defaults to the catalog's usual node."
    )
    node_selector: dict[str, str] | None = Field(default=None, description="Node labels to select.")
    tolerations: list[Toleration] | None = Field(default=None, max_length=32)
    affinity: dict[str, Any] | None = Field(
        default=None,
        description="core/v1 Affinity, passed through to the pods.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    capacity_type: CapacityType = Field(
        default="on-demand", description="spot tiers take burst above the on-demand base."
    )
    min_replicas: int = Field(
        default=1, ge=0, le=10_000, description="Warm minimum: never scaled below this."
    )
    max_replicas: int | None = Field(
        default=None, ge=0, le=10_000, description="Upper bound; empty means the planner's peak sizing."
    )
    cost_per_gpu_hour: float | None = Field(
        default=None, ge=0, le=10_000, description="Price of one GPU-hour (USD), for cost ordering."
    )
    overrides: TierOverrides | None = Field(default=None, description="Settings that win over the planner.")
    gpu_node_affinity: GpuNodeAffinity = Field(
        default="required",
        description="required: pods (and pre-cache pods) only go to nodes labelled with this GPU "
        "(the catalog's or the inline GPU's nodeLabels; spot tiers also to spot capacity), combined "
        "with the tier's own nodeSelector and affinity. none: only the tier's own placement, for "
        "clusters that label GPU nodes their own way.",
    )
    image: ShortString | None = Field(
        default=None,
        description="vLLM image for this tier; wins over serving.image and the operator's default "
        "image for the GPU's vendor (CUDA build for NVIDIA, ROCm build for AMD).",
    )
    host_memory_gib: float | None = Field(
        default=None,
        gt=0,
        le=65_536,
        alias="hostMemoryGiB",
        description="Host memory of this tier's nodes (GiB); defaults to the catalog's usual node. "
        "Sizes a host-memory KV-cache tier (serving.hostKvCache).",
    )

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu_not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("gpu must be a catalog name or an inline {name, memoryGiB, ...} object")
        return value

    @model_validator(mode="after")
    def _bounds(self) -> TierSpec:
        if self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise ValueError("minReplicas must be <= maxReplicas")
        tp = self.overrides.tensor_parallel_size if self.overrides else None
        if tp is not None and self.gpus_per_node is not None and tp > self.gpus_per_node:
            raise ValueError(
                "overrides.tensorParallelSize cannot exceed gpusPerNode "
                "(tensor parallelism stays in one node)"
            )
        own_placement = self.has_own_placement()  # also checks the shape of a required node affinity
        if self.gpu_node_affinity == "none" and not own_placement:
            raise ValueError(OPT_OUT_MESSAGE)
        return self

    def has_own_placement(self) -> bool:
        """A node selector or a required node affinity of the tier's own."""
        return bool(self.node_selector) or required_node_terms(self.affinity) is not None


# --- scaling -------------------------------------------------------------------------


class PredictiveScaling(ApiModel):
    """History-based scaling: forecast demand one cold start ahead."""

    enabled: bool | None = Field(default=None, description="Defaults to the operator setting (on).")
    history_window_hours: float | None = Field(
        default=None, gt=0, le=24 * 56, description="Request-rate history the forecaster reads."
    )
    seasonality: Seasonality | None = Field(
        default=None, description="auto picks daily/weekly when enough history exists."
    )


class ReactiveScaling(ApiModel):
    """Queue-depth and TTFT signals: the fast path when the forecast is wrong."""

    queue_depth_per_replica: float | None = Field(
        default=None, gt=0, le=100_000, description="Waiting requests per replica that trigger scale-up."
    )
    ttft_target_ms: float | None = Field(
        default=None, gt=0, le=3_600_000, description="TTFT p99 target; defaults to workload.slo.ttftP99Ms."
    )


class ScaleBehavior(ApiModel):
    """Pacing of scale changes in one direction."""

    stabilization_seconds: int | None = Field(default=None, ge=0, le=86_400)
    cooldown_seconds: int | None = Field(default=None, ge=0, le=86_400)
    max_replicas_per_step: int | None = Field(default=None, ge=1, le=10_000)
    max_percent_per_step: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description=(
            "A step may also change this percentage of the current replicas when that is "
            "more than maxReplicasPerStep (HPA's Percent policy beside its Pods policy)."
        ),
    )


class PrewarmWindow(ApiModel):
    """Keep at least `replicas` warm from each cron start for `durationMinutes`."""

    schedule: Cron = Field(description="5-field cron expression for the window start, e.g. `0 8 * * 1-5`.")
    duration_minutes: int = Field(ge=1, le=7 * 24 * 60, description="Window length.")
    replicas: int = Field(ge=0, le=10_000, description="Replicas to hold during the window.")
    tier: DnsLabel | None = Field(default=None, description="Tier to pre-warm; empty means the cheapest.")
    time_zone: ShortString | None = Field(default=None, description="IANA zone; defaults to UTC.")

    # The policy evaluates both on every tick: refused here, at admission, not there.
    _schedule_parses = field_validator("schedule")(checked_schedule)
    _zone_exists = field_validator("time_zone")(checked_zone)


class ScalingSpec(ApiModel):
    """Autoscaling policy. Empty fields take the operator's defaults (Helm values)."""

    mode: ScalingMode | None = Field(
        default=None, description="active scales workloads; advisory only reports decisions."
    )
    allow_scale_to_zero: bool = Field(
        default=False, description="Permit minReplicas 0 on a tier (cold starts on first request)."
    )
    sync_period_seconds: int | None = Field(default=None, ge=5, le=3600)
    headroom: float | None = Field(
        default=None,
        ge=0,
        le=5,
        description=(
            "Capacity kept above forecast demand (0.2 = 20%). Set here, it is used as it is "
            "(headroomMode fixed); left out, the measured forecast error decides, starting "
            "from the operator's default."
        ),
    )
    headroom_mode: HeadroomMode | None = Field(
        default=None,
        description=(
            "measured: headroom follows the forecaster's measured error (the default unless "
            "headroom is set); fixed: the headroom value as it is."
        ),
    )
    replan: ReplanMode | None = Field(
        default=None,
        description=(
            "When the traffic the engines report departs from the declared workload enough to "
            "change the plan (condition WorkloadDrift): advise only says so (the default); auto "
            "also re-plans for the observed workload (vLLM flags change, pods roll)."
        ),
    )
    capacity_slos: CapacitySlos | None = Field(
        default=None,
        description=(
            "The SLOs a replica's learned capacity keeps: ttftAndItl keeps decode steps within "
            "workload.slo.itlP99Ms as well as the time to first token, at the replicas that "
            "costs; ttft fills replicas as far as the time to first token allows, where long "
            "prompts may slow decoding past the ITL SLO. Unset: the operator setting, whose "
            "default is every SLO the spec declares (ttftAndItl)."
        ),
    )
    predictive: PredictiveScaling | None = None
    reactive: ReactiveScaling | None = None
    scale_up: ScaleBehavior | None = None
    scale_down: ScaleBehavior | None = None
    prewarm: list[PrewarmWindow] | None = Field(default=None, max_length=32)


# --- cache ---------------------------------------------------------------------------


NODE_PATH_MESSAGE = (
    "cache.nodePath must be a normalized absolute path (no component starting with '.', no trailing '/') "
    "outside the node's system directories"
)


class CacheEviction(ApiModel):
    """How old revisions leave the node cache."""

    budget_gib: float | None = Field(
        default=None, gt=0, le=1_000_000, description="Per-node cache size budget; LRU beyond it."
    )
    policy: Literal["lru"] = Field(default="lru")


class CacheSpec(ApiModel):
    """Where weights are pre-cached so replicas start in seconds."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel("self.mode != 'pvc' || has(self.pvcName)", "cache.mode pvc needs pvcName", ".pvcName"),
            cel(
                f"!has(self.nodePath) || (self.nodePath.matches('{host_paths.CEL_NORMALIZED}') && "
                f"!self.nodePath.matches('{host_paths.CEL_SYSTEM_PATHS}') && "
                f"!self.nodePath.matches('{host_paths.CEL_SYSTEM_VAR_PATHS}') && "
                f"!self.nodePath.matches('{host_paths.CEL_DOT_COMPONENT}'))",
                NODE_PATH_MESSAGE,
                ".nodePath",
            ),
        )
    }

    mode: CacheMode = Field(
        default="nvme", description="nvme: node-local pre-cache; pvc: shared claim; none."
    )
    node_path: ShortString | None = Field(
        default=None,
        description="Host path of the node-local cache; operator default if empty. Must lie under the "
        "operator's allowed cache root (Helm cache.allowedRoot; by default its cache.nodePath, "
        "/mnt/nvme/inferfleet); system directories (/, /etc, /proc, /sys, /var/lib/kubelet, ...) are "
        "refused.",
    )
    pvc_name: ShortString | None = Field(default=None, description="Claim holding the weights (mode pvc).")
    storage_bandwidth_g_bps: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        alias="storageBandwidthGBps",
        description="Read bandwidth hint of the cache storage (GB/s) for cold-start estimates.",
    )
    eviction: CacheEviction | None = None

    @field_validator("node_path")
    @classmethod
    def _node_path_safe(cls, value: str | None) -> str | None:
        reason = host_paths.unsafe_reason(value) if value is not None else None
        if reason is not None:
            raise ValueError(f"{NODE_PATH_MESSAGE}: {reason}")
        return value

    _pvc_is_an_object_name = field_validator("pvc_name")(checked_object_name)

    @model_validator(mode="after")
    def _pvc_named(self) -> CacheSpec:
        if self.mode == "pvc" and self.pvc_name is None:
            raise ValueError("cache.mode pvc needs pvcName")
        return self


# --- serving -------------------------------------------------------------------------


class SpeculativeDecoding(ApiModel):
    """vLLM speculative decoding (--speculative-config)."""

    method: Literal["ngram", "eagle", "eagle3", "draft", "mtp"] = Field(description="Proposer.")
    model: ShortString | None = Field(default=None, description="Draft/EAGLE model repo (eagle, draft).")
    num_speculative_tokens: int = Field(default=3, ge=1, le=32)


class KeySelector(ApiModel):
    """A key of a Secret or ConfigMap in the InferenceService's own namespace."""

    name: ShortString = Field(description="Name of the Secret or ConfigMap.")
    key: ShortString = Field(description="Key within it.")
    optional: bool | None = Field(default=None, description="Start the pod even when the key is missing.")


class EnvVarSource(ApiModel):
    """Where a variable's value comes from: exactly one of a Secret key or a ConfigMap key."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel(
                "has(self.secretKeyRef) != has(self.configMapKeyRef)",
                "valueFrom needs exactly one of secretKeyRef or configMapKeyRef",
            ),
        )
    }

    secret_key_ref: KeySelector | None = Field(default=None, description="A key of a Secret.")
    config_map_key_ref: KeySelector | None = Field(default=None, description="A key of a ConfigMap.")

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("valueFrom needs exactly one of secretKeyRef or configMapKeyRef")
        return self


def _secret_names_cel() -> str:
    return "[" + ", ".join(f"'{name}'" for name in sorted(vllm_flags.SECRET_ENV)) + "]"


def _reserved_names_cel() -> str:
    return "[" + ", ".join(f"'{name}'" for name in sorted(vllm_flags.RESERVED_ENV)) + "]"


ENV_ONE_SOURCE_MESSAGE = "an env entry needs exactly one of value or valueFrom"
SECRET_LITERAL_MESSAGE = (
    "is a secret: a literal value would sit in the InferenceService and the pod spec for anyone "
    "who can read them; use valueFrom.secretKeyRef"
)
RESERVED_ENV_MESSAGE = (
    "HF_TOKEN and HF_TOKEN_PATH are set by the operator: the hub token comes from "
    "spec.model.credentialsSecretRef as a read-only file"
)


class EnvVar(ApiModel):
    """An environment variable for vLLM: a plain value, or valueFrom a Secret or ConfigMap key.

    Secrets are never literals: `VLLM_API_KEY` (vLLM's API key) and other credential
    variables must come from a Secret."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel("has(self.value) != has(self.valueFrom)", ENV_ONE_SOURCE_MESSAGE),
            cel(
                f"!(self.name in {_secret_names_cel()}) || !has(self.value)",
                "this variable " + SECRET_LITERAL_MESSAGE,
            ),
            cel(f"!(self.name in {_reserved_names_cel()})", RESERVED_ENV_MESSAGE),
        )
    }

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=253)]
    value: Annotated[str, StringConstraints(max_length=32_768)] | None = Field(
        default=None, description="A literal value (never a secret)."
    )
    value_from: EnvVarSource | None = Field(default=None, description="Read from a Secret or ConfigMap key.")

    @model_validator(mode="after")
    def _value_or_source(self) -> EnvVar:
        if (self.value is None) == (self.value_from is None):
            raise ValueError(ENV_ONE_SOURCE_MESSAGE)
        if self.name in vllm_flags.RESERVED_ENV:
            raise ValueError(RESERVED_ENV_MESSAGE)
        if self.name in vllm_flags.SECRET_ENV and self.value is not None:
            raise ValueError(f"{self.name} {SECRET_LITERAL_MESSAGE}")
        return self


def _extra_arg(arg: str) -> str:
    problem = vllm_flags.extra_arg_problem(arg)
    if problem is not None:
        raise ValueError(problem)
    return arg


# Checked by the operator, the webhook and the CLI (pydantic), not by CEL: vLLM's spelling
# rules (underscores, `=`, dotted keys, abbreviations) are too costly for the API server's
# CEL budget over 64 arguments of up to 4 KiB.
ExtraArg = Annotated[ArgString, AfterValidator(_extra_arg)]


class ResourceRequirements(ApiModel):
    """CPU/memory for the vLLM container; GPUs are set by the plan."""

    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


HostKvCacheMode = Literal["off", "auto", "on"]


class HostKvCache(ApiModel):
    """A KV-cache tier in the serving pods' host memory: vLLM's CPU offloading keeps the KV
    blocks that fall out of GPU memory, so a later request with the same prefix reloads
    them over the GPU's host link instead of prefilling them again."""

    mode: HostKvCacheMode | None = Field(
        default=None,
        description="off: none. auto: on the tiers where the planner finds it pays (prefixes reused, "
        "reloading a prompt's KV faster than prefilling it, a GPU KV cache the reused prefixes "
        "outgrow). on: on every tier whose vLLM release has it. Empty: the operator's default "
        "(Helm serving.hostKvCache).",
    )
    size_gib: float | None = Field(
        default=None,
        gt=0,
        le=16_384,
        alias="sizeGiB",
        description="Host memory per replica (GiB, over all its GPUs); empty: the planner sizes it "
        "from the nodes' memory. Never more than the planner's budget for the node.",
    )


class Disaggregation(ApiModel):
    """Prefill on one tier, decode on another (vLLM's NixlConnector moves each request's KV
    cache between them)."""

    mode: Literal["off", "auto", "on"] = Field(
        default="off",
        description="off: every tier serves both phases. auto: the planner splits them where it pays "
        "(long prompts, a cheaper fleet, a transfer the TTFT SLO absorbs) and says why or why not. "
        "on: split on the best pair even where it does not pay.",
    )
    prefill_tiers: list[TierName] | None = Field(
        default=None, max_length=16, description="Tiers that may serve prefill; empty: any."
    )
    decode_tiers: list[TierName] | None = Field(
        default=None, max_length=16, description="Tiers that may serve decode; empty: any."
    )


class ServingSpec(ApiModel):
    """How vLLM is run."""

    image: ShortString | None = Field(default=None, description="vLLM image; operator default if empty.")
    vllm_version: VllmVersion | None = Field(
        default=None,
        description="The vLLM release the image runs (e.g. `0.11.0`), for images whose tag does "
        "not name one (`latest`, a digest, a custom build); wins over the tag. The planner models "
        "each release's memory accounting and defaults.",
    )
    prefix_caching: bool = Field(default=True, description="--enable-prefix-caching.")
    chunked_prefill: bool = Field(default=True, description="--enable-chunked-prefill.")
    speculative_decoding: SpeculativeDecoding | None = None
    extra_args: list[ExtraArg] | None = Field(
        default=None,
        max_length=64,
        description="Appended to vLLM's args. Flags the operator plans (--max-model-len, "
        "--tensor-parallel-size, ...) are refused with the field that sets them; --api-key is refused "
        "(use env VLLM_API_KEY from a Secret).",
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=64,
        description="Environment for vLLM: value, or valueFrom a secretKeyRef/configMapKeyRef. "
        "VLLM_API_KEY from a Secret turns on vLLM's API key; readiness sends it.",
    )
    resources: ResourceRequirements | None = None
    max_input_tokens: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Reject prompts longer than this (guardrail)."
    )
    host_kv_cache: HostKvCache | None = Field(
        default=None, description="A KV-cache tier in host memory (vLLM's CPU offloading)."
    )
    disaggregation: Disaggregation | None = Field(
        default=None, description="Prefill and decode on separate pools of (possibly different) tiers."
    )


# --- the whole spec ------------------------------------------------------------------


SCALE_TO_ZERO_NEEDS_HOLD_MESSAGE = (
    "scaling.allowScaleToZero needs a front door that holds requests: with frontDoor.mode service "
    "nothing holds the first request while a tier starts from zero, so it would fail; use mode gateway"
)


def _spec_schema_extra() -> dict[str, Any]:
    return schema_extra(
        cel(
            "!has(self.workload.routing) || self.workload.routing.all(k, self.tiers.exists(t, t.name == k))",
            "workload.routing names a tier that does not exist",
            ".workload.routing",
        ),
        cel(
            "(has(self.scaling) && self.scaling.allowScaleToZero) || self.tiers.all(t, t.minReplicas >= 1)",
            "minReplicas 0 needs scaling.allowScaleToZero: true",
            ".tiers",
        ),
        cel(
            "!(has(self.frontDoor) && has(self.frontDoor.mode) && self.frontDoor.mode == 'service') || "
            "!has(self.scaling) || !self.scaling.allowScaleToZero",
            SCALE_TO_ZERO_NEEDS_HOLD_MESSAGE,
            ".scaling.allowScaleToZero",
        ),
        cel(
            "!has(self.scaling) || !has(self.scaling.prewarm) || "
            "self.scaling.prewarm.all(w, !has(w.tier) || self.tiers.exists(t, t.name == w.tier))",
            "scaling.prewarm names a tier that does not exist",
            ".scaling.prewarm",
        ),
    )


class InferenceServiceSpec(ApiModel):
    """Desired state of an InferenceService: one model served from one or more GPU tiers."""

    model_config = ApiModel.model_config | {"json_schema_extra": _spec_schema_extra()}

    model: ModelSpec
    workload: WorkloadSpec
    tiers: list[TierSpec] = Field(
        min_length=1,
        max_length=16,
        description="Hardware tiers, in order of preference; names are unique.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    quantization: QuantizationPolicy = Field(
        default="auto",
        description="Weight quantization policy; auto picks per tier from the hardware. A pre-quantized "
        "checkpoint's own format is detected from its config.",
    )
    kv_cache_dtype: KvCacheDtype = Field(default="auto", description="KV-cache element type policy.")
    scaling: ScalingSpec | None = None
    cache: CacheSpec | None = None
    serving: ServingSpec | None = None
    front_door: FrontDoorSpec | None = Field(
        default=None,
        description="One endpoint for all tiers: HTTPRoute, InferencePool and endpoint picker "
        "(or plain Services). Empty uses the operator's default Gateway when it has one.",
    )

    @model_validator(mode="after")
    def _cross_field(self) -> InferenceServiceSpec:
        names = [tier.name for tier in self.tiers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tier names must be unique; repeated: {', '.join(duplicates)}")
        routing = self.workload.routing or {}
        unknown = sorted(set(routing) - set(names))
        if unknown:
            raise ValueError(f"workload.routing names a tier that does not exist: {', '.join(unknown)}")
        if sum(routing.values()) > 1.0 + 1e-9:
            raise ValueError("workload.routing shares must sum to at most 1")
        allow_zero = self.scaling is not None and self.scaling.allow_scale_to_zero
        zero_tiers = [tier.name for tier in self.tiers if tier.min_replicas == 0]
        if zero_tiers and not allow_zero:
            raise ValueError(
                f"minReplicas 0 needs scaling.allowScaleToZero: true (tiers: {', '.join(zero_tiers)})"
            )
        if allow_zero and self.front_door is not None and self.front_door.mode == "service":
            raise ValueError(SCALE_TO_ZERO_NEEDS_HOLD_MESSAGE)
        prewarm = self.scaling.prewarm if self.scaling and self.scaling.prewarm else []
        for window in prewarm:
            if window.tier is not None and window.tier not in names:
                raise ValueError(f"scaling.prewarm names a tier that does not exist: {window.tier}")
        return self
