"""spec.scaling.capacitySlos: the learned capacity keeps the ITL SLO as well as the TTFT
SLO (ttftAndItl, what the declared SLOs imply: the default) or the TTFT SLO alone (ttft,
an explicit choice)."""

from __future__ import annotations

import datetime as dt

import pytest

from inferfleet.api import load_all
from inferfleet.api.spec import InferenceServiceSpec, ScalingSpec
from inferfleet.autoscaling.policy import (
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TokenQuantiles,
    decide,
)
from inferfleet.autoscaling.policy import capacity as capacity_rules
from inferfleet.autoscaling.policy.types import TierState
from inferfleet.config import OperatorSettings
from inferfleet.design.policy_config import PolicyConfig, ScalePacing, TierPolicy, resolve_policy
from tests.conftest import EXAMPLES_DIR
from tests.toolkit.step import tier_signals

T0 = dt.datetime(2024, 1, 3, 12, 0, tzinfo=dt.UTC).timestamp()
PERIOD = 15.0


def a_tier_state(running: float, rate: float) -> TierState:
    state = TierState()
    state.running_avg, state.rate_avg = running, rate
    return state


def test_the_itl_slo_sets_the_batch_where_its_prefill_budget_meets_the_slots() -> None:
    # 64 slots (target batch 64 - 0.5 x 8 = 60), steps 20 ms + 1 ms per sequence,
    # prefill 10,000 tokens/s for 2,000-token prompts (0.2 s each). Measured: 32 busy
    # slots at 2 req/s on one replica, a 16 s hold, 40 % of the GPU in prefill.
    figures = TierFigures(
        name="t",
        usable_rps=1.0,
        cold_start_s=60.0,
        max_concurrency=64,
        decode_step_base_ms=20.0,
        decode_step_per_seq_ms=1.0,
        prefill_tokens_per_s=10_000.0,
        mean_input_tokens=2000.0,
        mean_output_tokens=200.0,
    )
    state = a_tier_state(running=32.0, rate=2.0)
    # TTFT only: the hold carried to 60 busy slots (x 80 / 52 ms), prefill held under 80 %.
    hold_s = 16.0 * 80.0 / 52.0
    ttft_only = 60.0 / (hold_s * 0.6 + 60.0 * 0.2)
    assert capacity_rules.measured_capacity_rps(state, figures, 1) == pytest.approx(ttft_only)
    # At batch B the slots carry B / (16 x (20 + B) / 52 x 0.6 + 0.2 B) = 13 B / (48 + 5 B)
    # req/s; an ITL of 100 ms leaves prefill 1 - (20 + B) / 100 of the GPU, (80 - B) / 20
    # req/s. They meet at 5 B^2 - 92 B - 3840 = 0: B = 38.4, 2.08 req/s (a 58.4 ms step,
    # 41.6 % prefill: 58.4 / 0.584 = 100 ms).
    with_itl = capacity_rules.measured_capacity_rps(state, figures, 1, itl_target_ms=100.0)
    assert with_itl == pytest.approx(2.08, rel=1e-6)
    # ITL 60 ms: prefill gets (40 - B) / 12 req/s; 5 B^2 + 4 B - 1920 = 0 gives B = 19.2,
    # 1.7333 req/s (a 39.2 ms step, 34.7 % prefill: 60 ms).
    tight = capacity_rules.measured_capacity_rps(state, figures, 1, itl_target_ms=60.0)
    assert tight == pytest.approx(20.8 / 12.0, rel=1e-6)
    assert ttft_only > with_itl > tight  # the ITL SLO is what binds in both


def test_the_declared_itl_is_kept_unless_ttft_is_chosen() -> None:
    service = load_all((EXAMPLES_DIR / "llama-70b-chat.yaml").read_text(encoding="utf-8"))[0]
    itl_ms = service.spec.workload.slo.itl_p99_ms

    def with_spec_choice(choice: str | None) -> InferenceServiceSpec:
        scaling = (service.spec.scaling or ScalingSpec()).model_copy(update={"capacity_slos": choice})
        return service.spec.model_copy(update={"scaling": scaling})

    # Nothing set anywhere: the capacity keeps every SLO the spec declares, its ITL too.
    unset = OperatorSettings()
    assert unset.capacity_slos is None
    assert resolve_policy(unset, with_spec_choice(None)).itl_target_ms == itl_ms
    # An explicit ttft, from the operator or the spec, is a choice the default is not.
    ttft = OperatorSettings(capacity_slos="ttft")
    assert ttft != unset
    assert resolve_policy(ttft, with_spec_choice(None)).itl_target_ms is None
    assert resolve_policy(unset, with_spec_choice("ttft")).itl_target_ms is None
    # The spec wins over the operator setting, both ways.
    both = OperatorSettings(capacity_slos="ttftAndItl")
    assert resolve_policy(both, with_spec_choice("ttft")).itl_target_ms is None
    assert resolve_policy(ttft, with_spec_choice("ttftAndItl")).itl_target_ms == itl_ms


def test_a_spec_without_an_itl_written_keeps_the_api_default_itl() -> None:
    """workload.slo.itlP99Ms defaults to 100 ms (the CRD fills it in): that is the ITL the
    plan sizes for, and the one the capacity keeps."""
    service = load_all(SPEC_WITHOUT_ITL)[0]
    assert "itl_p99_ms" not in service.spec.workload.slo.model_fields_set
    assert resolve_policy(OperatorSettings(), service.spec).itl_target_ms == 100.0


def test_the_operator_setting_reads_unset_from_an_empty_variable() -> None:
    assert OperatorSettings.from_env({"INFERFLEET_CAPACITY_SLOS": ""}).capacity_slos is None
    assert OperatorSettings.from_env({"INFERFLEET_CAPACITY_SLOS": "ttft"}).capacity_slos == "ttft"


SPEC_WITHOUT_ITL = """
apiVersion: inferfleet.dev/v1alpha1
kind: InferenceService
metadata: {name: chat}
spec:
  model: {name: meta-llama/Llama-3.1-8B-Instruct}
  workload:
    inputTokens: {p50: 600, p95: 2000, p99: 4000}
    outputTokens: {p50: 200, p95: 600, p99: 1000}
    peakRequestsPerSecond: 5
    slo: {ttftP99Ms: 1500}
  tiers:
    - {name: l4, gpu: L4}
"""


# An 8B-on-L4-like roofline (the benchmark's plan): 24 slots, steps 42.4 + 0.85 ms per
# sequence, prefill 6,562 tokens/s; the plan holds an 80 ms ITL at 0.62 req/s for
# prompts of 2,041 tokens.
L4 = TierFigures(
    name="l4",
    usable_rps=0.62,
    cold_start_s=60.0,
    gpus_per_replica=1,
    max_concurrency=24.0,
    decode_step_base_ms=42.36,
    decode_step_per_seq_ms=0.85,
    prefill_tokens_per_s=6562.0,
    mean_input_tokens=2041.0,
    mean_output_tokens=236.0,
)
PROMPT_TOKENS = 2041.0
ITL_MS = 80.0


def steady_fleet(itl_target_ms: float | None, rate_rps: float = 6.0, minutes: int = 45) -> int:
    """Replicas after `minutes` of steady traffic whose engines report what a replica
    serves at the plan's mix: each request holds a slot for 12 s, well under the TTFT SLO."""
    policy = PolicyConfig(
        tiers=(TierPolicy("l4", min_replicas=1, max_replicas=40),),
        ttft_target_ms=1500.0,
        headroom=0.0,
        headroom_mode="fixed",
        itl_target_ms=itl_target_ms,
        scale_down=ScalePacing(300.0, 0.0, 2),
    )
    state: ScalingState | None = None
    replicas = 10
    for tick in range(int(minutes * 60 / PERIOD)):
        signals = tier_signals(
            ready_replicas=replicas,
            desired_replicas=replicas,
            waiting=0.0,
            running=min(24.0 * replicas, rate_rps * 12.0),
            ttft_p99_ms=600.0,
            request_rate_rps=rate_rps,
            prompt_tokens_rps=rate_rps * PROMPT_TOKENS,
            generation_tokens_rps=rate_rps * 236.0,
            rejected_rps=0.0,
            prompt_tokens=TokenQuantiles(1600.0, 5000.0, 6000.0),
            generation_tokens=TokenQuantiles(150.0, 470.0, 590.0),
        )
        context = ScalingContext(
            now_s=T0 + tick * PERIOD,
            policy=policy,
            tiers=(TierContext(L4, signals),),
            rate_history_rps=[rate_rps] * 120,
        )
        recommendation, state = decide(context, state)
        replicas = recommendation.replicas["l4"]
    return replicas


def test_with_the_itl_slo_the_fleet_keeps_decode_steps_within_it() -> None:
    """The same steady long-prompt load: keeping the TTFT alone, the learned capacity
    lets prefill take so much of each L4 that a step at the batch it runs is over the
    80 ms ITL; with the ITL SLO too, the fleet grows until it is within."""
    ttft_only = steady_fleet(itl_target_ms=None)
    with_itl = steady_fleet(itl_target_ms=ITL_MS)
    prefill_s = PROMPT_TOKENS / L4.prefill_tokens_per_s

    def step_ms(replicas: int) -> float:
        """A decode step on each replica: its batch (72 busy slots shared), slowed by its
        prefill share (6 req/s shared)."""
        batch = 72.0 / replicas
        share = 6.0 / replicas * prefill_s
        return (L4.decode_step_base_ms + L4.decode_step_per_seq_ms * batch) / (1.0 - share)

    assert step_ms(with_itl) <= ITL_MS
    assert step_ms(ttft_only) > ITL_MS
    assert with_itl > ttft_only
