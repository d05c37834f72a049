"""The prefill/decode split replayed (autoscaling.simulate.disaggregated): a request's TTFT
is its prefill pool's plus the transfer plus its decode pool's wait; a decode engine
prefills nothing of a prompt prefilled elsewhere; short prompts never reach the prefill
pool; and `simulate --compare-disaggregated` sets both fleets side by side."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from inferfleet.api import load_all
from inferfleet.autoscaling.policy import POLICIES, TierFigures
from inferfleet.autoscaling.simulate import disaggregated
from inferfleet.autoscaling.simulate.engine import ServingModel, SimConfig, SimTier, simulate
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.cli import COMMAND_MODULES, app
from inferfleet.config import OperatorSettings
from inferfleet.design import design
from inferfleet.design.pd_split import SPLIT_MIN_UNCACHED_TOKENS
from inferfleet.design.policy_config import PolicyConfig, TierPolicy
from tests.conftest import EXAMPLES_DIR, REPO_ROOT

EXAMPLE = EXAMPLES_DIR / "rag-8b-disaggregated.yaml"
TRACE = REPO_ROOT / "operator/inferfleet/autoscaling/simulate/data/azure-llm-2023-code.csv"
for _module in COMMAND_MODULES:  # register every subcommand, as main() does
    importlib.import_module(_module)


def a_trace(inputs: list[int], outputs: list[int], gap_s: float = 20.0) -> Trace:
    n = len(inputs)
    return Trace(
        name="hand",
        format="test",
        arrival_s=np.arange(n, dtype=np.float64) * gap_s,
        input_tokens=np.array(inputs, dtype=np.int64),
        output_tokens=np.array(outputs, dtype=np.int64),
        span_s=n * gap_s,
        epoch_s=0.0,
    )


def test_a_decode_engine_prefills_nothing_of_a_prompt_prefilled_elsewhere() -> None:
    """One request, one warm replica prefilling 1,000 tokens/s: 4,000 tokens take 4 s to
    the first token; the same request arriving prefilled starts at once."""
    tier = SimTier(
        figures=TierFigures(name="t", usable_rps=1.0, cold_start_s=60.0, max_concurrency=8.0),
        serving=ServingModel(1000.0, decode_step_base_ms=10.0, decode_step_per_seq_ms=0.0),
        slots=8,
    )
    config = SimConfig(
        tiers=(tier,),
        policy=PolicyConfig(tiers=(TierPolicy("t", min_replicas=1, max_replicas=1),), ttft_target_ms=5000.0),
        ttft_slo_ms=5000.0,
        itl_slo_ms=100.0,
        timeline=False,
    )
    trace = a_trace([4000], [5])
    whole = simulate(trace, config, POLICIES["inferfleet"], "inferfleet")
    assert whole.ttft_s[0] == pytest.approx(4.0)
    prefilled = simulate(
        Trace(**{**trace.__dict__, "prefill_tokens": np.zeros(1, dtype=np.int64)}),
        config,
        POLICIES["inferfleet"],
        "inferfleet",
    )
    assert prefilled.ttft_s[0] == pytest.approx(0.0)


def designed_example() -> object:
    (service,) = load_all(EXAMPLE.read_text())
    return design(service, OperatorSettings())


def test_a_split_requests_ttft_is_both_pools_and_the_transfer() -> None:
    designed = designed_example()
    # Long prompts are split, a short one is prefilled where it decodes.
    trace = a_trace([8000, 300, 12000], [200, 200, 200])
    out = disaggregated.replay(trace, designed, POLICIES["inferfleet"])  # type: ignore[arg-type]
    assert out.split.tolist() == [True, False, True]
    assert len(out.prefill.ttft_s) == 2  # only the split prompts reach the prefill pool
    # The transfer scales with the prompt: the plan's 83.89 ms per mean prompt of 8,000.
    assert out.transfer_s[0] == pytest.approx(0.08389, rel=1e-3)
    assert out.transfer_s[2] == pytest.approx(0.08389 * 1.5, rel=1e-3)
    assert out.transfer_s[1] == 0.0
    # Prefill pool: 8,000 tokens at the L40S's 18,166 tokens/s on a warm replica.
    assert out.prefill.ttft_s[0] == pytest.approx(8000 / 18166.4, rel=1e-3)
    # End to end: prefill + transfer + the decode pool's wait (none: an idle replica).
    assert out.ttft_s[0] == pytest.approx(out.prefill.ttft_s[0] + out.transfer_s[0], rel=1e-6)
    # The short prompt's TTFT is its decode engine's own prefill: 300 tokens on the H100.
    assert out.ttft_s[1] == pytest.approx(300 / 49046.8, rel=1e-3)


def test_short_prompts_never_reach_the_prefill_pool() -> None:
    designed = designed_example()
    trace = a_trace([100, 200, SPLIT_MIN_UNCACHED_TOKENS - 1], [50, 50, 50])
    out = disaggregated.replay(trace, designed, POLICIES["inferfleet"])  # type: ignore[arg-type]
    assert not out.split.any()
    assert len(out.prefill.ttft_s) == 0
    assert np.isfinite(out.ttft_s).all()
    summary = disaggregated.summarize_split(out, trace)
    assert summary["split"]["splitRequests"] == 0
    # The prefill pool still costs its warm minimum.
    assert summary["split"]["prefillPool"]["gpuHours"] > 0


def test_compare_disaggregated_sets_both_fleets_side_by_side(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["simulate", "-f", str(EXAMPLE), "--trace", str(TRACE), "--compare-disaggregated", "-o", "json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert set(document) == {"colocated", "disaggregated", "verdict", "plan"}
    for side in ("colocated", "disaggregated"):
        assert document[side]["requests"] == 8819
        assert 0.0 <= document[side]["sloAttainmentWithItl"] <= 1.0
    split = document["disaggregated"]["split"]
    assert (split["prefillTier"], split["decodeTier"]) == ("l40s", "h100")
    pools = split["prefillPool"]["gpuHours"] + split["decodePool"]["gpuHours"]
    assert document["disaggregated"]["gpuHours"] == pytest.approx(pools, abs=0.002)
    assert set(document["colocated"]["meanReplicas"]) == {"h100", "l40s"}
    assert document["verdict"].split(":")[0] in (
        "the split pays on this trace",
        "the split does not pay on this trace",
        "a trade",
    )


def test_compare_disaggregated_says_why_there_is_nothing_to_compare(tmp_path: Path) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    del document["spec"]["tiers"][1]["overrides"]  # TP 2 on the L40S: no pair can pass KV
    spec = tmp_path / "svc.yaml"
    spec.write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(
        app, ["simulate", "-f", str(spec), "--trace", str(TRACE), "--compare-disaggregated"]
    )
    assert result.exit_code != 0
    assert "no prefill/decode split to compare" in result.output
    assert "tensor-parallel sizes differ" in result.output
