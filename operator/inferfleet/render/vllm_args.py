"""The vLLM command line for one tier: the plan, spelled as `vllm serve` flags.

Flag names and values follow vLLM 0.33 (its engine arguments, vllm/engine/arg_utils.py) and are
kept to ones that also parse on 0.11, the default image.
"""

from __future__ import annotations

import json

from inferfleet.api import InferenceService, TierPlan
from inferfleet.render.model_source import ModelSource

HTTP_PORT = 8000

# Plan quantization -> --quantization. fp8 is vLLM's online quantization and works on
# any BF16 checkpoint; the others name the kernel for a checkpoint already in that
# format. int8 (W8A8) checkpoints describe themselves (compressed-tensors), and vLLM
# refuses a --quantization that contradicts the checkpoint, so it gets no flag.
QUANTIZATION_FLAG: dict[str, str | None] = {
    "none": None,
    "fp8": "fp8",
    "awq": "awq_marlin",
    "gptq": "gptq_marlin",
    "mxfp4": "mxfp4",
    "nvfp4": "modelopt_fp4",
    "int8": None,
}
KV_CACHE_DTYPE_FLAG: dict[str, str | None] = {
    "auto": None,
    "fp8": "fp8",
    "bf16": "bfloat16",
    "fp16": "float16",
}
SPECULATIVE_METHOD = {"draft": "draft_model"}
# LoRA ranks vLLM accepts for --max-lora-rank.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def served_model_name(service: InferenceService) -> str:
    return service.spec.model.served_model_name or service.spec.model.name


def _lora_path(source: str) -> str:
    scheme, _, rest = source.partition("://")
    return rest if scheme == "hf" else ("/" + rest.lstrip("/") if scheme == "file" else source)


def _lora_args(service: InferenceService, source: ModelSource) -> list[str]:
    adapters = service.spec.model.adapters or []
    if not adapters:
        return []
    top_rank = max(adapter.rank for adapter in adapters)
    rank = next((r for r in LORA_RANKS if r >= top_rank), LORA_RANKS[-1])
    max_loras = service.spec.model.max_simultaneous_adapters or len(adapters)
    cached = dict(source.lora_paths)
    modules = [f"{a.name}={cached.get(a.name) or _lora_path(a.source)}" for a in adapters]
    return [
        "--enable-lora",
        "--max-loras",
        str(max_loras),
        "--max-lora-rank",
        str(rank),
        "--lora-modules",
        *modules,
    ]


def _speculative_args(service: InferenceService) -> list[str]:
    serving = service.spec.serving
    spec = serving.speculative_decoding if serving is not None else None
    if spec is None:
        return []
    config: dict[str, object] = {
        "method": SPECULATIVE_METHOD.get(spec.method, spec.method),
        "num_speculative_tokens": spec.num_speculative_tokens,
    }
    if spec.model is not None:
        config["model"] = spec.model
    return ["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]


def _toggle(flag: str, on: bool) -> str:
    return f"--{flag}" if on else f"--no-{flag}"


def vllm_args(
    service: InferenceService,
    tier: TierPlan,
    source: ModelSource,
    port: int = HTTP_PORT,
    role_args: tuple[str, ...] = (),
) -> list[str]:
    """Positional model plus every planned flag, in a fixed order (stable pod templates);
    `port` and `role_args` are a prefill/decode role's (render.pd_objects)."""
    serving = service.spec.serving
    args = [source.model_arg, "--served-model-name", served_model_name(service), "--port", str(port)]
    if source.revision:
        args += ["--revision", source.revision]
    if source.download_dir:
        args += ["--download-dir", source.download_dir]
    if source.load_format:
        args += ["--load-format", source.load_format]
    args += [
        "--tensor-parallel-size",
        str(tier.tensor_parallel_size),
        "--pipeline-parallel-size",
        str(tier.pipeline_parallel_size),
    ]
    if tier.dtype != "auto":
        args += ["--dtype", tier.dtype]
    quantization = QUANTIZATION_FLAG.get(tier.quantization, tier.quantization)
    if quantization:
        args += ["--quantization", quantization]
    kv_dtype = KV_CACHE_DTYPE_FLAG.get(tier.kv_cache_dtype, tier.kv_cache_dtype)
    if kv_dtype:
        args += ["--kv-cache-dtype", kv_dtype]
    args += [
        "--gpu-memory-utilization",
        f"{tier.gpu_memory_utilization:g}",
        "--max-model-len",
        str(tier.max_model_len),
        "--max-num-seqs",
        str(tier.max_num_seqs),
        "--max-num-batched-tokens",
        str(tier.max_num_batched_tokens),
        "--block-size",
        str(tier.block_size),
    ]
    prefix_caching = tier.prefix_caching and (serving is None or serving.prefix_caching)
    chunked_prefill = tier.chunked_prefill and (serving is None or serving.chunked_prefill)
    args += [_toggle("enable-prefix-caching", prefix_caching)]
    args += [_toggle("enable-chunked-prefill", chunked_prefill)]
    if tier.enforce_eager:
        args.append("--enforce-eager")
    if tier.nodes_per_replica > 1:
        args += ["--distributed-executor-backend", "ray"]
    if tier.host_kv_cache_gi_b > 0:
        # The host KV tier (planner.host_kv): GiB over the replica's TP ranks, vLLM's own
        # CPU offloading.
        args += ["--kv-offloading-size", f"{tier.host_kv_cache_gi_b:g}", "--kv-offloading-backend", "native"]
    args += [*role_args, *_lora_args(service, source), *_speculative_args(service)]
    if serving is not None and serving.extra_args:
        args += list(serving.extra_args)
    return args
