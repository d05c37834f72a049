"""Built-in catalogs: coverage of the examples, lookups, extra GPU files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferfleet.api import load_all
from inferfleet.api.spec import InlineGpu
from inferfleet.catalog import CatalogInvalid, default_catalogs, gpu_from_inline
from tests.conftest import example_paths

ISSUE_GPUS = [
    "T4",
    "A10G",
    "L4",
    "L40S",
    "A100-SXM-40GB",
    "A100-PCIE-40GB",
    "A100-SXM-80GB",
    "A100-PCIE-80GB",
    "H100-SXM-80GB",
    "H100-PCIE-80GB",
    "H100-NVL-94GB",
    "H200-SXM-141GB",
    "B200",
    "MI300X",
    "MI325X",
]


def test_default_catalogs_is_cached_and_immutable() -> None:
    catalogs = default_catalogs()
    assert default_catalogs() is catalogs
    with pytest.raises(TypeError):
        catalogs.gpus["x"] = catalogs.gpus["l4"]  # type: ignore[index]


@pytest.mark.parametrize("name", ISSUE_GPUS)
def test_issue_gpus_are_served_with_full_specs(name: str) -> None:
    gpu = default_catalogs().gpu(name)
    assert gpu is not None and gpu.served_by_vllm
    assert gpu.memory_gib > 10 and gpu.bandwidth_t_bs > 0.1 and gpu.bf16_tflops > 10
    assert gpu.resource_name in ("nvidia.com/gpu", "amd.com/gpu")
    assert gpu.memory_gib <= (gpu.nominal_gb or 1e9)  # drivers report less than the label


@pytest.mark.parametrize("name", ["Gaudi3", "Inferentia2", "TPU-v5e", "TPU-v6e"])
def test_non_vllm_accelerators_carry_an_explicit_reason(name: str) -> None:
    gpu = default_catalogs().gpu(name)
    assert gpu is not None and not gpu.served_by_vllm
    assert "not served by vLLM-GPU tiers" in (gpu.unsupported_reason or "")


def test_fp8_and_fp4_capability_follow_the_architecture() -> None:
    catalogs = default_catalogs()
    assert {n for n in ISSUE_GPUS if catalogs.gpu(n).fp8_native} == {  # type: ignore[union-attr]
        "L4",
        "L40S",
        "H100-SXM-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H200-SXM-141GB",
        "B200",
        "MI300X",
        "MI325X",
    }
    assert catalogs.gpu("B200").fp4_native  # type: ignore[union-attr]
    assert not catalogs.gpu("H100").fp4_native  # type: ignore[union-attr]


def test_every_example_resolves_its_gpus_and_model() -> None:
    catalogs = default_catalogs()
    for path in example_paths():
        for service in load_all(path.read_text(encoding="utf-8")):
            assert catalogs.model(service.spec.model.name) is not None, service.spec.model.name
            for tier in service.spec.tiers:
                assert isinstance(tier.gpu, str) and catalogs.gpu(tier.gpu) is not None, tier.gpu


def test_lookups_ignore_case_and_accept_aliases_and_short_names() -> None:
    catalogs = default_catalogs()
    assert catalogs.gpu("nvidia-h100-80gb") is catalogs.gpu("H100-SXM-80GB")
    assert catalogs.model("meta-llama/llama-3.1-8b-instruct") is catalogs.model("Llama-3.1-8B-Instruct")
    assert catalogs.model("Qwen/Qwen2-7B-Instruct") is catalogs.model("Qwen/Qwen2.5-7B-Instruct")
    assert catalogs.model("nobody/unknown-model") is None


def test_issue_model_families_are_built_in() -> None:
    catalogs = default_catalogs()
    for name in [
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.1-405B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-30B-A3B",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "google/gemma-2-9b-it",
        "google/gemma-3-27b-it",
        "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-120b",
        "microsoft/phi-4",
    ]:
        arch = catalogs.model(name)
        assert arch is not None and arch.parameters_billion > 0, name


def test_extra_gpu_file_adds_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "extra.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "gpus": [
                    {
                        "name": "RTX-PRO-6000",
                        "memoryGiB": 94.5,
                        "bandwidthTBs": 1.8,
                        "bf16Tflops": 500,
                        "family": "blackwell",
                    },
                    {
                        "name": "L4",
                        "memoryGiB": 22.5,
                        "bandwidthTBs": 0.3,
                        "bf16Tflops": 121,
                        "family": "ada",
                        "fp8Tflops": 242,
                    },
                ]
            }
        ),
        encoding="utf-8",
    )
    merged = default_catalogs().with_gpu_file(path)
    assert merged.gpu("rtx-pro-6000") is not None
    assert merged.gpu("L4").memory_gib == 22.5  # type: ignore[union-attr]
    assert default_catalogs().gpu("L4").memory_gib == 22.03  # type: ignore[union-attr]


def test_malformed_gpu_file_is_reported_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("gpus:\n  - name: X\n    memoryGiB: -1\n", encoding="utf-8")
    with pytest.raises(CatalogInvalid, match=r"bad\.yaml: gpus\[0\]"):
        default_catalogs().with_gpu_file(path)
    path.write_text("nope: 1\n", encoding="utf-8")
    with pytest.raises(CatalogInvalid, match="gpus"):
        default_catalogs().with_gpu_file(path)


def test_inline_gpu_gets_defaults_for_missing_figures() -> None:
    gpu = gpu_from_inline(InlineGpu(name="RTX-6000-Ada", memory_gib=47.5, fp8=True))
    assert gpu.inline and gpu.fp8_native and gpu.memory_gib == 47.5
    assert gpu.bandwidth_t_bs > 0 and gpu.interconnect == "pcie" and not gpu.fast_link(2)
    nvlink = gpu_from_inline(InlineGpu(name="X", memory_gib=80, interconnect="nvlink"))
    assert nvlink.fast_link(8) and not nvlink.fp8_native
