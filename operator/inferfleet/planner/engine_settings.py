"""vLLM engine settings that do not depend on the parallel layout."""

from __future__ import annotations

from inferfleet.api.spec import TierOverrides
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch
from inferfleet.planner.units import round_up
from inferfleet.planner.workload import TierWorkload

# Leave 10% of the GPU outside vLLM's budget for what is allocated after profiling
# (CUDA graphs: 1-3 GiB per GPU in the releases that capture them late; NCCL growth);
# offline tiers take 92%, vLLM's own newer default, since a restart costs no SLO.
ONLINE_GPU_MEMORY_UTILIZATION = 0.90
OFFLINE_GPU_MEMORY_UTILIZATION = 0.92
# max-model-len is rounded up to this many tokens to leave a small margin.
MAX_MODEL_LEN_MULTIPLE = 1024
# vLLM's own default chunk budget (hack/bench/data/README.md lists the sources): 8192 on H100-class
# GPUs (≥70 GiB, not A100), 16384 at ≥160 GiB, 2048 elsewhere.
LARGE_GPU_GIB = 70.0
HUGE_GPU_GIB = 160.0


def choose_dtype(arch: ModelArch, gpu: GpuSpec, overrides: TierOverrides) -> tuple[str, int, str | None]:
    """(--dtype value, activation bytes, reason or None when `auto` is right)."""
    if overrides.dtype is not None:
        size = 4 if overrides.dtype == "float32" else 2
        return (overrides.dtype, size, f"dtype {overrides.dtype}: set by the tier override")
    if not gpu.bf16_supported and arch.torch_dtype == "bfloat16":
        return (
            "float16",
            2,
            f"dtype float16: {gpu.name} has no BF16 support (vLLM fails to start with bfloat16)",
        )
    return ("auto", arch.dtype_bytes, None)


def gpu_memory_utilization(workload: TierWorkload, overrides: TierOverrides) -> tuple[float, str]:
    if overrides.gpu_memory_utilization is not None:
        return (overrides.gpu_memory_utilization, "set by the tier override")
    if workload.online:
        return (
            ONLINE_GPU_MEMORY_UTILIZATION,
            "leaves 10% of each GPU for CUDA graphs and allocator growth outside vLLM's budget",
        )
    return (OFFLINE_GPU_MEMORY_UTILIZATION, "offline tier: a tighter margin only risks a restart, not an SLO")


def max_model_len(workload: TierWorkload, arch: ModelArch, overrides: TierOverrides) -> tuple[int, str]:
    if overrides.max_model_len is not None:
        return (overrides.max_model_len, "set by the tier override")
    wanted = workload.p99_context_tokens
    source = "P99 input + P99 output"
    if workload.max_input_tokens is not None and workload.max_input_tokens + workload.output_p99 > wanted:
        wanted = workload.max_input_tokens + workload.output_p99
        source = "serving.maxInputTokens + P99 output"
    length = round_up(wanted, MAX_MODEL_LEN_MULTIPLE)
    if length > arch.max_position_embeddings:
        return (
            arch.max_position_embeddings,
            f"{source} ({wanted}) exceeds the model's {arch.max_position_embeddings}-token context; "
            "capped there",
        )
    return (length, f"guardrail from {source} = {wanted}, rounded up to {MAX_MODEL_LEN_MULTIPLE}")


def block_size(arch: ModelArch, gpu: GpuSpec, overrides: TierOverrides) -> int:
    if overrides.block_size is not None:
        return overrides.block_size
    # MLA backends pick their own page: FlashMLA 64 on Hopper, CUTLASS MLA 128 on
    # Blackwell (vLLM's attention backends choose it); everything else uses 16.
    if arch.mla is not None and gpu.family == "hopper":
        return 64
    if arch.mla is not None and gpu.family == "blackwell":
        return 128
    return 16


def vllm_default_batched_tokens(gpu: GpuSpec) -> int:
    if gpu.memory_gib >= HUGE_GPU_GIB:
        return 16384
    if gpu.memory_gib >= LARGE_GPU_GIB and gpu.family != "ampere":
        return 8192
    return 2048
