"""Weight format and KV-cache dtype per tier, from hardware capability and policy.

Decision table (docs/concepts/planning.md): FP8 W8A8 + FP8 KV is the standard on GPUs with
FP8 tensor cores (Ada, Hopper, Blackwell, MI300); GPUs without them (Turing, Ampere)
keep 16-bit weights when the model fits with room and otherwise use weight-only
compression; an explicit policy or a tier override always wins; a pre-quantized
checkpoint is served in its own format.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.api.spec import InferenceServiceSpec, TierSpec
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.catalog.models import ModelArch, WeightFormat

FORMAT_NAMES = {
    "none": "16-bit weights",
    "fp8": "FP8",
    "int8": "INT8",
    "awq": "AWQ 4-bit",
    "gptq": "GPTQ 4-bit",
    "mxfp4": "MXFP4",
    "nvfp4": "NVFP4",
}


# Known-bad KV dtypes: (why, source). gpt-oss attends through sinks, which vLLM runs on
# NVIDIA only with FlashAttention 3 (issue #22325: "Sinks are only supported in
# FlashAttention 3"), and FA3 with an FP8 KV cache crashes at random (issue #17442).
FP8_KV_WITH_SINKS_ON_FA3 = (
    "gpt-oss attends through sinks, which vLLM serves on Hopper only with FlashAttention 3, and "
    "FlashAttention 3 with an FP8 KV cache crashes (vLLM issues #22325, #17442)"
)


@dataclass(frozen=True, slots=True)
class QuantChoice:
    weight_format: WeightFormat
    kv_cache_dtype: str  # auto, fp8, bf16, fp16
    reason: str
    kv_reason: str
    forced: bool  # set by override or explicit policy: no fallback to other formats
    problem: str | None = None  # a combination vLLM cannot run, in words


def known_bad_kv(arch: ModelArch, gpu: GpuSpec, kv_cache_dtype: str) -> str | None:
    """Why this KV dtype must not be used for this model on this GPU, or None."""
    if kv_cache_dtype == "fp8" and arch.attention_sinks and gpu.family == "hopper":
        return FP8_KV_WITH_SINKS_ON_FA3
    return None


def _kv_choice(
    spec: InferenceServiceSpec, tier: TierSpec, arch: ModelArch, gpu: GpuSpec, weight_format: str
) -> tuple[str, str]:
    override = tier.overrides.kv_cache_dtype if tier.overrides else None
    if override is not None:
        return (override, f"KV cache dtype {override}: set by the tier override")
    if spec.kv_cache_dtype != "auto":
        return (
            spec.kv_cache_dtype,
            f"KV cache dtype {spec.kv_cache_dtype}: the service's kvCacheDtype policy",
        )
    if gpu.fp8_native and weight_format != "none":
        bad = known_bad_kv(arch, gpu, "fp8")
        if bad is not None:
            return ("auto", f"KV cache in the model dtype, not FP8: {bad}")
        return ("fp8", "FP8 KV cache: native on this GPU, halves KV bytes per token and doubles concurrency")
    if weight_format == "none":
        return ("auto", "KV cache in the model dtype: 16-bit weights were chosen for quality")
    return ("auto", f"KV cache in the model dtype: {gpu.name} has no FP8 tensor cores")


def _hardware_note(gpu: GpuSpec, weight_format: str) -> str:
    if weight_format == "fp8" and not gpu.fp8_native:
        return (
            " (weight-only on this GPU: vLLM dequantizes FP8 through Marlin kernels; "
            "memory halves, math stays 16-bit)"
        )
    if weight_format in ("nvfp4", "mxfp4") and not gpu.fp4_native:
        return " (weight-only on this GPU: no FP4 tensor cores)"
    return ""


def choices(spec: InferenceServiceSpec, tier: TierSpec, arch: ModelArch, gpu: GpuSpec) -> list[QuantChoice]:
    """Candidate formats in order of preference; the planner takes the first that fits best."""
    override = tier.overrides.quantization if tier.overrides else None

    def make(fmt: WeightFormat, reason: str, forced: bool) -> QuantChoice:
        kv, kv_reason = _kv_choice(spec, tier, arch, gpu, fmt)
        bad = known_bad_kv(arch, gpu, kv)
        problem = f"kvCacheDtype {kv} cannot run here: {bad}; use auto" if bad else None
        return QuantChoice(fmt, kv, reason + _hardware_note(gpu, fmt), kv_reason, forced, problem)

    if override is not None and override != "auto":
        return [make(override, f"{FORMAT_NAMES[override]}: set by the tier override", True)]
    if arch.checkpoint_format != "none":
        fmt = arch.checkpoint_format
        return [make(fmt, f"{FORMAT_NAMES[fmt]}: the checkpoint is pre-quantized in this format", True)]
    policy = spec.quantization
    if policy == "none":
        return [
            make("none", "16-bit weights: the service's quantization policy is none (quality first)", True)
        ]
    if policy != "auto":
        note = ""
        if policy in ("awq", "gptq"):
            note = "; the model must point at a checkpoint quantized that way"
        return [make(policy, f"{FORMAT_NAMES[policy]}: the service's quantization policy{note}", True)]
    if gpu.fp8_native:
        return [
            make(
                "fp8",
                f"FP8 W8A8: {gpu.name} has FP8 tensor cores; standard production choice "
                "(half the weight bytes, faster prefill and decode)",
                False,
            )
        ]
    return [
        make(
            "none", f"16-bit weights: {gpu.name} has no FP8 tensor cores and the model fits with room", False
        ),
        make(
            "fp8",
            f"FP8 weight-only: {gpu.name} has no FP8 tensor cores, and 16-bit weights need more GPUs; "
            "an AWQ/INT8 checkpoint would also do",
            False,
        ),
    ]
