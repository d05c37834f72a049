"""Which vLLM release a tier runs, and what that release picks and counts."""

from __future__ import annotations

import pytest

from inferfleet.planner.accounting import SAMPLER_BYTES_V0, SAMPLER_BYTES_V1, accounting
from inferfleet.planner.releases import (
    UNMODELLED_RESERVE_FRACTION,
    Version,
    engine_defaults,
    family_of,
    parse_version,
    resolve_release,
    version_from_image,
)


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("vllm/vllm-openai:v0.11.0", Version(0, 11, 0)),
        ("vllm/vllm-openai:0.6.4.post1", Version(0, 6, 4)),
        ("docker.io/vllm/vllm-openai:v0.10.1.1", Version(0, 10, 1)),
        ("rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250415", Version(0, 8, 3)),
        ("registry.local:5000/team/vllm-openai:v0.9.2-cu128", Version(0, 9, 2)),
        ("vllm/vllm-openai:latest", None),
        ("vllm/vllm-openai:nightly", None),
        ("registry.local:5000/vllm", None),  # a registry port is not a tag
        ("vllm/vllm-openai@sha256:" + "a" * 64, None),
        ("rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9", None),
    ],
)
def test_release_from_image_tag(image: str, expected: Version | None) -> None:
    assert version_from_image(image) == expected


def test_explicit_version_wins_over_the_tag() -> None:
    release = resolve_release("vllm/vllm-openai:v0.11.0", "0.6.4")
    assert release.version == Version(0, 6, 4) and release.family == "v0"
    assert "spec.serving.vllmVersion" in release.source and release.modelled
    assert parse_version("0.7.4.dev713+gb4961126") == Version(0, 7, 4)


def test_unknown_or_unmodelled_release_is_planned_conservatively_with_a_reason() -> None:
    unknown = resolve_release("vllm/vllm-openai:latest", None)
    assert not unknown.modelled and unknown.reserve_fraction == UNMODELLED_RESERVE_FRACTION
    assert "spec.serving.vllmVersion" in unknown.note and unknown.label == "unknown"
    future = resolve_release("vllm/vllm-openai:v1.4.0", None)
    assert not future.modelled and future.family == "v1-graph-reserve" and "newer" in future.note
    ancient = resolve_release(None, "0.1.7")
    assert not ancient.modelled and ancient.family == "v0-legacy"
    assert resolve_release("vllm/vllm-openai:v0.11.0", None).reserve_fraction == 0


def test_release_families_follow_the_profiling_changes() -> None:
    assert family_of(Version(0, 2, 7)) == "v0-legacy"
    assert family_of(Version(0, 6, 3)) == "v0-legacy"
    assert family_of(Version(0, 6, 4)) == "v0"
    assert family_of(Version(0, 8, 5)) == "v1-early"
    assert family_of(Version(0, 10, 1)) == "v1"
    assert family_of(Version(0, 20, 9)) == "v1"
    assert family_of(Version(0, 21, 0)) == "v1-graph-reserve"
    # 0.8.x ran pipeline parallelism on the V0 engine
    assert resolve_release(None, "0.8.3").engine(pipeline_parallel=2) == "v0"
    assert resolve_release(None, "0.9.2").engine(pipeline_parallel=2) == "v1"


def test_accounting_differs_where_the_releases_differ() -> None:
    v0 = accounting(resolve_release(None, "0.6.4"))
    early = accounting(resolve_release(None, "0.8.4"))
    v1 = accounting(resolve_release(None, "0.11.0"))
    graphs = accounting(resolve_release(None, "0.21.0"))
    assert v0.engine == "v0" and v0.sampler_bytes_per_logit == SAMPLER_BYTES_V0
    assert v1.sampler_bytes_per_logit == SAMPLER_BYTES_V1
    # 0.8-0.9 counted the CUDA context as non-torch memory
    assert early.non_torch_bytes(1, 1) > v1.non_torch_bytes(1, 1)
    assert v1.graph_reserve_bytes(1024, enforce_eager=False) == 0
    assert graphs.graph_reserve_bytes(1024, enforce_eager=False) > 0
    assert graphs.graph_reserve_bytes(1024, enforce_eager=True) == 0
    assert not v0.hybrid_pool and v1.hybrid_pool
    assert v0.mla_align_bytes == 0 and accounting(resolve_release(None, "0.7.3")).mla_align_bytes == 256
    assert accounting(resolve_release(None, "0.2.4")).torch_only_peak
    assert accounting(resolve_release(None, "0.2.5")).retained_allreduce


def test_engine_defaults_per_release_gpu_and_entry_point() -> None:
    v0 = engine_defaults(
        resolve_release(None, "0.6.4"), gpu_name="RTX-3090", gpu_memory_gib=23.6, max_model_len=20000
    )
    assert (v0.max_num_seqs, v0.max_num_batched_tokens, v0.chunked_prefill) == (256, 20000, False)
    long = engine_defaults(
        resolve_release(None, "0.6.4"), gpu_name="A100", gpu_memory_gib=79.2, max_model_len=65536
    )
    assert long.chunked_prefill and long.max_num_batched_tokens == 2048
    v1 = resolve_release(None, "0.11.0")
    h100 = engine_defaults(v1, gpu_name="H100-SXM-80GB", gpu_memory_gib=79.18, max_model_len=16000)
    a100 = engine_defaults(v1, gpu_name="A100-SXM-80GB", gpu_memory_gib=79.15, max_model_len=16000)
    mi300 = engine_defaults(v1, gpu_name="MI300X", gpu_memory_gib=191.98, max_model_len=16000)
    offline = engine_defaults(
        v1, gpu_name="H100-SXM-80GB", gpu_memory_gib=79.18, max_model_len=16000, entry_point="llm_class"
    )
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)
    # vLLM 0.11.0 has no 160 GiB rule (its arg_utils.py, catalog/data/vllm_releases.json)
    assert mi300.max_num_batched_tokens == 8192 and offline.max_num_batched_tokens == 16384
    early = engine_defaults(
        resolve_release(None, "0.8.1"), gpu_name="H100-SXM-80GB", gpu_memory_gib=79.18, max_model_len=8192
    )
    assert (early.max_num_seqs, early.max_num_batched_tokens) == (256, 2048)
    assert engine_defaults(
        resolve_release(None, "0.33.0"), gpu_name="H100", gpu_memory_gib=79.18, max_model_len=8192
    ).gpu_memory_utilization == pytest.approx(0.92)
