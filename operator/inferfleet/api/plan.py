"""The plan: the contract of `inferfleet plan -o json` and of `status.plan`.

Figures are what vLLM itself reports at startup (see docs/concepts/planning.md):
`memoryGiB` is per GPU, `kvCacheTokens` is per replica (the whole engine),
`maxConcurrency` is kvCacheTokens / maxModelLen. Field names and meanings are a stable
contract other tools depend on; add fields, never rename or repurpose them.
"""

from __future__ import annotations

from pydantic import Field

from inferfleet.api.base import ApiModel


class MemoryBreakdownGiB(ApiModel):
    """Per-GPU memory as one vLLM worker logs it (GiB)."""

    weights: float = Field(description="'Model weights took' per GPU.")
    activations: float = Field(description="Torch activation peak during the profiling pass.")
    overhead: float = Field(description="Non-torch memory: CUDA context, NCCL buffers, CUDA graphs.")
    kv_cache: float = Field(description="'Available KV cache memory' per GPU.")
    cuda_graphs: float = Field(
        default=0.0,
        description="CUDA-graph memory the release takes out of the budget before sizing the KV cache "
        "(0 where graphs are captured after it).",
    )
    reserve: float = Field(
        default=0.0,
        description="Budget held back because the vLLM release is unknown or outside the modelled range.",
    )


class MeasuredKv(ApiModel):
    """KV capacity the running engine reported (`vllm:cache_config_info`), beside the estimate."""

    num_gpu_blocks: int = Field(description="Blocks the engine allocated (the smallest replica's).")
    block_size: int = Field(description="Tokens per block.")
    kv_cache_tokens: int = Field(description="num_gpu_blocks × block_size, per replica.")
    pods: int = Field(description="Serving pods that reported it.")
    estimated_kv_cache_tokens: int = Field(description="The planner's estimate, for comparison.")
    estimated_replicas_for_peak: int = Field(description="replicasForPeak from the estimate.")


class Performance(ApiModel):
    """Roofline serving figures of one replica, used by usable-RPS sizing and the simulator.

    Decode step time at batch size b is `decodeStepBaseMs + decodeStepPerSeqMs * b`:
    every step streams the weights once, and each running sequence adds its KV reads.
    """

    prefill_tokens_per_second: float = Field(description="Prompt tokens per second (compute bound).")
    decode_step_base_ms: float = Field(description="Decode step time with an empty batch (weights read).")
    decode_step_per_seq_ms: float = Field(description="Added decode step time per running sequence.")


class TierPlan(ApiModel):
    """The planner's answer for one tier."""

    name: str
    gpu: str = Field(description="Resolved GPU name.")
    feasible: bool
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_replica: int
    nodes_per_replica: int = Field(default=1, description=">1 means multi-node serving (LeaderWorkerSet).")
    quantization: str = Field(description="Weight format: none, fp8, int8, awq, gptq, mxfp4, nvfp4.")
    kv_cache_dtype: str = Field(description="auto (model dtype), fp8, bf16 or fp16.")
    dtype: str = Field(default="auto", description="Activation/unquantized weight dtype (--dtype).")
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int = 16
    enforce_eager: bool = False
    prefix_caching: bool = True
    chunked_prefill: bool = True
    memory_gi_b: MemoryBreakdownGiB = Field(alias="memoryGiB")
    kv_cache_tokens: int = Field(description="Engine KV capacity in tokens ('GPU KV cache size').")
    max_concurrency: float = Field(description="kvCacheTokens / maxModelLen, as vLLM prints it.")
    concurrency_at_p95: float = Field(
        default=0.0, description="Requests whose P95 context fit in KV at once (capped by maxNumSeqs)."
    )
    usable_rps: float = Field(description="Requests/s one replica serves within the SLO.")
    replicas_for_peak: int = Field(description="Replicas for the workload's peak RPS with safety factor.")
    cold_start_seconds: float = Field(
        description="Pod start to Ready of the next replica, what the front door's hold and the "
        "autoscaler's lead time count on: firstStartSeconds, or warmStartSeconds once every eligible node "
        "holds the tier's compile cache (status only; compileCacheWarm says which). Estimated; measured "
        "once pods have shown it."
    )
    first_start_seconds: float | None = Field(
        default=None,
        description="Pod start to Ready of a replica that compiles (the first on its node, or no compile "
        "cache kept); estimated, or the median measured on such pods.",
    )
    warm_start_seconds: float | None = Field(
        default=None,
        description="Pod start to Ready of a replica whose node holds the tier's compile cache; null where "
        "the node cache keeps none for the tier. Estimated, or the median measured on such pods.",
    )
    compile_cache_warm: bool = Field(
        default=False,
        description="Every eligible node of the tier has shown it holds the tier's compile cache, so "
        "coldStartSeconds is the warm-start figure (status only).",
    )
    cost_per_million_tokens_usd: float | None = Field(
        default=None, description="GPU cost per million served tokens at usable RPS."
    )
    performance: Performance | None = None
    vllm_release: str = Field(default="unknown", description="The vLLM release the memory figures model.")
    release_family: str = Field(default="", description="That release's memory-accounting family.")
    num_gpu_blocks: int = Field(default=0, description="KV blocks per replica ('# GPU blocks').")
    load_peak_gi_b: float = Field(
        default=0.0,
        alias="loadPeakGiB",
        description="Per-GPU memory while the weights load (a 16-bit checkpoint quantized online loads "
        "at 16 bits first); must fit the GPU.",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Objectives this tier cannot meet as planned (latency SLOs), with the numbers.",
    )
    measured_kv: MeasuredKv | None = Field(
        default=None, description="KV capacity measured from the running engine, once pods are up."
    )
    host_kv_cache_gi_b: float = Field(
        default=0.0,
        alias="hostKvCacheGiB",
        description="Host memory per replica holding KV blocks GPU memory evicted (vLLM's CPU "
        "offloading); 0: no host tier. Reachable by a reload over the host link, not decoded from.",
    )
    host_kv_cache_tokens: int = Field(
        default=0,
        description="Tokens of KV the host tier holds per replica, beside kvCacheTokens: prefixes a "
        "request reloads instead of prefilling. maxConcurrency counts GPU memory only.",
    )
    reasons: list[str] = Field(description="Why each choice was made, in words.")

    @property
    def infeasible_reason(self) -> str:
        """Why the tier cannot serve; the planner puts this reason first."""
        if self.feasible:
            return ""
        return self.reasons[0] if self.reasons else "infeasible"


class DisaggregationPlan(ApiModel):
    """Prefill on one tier, decode on another (planner.disaggregation): the pools, the P:D
    ratio in GPUs and the KV transfer a request pays; `enabled` false says why not.
    `deployed`: the operator runs the two pools (design.pd_split); `enabled` without
    it is advice, and the last reason says what stops it."""

    enabled: bool
    deployed: bool = Field(default=False, description="The operator runs the prefill and decode pools.")
    prefill_tier: str | None = None
    decode_tier: str | None = None
    prefill_replicas: int = 0
    decode_replicas: int = 0
    ratio: str | None = Field(default=None, description="Prefill GPUs : decode GPUs, at the peak.")
    transfer_ms: float | None = Field(default=None, description="A mean prompt's KV over the network (ms).")
    reasons: list[str] = Field(default_factory=list)


class Plan(ApiModel):
    """A whole InferenceService's plan: one entry per tier, in spec order."""

    name: str
    tiers: list[TierPlan]
    disaggregation: DisaggregationPlan | None = Field(
        default=None, description="Prefill/decode pools, when the spec asks whether they pay."
    )

    def tier(self, name: str) -> TierPlan:
        for tier_plan in self.tiers:
            if tier_plan.name == name:
                return tier_plan
        raise KeyError(name)

    @property
    def feasible_tiers(self) -> list[TierPlan]:
        return [tier_plan for tier_plan in self.tiers if tier_plan.feasible]
