"""The prefix-cache replay: Mooncake `hash_ids` read as prefix blocks (and refused when
hostile), each request's cached prefix by hand-worked examples, a host-tier hit's reload
in the replica's TTFT, and the replay of a prefix-heavy trace with and without the tier."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from inferfleet.autoscaling.policy import POLICIES, TierFigures
from inferfleet.autoscaling.simulate import prefix_cache
from inferfleet.autoscaling.simulate.engine import ServingModel, SimConfig, SimTier, simulate
from inferfleet.autoscaling.simulate.prefix_cache import KvCacheModel
from inferfleet.autoscaling.simulate.traces import PrefixBlocks, Trace, TraceError
from inferfleet.autoscaling.tracefiles.read import load_trace
from inferfleet.cli import COMMAND_MODULES, app
from inferfleet.design.policy_config import PolicyConfig, TierPolicy
from tests.conftest import EXAMPLES_DIR, REPO_ROOT

EXAMPLE = EXAMPLES_DIR / "rag-70b-host-kv.yaml"
RAG_TRACE = REPO_ROOT / "operator/inferfleet/autoscaling/simulate/data/rag-documents-synthetic.jsonl"
for _module in COMMAND_MODULES:  # register every subcommand, as main() does
    importlib.import_module(_module)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def blocks(*chains: list[int], block_tokens: int = 512) -> PrefixBlocks:
    starts = np.cumsum([0, *(len(c) for c in chains)]).astype(np.int64)
    ids = np.array([i for c in chains for i in c], dtype=np.int64)
    return PrefixBlocks(ids, starts, block_tokens)


# --- reading ------------------------------------------------------------------------------


def test_mooncake_hash_ids_become_each_requests_blocks_in_arrival_order(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 2000, "input_length": 1100, "output_length": 5, "hash_ids": [0, 7, 9]},
            {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 8]},
        ],
    )
    trace = load_trace(path)
    assert trace.prefix_blocks is not None and trace.prefix_blocks.block_tokens == 512
    found = trace.prefix_blocks
    chains = [found.ids[found.starts[i] : found.starts[i + 1]].tolist() for i in range(2)]
    # Renumbered, but equal where the file's ids are equal, in arrival order.
    assert trace.input_tokens.tolist() == [600, 1100]
    assert chains[0][0] == chains[1][0] and len(set(chains[0] + chains[1])) == 4
    assert [len(c) for c in chains] == [2, 3]


def test_a_trace_without_hash_ids_has_no_blocks(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 8]},
            {"timestamp": 5, "input_length": 600, "output_length": 3},
        ],
    )
    assert load_trace(path).prefix_blocks is None


@pytest.mark.parametrize(
    ("hashes", "message"),
    [
        ([0, "x"], "hash_ids must be a list of non-negative integers"),
        ([0, True], "hash_ids must be a list of non-negative integers"),
        ([-1], "hash_ids must be a list of non-negative integers"),
        ({"a": 1}, "hash_ids must be a list of non-negative integers"),
        ([0, 1, 2], "3 hash_ids for a 600-token prompt (at most 2 blocks of 512 tokens)"),
    ],
)
def test_hostile_hash_ids_are_refused_with_the_line(tmp_path: Path, hashes: object, message: str) -> None:
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0]},
            {"timestamp": 1, "input_length": 600, "output_length": 3, "hash_ids": hashes},
        ],
    )
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert f"t.jsonl:2: {message}" in str(caught.value)


def test_a_rate_scale_copy_shares_the_document_but_asks_its_own_question(tmp_path: Path) -> None:
    # Two requests about document [5, 6], each with its own question block (1 and 2).
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 0, "input_length": 1536, "output_length": 3, "hash_ids": [5, 6, 1]},
            {"timestamp": 9000, "input_length": 1536, "output_length": 3, "hash_ids": [5, 6, 2]},
        ],
    )
    trace = load_trace(path, rate_scale=3.0)
    found = trace.prefix_blocks
    assert found is not None and len(trace) == 6
    chains = [tuple(found.ids[found.starts[i] : found.starts[i + 1]].tolist()) for i in range(6)]
    assert len({chain[:2] for chain in chains}) == 1  # one document
    assert len({chain[2] for chain in chains}) == 6  # six questions


# --- the cache, by hand -----------------------------------------------------------------------


def test_a_repeated_prefix_is_found_in_gpu_memory_but_the_last_token_is_always_computed() -> None:
    model = KvCacheModel(gpu_tokens=10 * 512, host_tokens=0, kv_bytes_per_token=1.0, host_link_gbs=1.0)
    # The same 3-block prompt twice (1,536 tokens): the second finds 1,535 tokens cached.
    reuse = prefix_cache.replay(blocks([1, 2, 3], [1, 2, 3]), np.array([1536, 1536]), model)
    assert reuse.prefilled.tolist() == [1536, 1]
    assert (reuse.gpu_hit_tokens, reuse.host_hit_tokens) == (1535, 0)
    # A partial last block is never reused: 1,100 tokens are 2 full blocks and 76 tokens.
    partial = prefix_cache.replay(blocks([1, 2, 3], [1, 2, 4]), np.array([1100, 1100]), model)
    assert partial.prefilled.tolist() == [1100, 1100 - 1024]


def test_what_falls_out_of_gpu_memory_is_reloaded_from_the_host_tier_at_the_link_rate() -> None:
    # GPU: 2 blocks; host: 8. A (blocks 1, 2), then B (3, 4) pushes A out of GPU memory;
    # A again: both blocks from the host tier, 1,024 tokens at 2,000 bytes each over a
    # 1 GB/s link: 2.048 ms, and only A's last token is prefilled... of its 1,025 tokens.
    model = KvCacheModel(gpu_tokens=1024, host_tokens=4096, kv_bytes_per_token=2000.0, host_link_gbs=1.0)
    chains = blocks([1, 2, 9], [3, 4, 8], [1, 2, 7])
    reuse = prefix_cache.replay(chains, np.array([1025, 1025, 1025]), model)
    assert reuse.prefilled.tolist() == [1025, 1025, 1]
    assert reuse.reload_s.tolist() == pytest.approx([0.0, 0.0, 1024 * 2000 / 1e9])
    assert (reuse.gpu_hit_tokens, reuse.host_hit_tokens) == (0, 1024)
    # Without the tier the third request prefills it all again.
    no_tier = prefix_cache.replay(chains, np.array([1025, 1025, 1025]), KvCacheModel(1024, 0, 2000.0, 1.0))
    assert no_tier.prefilled.tolist() == [1025, 1025, 1025] and not no_tier.reload_s.any()


def test_the_host_tier_continues_where_the_gpu_run_ends_and_stops_at_the_first_miss() -> None:
    # GPU holds 1 block, host 3. After [1, 2, 3]: GPU {3}, host {1, 2, 3}. [1, 2, 5, 3]:
    # block 1 misses the GPU, 1-2 come from the host, 5 misses: 1,024 tokens reloaded.
    model = KvCacheModel(gpu_tokens=512, host_tokens=1536, kv_bytes_per_token=1.0, host_link_gbs=1.0)
    reuse = prefix_cache.replay(blocks([1, 2, 3], [1, 2, 5, 3]), np.array([1536, 2048]), model)
    assert reuse.prefilled.tolist() == [1536, 1024]
    assert reuse.host_hit_tokens == 1024


def test_a_host_tier_the_size_of_the_gpu_cache_adds_almost_nothing() -> None:
    """vLLM stores every block the GPU computes: a host tier no bigger than the GPU cache
    holds the same blocks (the planner's HOST_OVER_GPU rule)."""
    rng = np.random.default_rng(3)
    docs = [list(range(100 * d, 100 * d + 10)) for d in range(60)]
    picks = rng.zipf(1.3, size=2000) % 60
    chains = blocks(*(docs[p] for p in picks))
    prompts = np.full(len(picks), 10 * 512)

    def saved(host_blocks: int) -> float:
        reuse = prefix_cache.replay(chains, prompts, KvCacheModel(100 * 512, host_blocks * 512, 1.0, 1.0))
        return reuse.host_hit_tokens / reuse.prompt_tokens

    # A host tier the GPU cache's size holds nothing the GPU does not; 10% more holds
    # one document more; four times holds thirty more.
    assert saved(100) == 0.0
    assert saved(400) > 5 * saved(110) > 0.0


# --- the replay ---------------------------------------------------------------------------


def test_a_host_hit_reaches_the_first_token_after_its_reload_and_the_rest_of_its_prefill() -> None:
    tier = SimTier(
        figures=TierFigures(name="t", usable_rps=1.0, cold_start_s=60.0, max_concurrency=8.0),
        serving=ServingModel(1000.0, decode_step_base_ms=10.0, decode_step_per_seq_ms=0.0),
        slots=8,
        kv_cache=KvCacheModel(gpu_tokens=1024, host_tokens=4096, kv_bytes_per_token=1e6, host_link_gbs=1.0),
    )
    config = SimConfig(
        tiers=(tier,),
        policy=PolicyConfig(tiers=(TierPolicy("t", min_replicas=1, max_replicas=1),), ttft_target_ms=9000.0),
        ttft_slo_ms=9000.0,
        itl_slo_ms=100.0,
        timeline=False,
    )
    trace = Trace(
        name="hand",
        format="test",
        arrival_s=np.array([0.0, 20.0, 40.0]),
        input_tokens=np.array([1025, 1025, 1025], dtype=np.int64),
        output_tokens=np.array([2, 2, 2], dtype=np.int64),
        span_s=60.0,
        epoch_s=0.0,
        prefix_blocks=blocks([1, 2, 9], [3, 4, 8], [1, 2, 7]),
    )
    result = simulate(trace, config, POLICIES["inferfleet"], "inferfleet")
    # 1,025 tokens at 1,000/s; then 1,024 tokens x 1 MB over 1 GB/s (1.024 s) + 1 token.
    assert result.ttft_s.tolist() == pytest.approx([1.025, 1.025, 1.024 + 0.001])
    assert result.prefix_reuse["t"].host_hit_tokens == 1024


def test_compare_host_kv_cache_replays_the_prefix_heavy_example_without_and_with_the_tier() -> None:
    result = CliRunner().invoke(
        app,
        ["simulate", "-f", str(EXAMPLE), "--trace", str(RAG_TRACE), "--compare-host-kv-cache", "-o", "json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    without, with_tier = document["withoutHostTier"], document["withHostTier"]
    assert without["requests"] == with_tier["requests"] == len(load_trace(RAG_TRACE))
    assert document["hostKvCacheGiB"]["h100"] > 0
    assert without["prefixCache"]["h100"]["hostHitTokens"] == 0
    cached = with_tier["prefixCache"]["h100"]
    assert cached["hostHitTokens"] > 0 and cached["reloadP99Ms"] > 0
    assert with_tier["prefilledShare"] < without["prefilledShare"]
    # The GPU finds the same prefixes with or without the tier (it is a copy, not a move).
    assert cached["gpuHitTokens"] == without["prefixCache"]["h100"]["gpuHitTokens"]
    assert with_tier["ttftP99Ms"] <= without["ttftP99Ms"]
    assert document["verdict"].startswith("The host KV tier ")


def test_compare_host_kv_cache_needs_a_trace_with_prefixes_and_a_tier(tmp_path: Path) -> None:
    azure = REPO_ROOT / "operator/inferfleet/autoscaling/simulate/data/azure-llm-2023-code.csv"
    result = CliRunner().invoke(
        app, ["simulate", "-f", str(EXAMPLE), "--trace", str(azure), "--compare-host-kv-cache"]
    )
    assert result.exit_code != 0 and "needs prefix blocks" in result.output
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["serving"]["vllmVersion"] = "0.10.2"
    spec = tmp_path / "svc.yaml"
    spec.write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(
        app, ["simulate", "-f", str(spec), "--trace", str(RAG_TRACE), "--compare-host-kv-cache"]
    )
    assert result.exit_code != 0
    assert "no tier gets a host KV tier to compare" in result.output
    assert "has no --kv-offloading-size" in result.output
