"""vLLM flags the operator sets itself, and where a user changes each one instead.

`serving.extraArgs` is appended to the planned command line. vLLM's parser keeps the
last occurrence of a flag, so an extra `--max-model-len` would silently replace the
planned one and the plan (memory, KV tokens, concurrency) would describe a server that
does not exist. Each planned flag is therefore refused in extraArgs with the field that
sets it. `render.vllm_args` emits exactly these flags (a test holds the two together).

vLLM's parser (`FlexibleArgumentParser`, vllm/utils/argparse_utils.py) also reads
`--flag=value`, `--flag_with_underscores`, dotted JSON keys (`--speculative-config.method`)
and argparse's unambiguous abbreviations (`--max-model` for `--max-model-len`); all of
those spell a planned flag too.
"""

from __future__ import annotations

_OVERRIDES = "spec.tiers[].overrides"
_FIXED = "fixed: "

# flag -> the field that sets it (what the error message points to)
PLANNED_FLAGS: dict[str, str] = {
    "--tensor-parallel-size": f"{_OVERRIDES}.tensorParallelSize",
    "--pipeline-parallel-size": f"{_OVERRIDES}.pipelineParallelSize",
    "--dtype": f"{_OVERRIDES}.dtype",
    "--quantization": f"{_OVERRIDES}.quantization (or spec.quantization)",
    "--kv-cache-dtype": f"{_OVERRIDES}.kvCacheDtype (or spec.kvCacheDtype)",
    "--gpu-memory-utilization": f"{_OVERRIDES}.gpuMemoryUtilization",
    "--max-model-len": f"{_OVERRIDES}.maxModelLen (or spec.serving.maxInputTokens)",
    "--max-num-seqs": f"{_OVERRIDES}.maxNumSeqs",
    "--max-num-batched-tokens": f"{_OVERRIDES}.maxNumBatchedTokens",
    "--block-size": f"{_OVERRIDES}.blockSize",
    "--enforce-eager": f"{_OVERRIDES}.enforceEager",
    "--enable-prefix-caching": "spec.serving.prefixCaching",
    "--no-enable-prefix-caching": "spec.serving.prefixCaching",
    "--enable-chunked-prefill": "spec.serving.chunkedPrefill",
    "--no-enable-chunked-prefill": "spec.serving.chunkedPrefill",
    "--speculative-config": "spec.serving.speculativeDecoding",
    "--enable-lora": "spec.model.adapters",
    "--max-loras": "spec.model.maxSimultaneousAdapters",
    "--max-lora-rank": "spec.model.adapters[].rank",
    "--lora-modules": "spec.model.adapters",
    "--served-model-name": "spec.model.servedModelName",
    "--model": "spec.model.name",
    "--revision": "spec.model.revision",
    "--download-dir": "spec.cache",
    "--load-format": "spec.model.source and spec.cache",
    "--kv-offloading-size": "spec.serving.hostKvCache",
    "--kv-offloading-backend": "spec.serving.hostKvCache",
    "--port": _FIXED + "every probe, Service and PodMonitor uses port 8000",
    "--distributed-executor-backend": _FIXED + "the operator runs multi-node replicas on ray",
}
SHORT_ALIASES: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-q": "--quantization",
    "-sc": "--speculative-config",
}
# Secrets on the command line are visible in the pod spec, in `ps` and in /proc.
SECRET_FLAGS = frozenset({"--api-key"})
SECRET_ENV = frozenset(
    {"VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
)
# The hardening owns these: the hub token is a mounted file (spec.model.credentialsSecretRef).
RESERVED_ENV = frozenset({"HF_TOKEN", "HF_TOKEN_PATH"})


def flag_name(arg: str) -> str | None:
    """The option an argument names as vLLM reads it (`--max_model_len=4` -> `--max-model-len`)."""
    if arg in SHORT_ALIASES:
        return SHORT_ALIASES[arg]
    if not arg.startswith("--") or len(arg) <= 2:
        return None
    name = arg.split("=", 1)[0].split(".", 1)[0]
    return "--" + name[2:].replace("_", "-")


def _matches(name: str, flag: str) -> bool:
    # argparse resolves an unambiguous prefix of a long option to that option.
    return flag == name or flag.startswith(name)


def extra_arg_problem(arg: str) -> str | None:
    """Why `arg` cannot be in serving.extraArgs, or None."""
    name = flag_name(arg)
    if name is None:
        return None
    # Messages name the option, never the argument: its value may be the secret itself.
    written = arg.split("=", 1)[0]
    if any(_matches(name, flag) for flag in SECRET_FLAGS):
        return (
            f"{written}: an API key on the command line is visible to anyone who can read the pod; "
            "set env VLLM_API_KEY with valueFrom.secretKeyRef instead (vLLM reads it the same way)"
        )
    planned = [flag for flag in PLANNED_FLAGS if _matches(name, flag)]
    if not planned:
        return None
    flag = name if name in PLANNED_FLAGS else planned[0]
    spelled = "" if name == flag else f" (vLLM reads {written!r} as {flag})"
    where = PLANNED_FLAGS[flag]
    if where.startswith(_FIXED):
        return f"{flag} is set by the operator{spelled} and cannot be changed: {where.removeprefix(_FIXED)}"
    return f"{flag} is set by the operator{spelled}; set {where} instead"
