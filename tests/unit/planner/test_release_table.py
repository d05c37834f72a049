"""The release table read from vLLM's own source (catalog/data/vllm_releases.json)."""

from __future__ import annotations

import csv
from pathlib import Path

from inferfleet.catalog.vllm_releases import device_class, release_facts, tabled_releases
from inferfleet.config import OperatorSettings
from inferfleet.planner.releases import (
    DEFAULT_VLLM_IMAGE,
    UTILIZATION_092_FROM,
    engine_defaults,
    parse_version,
    resolve_release,
    version_from_image,
)

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "hack" / "bench" / "data" / "vllm_startup_logs.csv"


def _named_releases() -> set[str]:
    settings = OperatorSettings()
    named = set()
    for image in (DEFAULT_VLLM_IMAGE, settings.vllm_image, settings.vllm_image_amd):
        version = version_from_image(image)
        assert version is not None, image
        named.add(str(version))
    with LOGS.open(encoding="utf-8") as handle:
        named.update(row["vllm_version"] for row in csv.DictReader(handle))
    return named


def test_every_release_the_catalog_names_is_in_the_table() -> None:
    # `hack/vllm_releases.py --releases X --merge` adds a missing one.
    missing = sorted(_named_releases() - set(tabled_releases()))
    assert not missing, f"run hack/vllm_releases.py --releases {' '.join(missing)} --merge"


def test_default_image_is_the_newest_tabled_release_with_its_family() -> None:
    release = resolve_release(DEFAULT_VLLM_IMAGE, None)
    assert release.modelled and release.family == "v1-graph-reserve"
    assert str(release.version) == tabled_releases()[-1] == "0.33.0"
    facts = release.facts
    assert facts is not None and facts.exact


def test_facts_of_the_default_release() -> None:
    facts = release_facts("0.33.0")
    assert facts is not None
    assert facts.gpu_memory_utilization == 0.92
    assert facts.graph_estimated_before_kv
    assert facts.sampler_warmup_after_kv and facts.model_runner_v2_default
    # 0.33's Model Runner V2 profiles the fp32 sampling pipeline its warm-up runs.
    assert facts.v2_profile_pays_fp32_logits and not facts.warmup_logits_unprofiled
    assert facts.group_larger_within_ratio == 1.5


def test_release_differences_read_from_source() -> None:
    old, mid, v2 = release_facts("0.11.0"), release_facts("0.12.0"), release_facts("0.28.0")
    assert old is not None and mid is not None and v2 is not None
    assert old.group_larger_within_ratio is None and mid.group_larger_within_ratio == 1.25
    assert not old.graph_estimated_before_kv and v2.graph_estimated_before_kv
    # 0.22-0.32 warm the fp32 sampler up after KV sizing without having profiled it.
    assert v2.warmup_logits_unprofiled
    assert old.gpu_memory_utilization == 0.9 and v2.gpu_memory_utilization == 0.92


def test_a_patch_release_the_table_lacks_uses_its_predecessor() -> None:
    facts = release_facts("0.28.1")
    assert facts is not None and facts.release == "0.28.0" and not facts.exact


def test_engine_defaults_follow_the_table() -> None:
    release = resolve_release("vllm/vllm-openai:v0.33.0", None)
    h200 = engine_defaults(release, gpu_name="H200-SXM-141GB", gpu_memory_gib=139.8, max_model_len=8192)
    # 0.33's threshold for the 16384-token chunk is 160 GiB: an H200 stays at 8192.
    assert (h200.max_num_seqs, h200.max_num_batched_tokens, h200.gpu_memory_utilization) == (1024, 8192, 0.92)
    a100 = engine_defaults(release, gpu_name="A100-SXM-80GB", gpu_memory_gib=79.15, max_model_len=8192)
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)
    mi300 = engine_defaults(release, gpu_name="MI300X", gpu_memory_gib=191.5, max_model_len=8192)
    assert mi300.max_num_batched_tokens == 16384


def test_device_classes() -> None:
    assert device_class("H100-SXM-80GB", 79.18) == "H100"
    assert device_class("A100-SXM-40GB", 39.4) == "A100-40GB"
    assert device_class("L4", 22.0) == "L4"
    assert device_class("RTX-3090", 23.6) == "L4"
    assert device_class("my-gpu", 96.0) == "H100"


def test_the_utilization_rule_for_untabled_releases_agrees_with_the_table() -> None:
    # The rule covers releases outside the table; on every tabled one it gives the
    # release's own default (0.9 through 0.19.1, 0.92 from 0.20.0).
    for version in tabled_releases():
        facts = release_facts(version)
        assert facts is not None and facts.gpu_memory_utilization is not None, version
        parsed = parse_version(version)
        assert parsed is not None, version
        rule = 0.92 if parsed >= UTILIZATION_092_FROM else 0.90
        assert rule == facts.gpu_memory_utilization, version


def test_model_runner_v2_facts_read_from_source() -> None:
    # 0.22-0.24: a list of architectures; 0.25.1-0.28: models without MoE layers plus a
    # list; 0.29+: every model. Its profile estimated no CUDA-graph pool up to 0.28.
    early, dense, every = release_facts("0.24.0"), release_facts("0.27.1"), release_facts("0.33.0")
    assert early is not None and dense is not None and every is not None
    assert early.v2_default_scope == "listed" and "Qwen3ForCausalLM" in early.v2_default_architectures
    assert (
        dense.v2_default_scope == "dense-or-listed"
        and "Qwen2MoeForCausalLM" in dense.v2_default_architectures
    )
    assert every.v2_default_scope == "all"
    assert not dense.v2_graph_estimate and every.v2_graph_estimate
    # output_bin_counts (int32) + prompt_bin_mask (one int32 per 32 entries) per slot × vocab
    assert dense.v2_penalty_state_bytes_per_logit == every.v2_penalty_state_bytes_per_logit == 4.125
    old = release_facts("0.11.0")
    assert old is not None and old.v2_default_scope is None
