"""Tensor-parallel degrees vLLM accepts for a model and weight format (pure)."""

from __future__ import annotations

from inferfleet.catalog.models import ModelArch


def _block_problem(arch: ModelArch, tp: int, *, expert_parallel: bool = False) -> str | None:
    """Block-wise FP8 (e.g. 128×128) needs every rank's slice of a weight to hold whole
    blocks: vLLM refuses to start with "The output_size of gate's and up's weight = 192
    is not divisible by weight quantization block_n = 128" otherwise. With expert
    parallelism (--enable-expert-parallel) each rank holds whole routed experts, so their
    intermediate size is not split."""
    assert arch.weight_block is not None
    block_n, block_k = arch.weight_block
    head_dim = arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim if arch.mla else arch.head_dim
    checks: list[tuple[str, int, int]] = [
        ("attention output (heads × head_dim)", arch.num_attention_heads * head_dim, block_n),
    ]
    if arch.moe is None or arch.moe.first_dense_layers:
        checks.append(("MLP intermediate size", arch.intermediate_size, block_n))
    if arch.moe is not None and not expert_parallel:
        checks.append(("MoE expert intermediate size", arch.moe.expert_intermediate_size, block_n))
        if arch.moe.shared_intermediate_size:
            checks.append(("shared-expert intermediate size", arch.moe.shared_intermediate_size, block_n))
    if arch.mla is None and arch.num_kv_heads >= tp:
        checks.append(("KV projection (kv heads × head_dim)", arch.num_kv_heads * arch.head_dim, block_k))
    for what, size, block in checks:
        if size % tp or (size // tp) % block:
            return (
                f"the checkpoint's {block_n}×{block_k} FP8 weight blocks cannot be split {tp} ways: "
                f"{what} {size} / {tp} = {size / tp:g}, not a multiple of {block}"
            )
    return None


def valid_tensor_parallel(
    arch: ModelArch, tp: int, weight_format: str = "none", *, expert_parallel: bool = False
) -> str | None:
    """Why vLLM would reject this TP degree for the model in this weight format, or None
    (`expert_parallel`: the run passes --enable-expert-parallel)."""
    if arch.num_attention_heads % tp:
        return f"{arch.num_attention_heads} attention heads are not divisible by TP={tp}"
    if arch.mla is None and arch.num_kv_heads % tp and tp % arch.num_kv_heads:
        return f"{arch.num_kv_heads} KV heads and TP={tp} do not divide one another"
    if arch.weight_block is not None and weight_format == arch.checkpoint_format:
        return _block_problem(arch, tp, expert_parallel=expert_parallel and arch.moe is not None)
    return None


def tp_options(
    arch: ModelArch, gpus_per_node: int, weight_format: str = "none", *, expert_parallel: bool = False
) -> list[int]:
    """Powers of two up to one node that vLLM accepts."""
    options: list[int] = []
    tp = 1
    while tp <= gpus_per_node:
        if valid_tensor_parallel(arch, tp, weight_format, expert_parallel=expert_parallel) is None:
            options.append(tp)
        tp *= 2
    return options
