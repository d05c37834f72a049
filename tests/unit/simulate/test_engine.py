"""The replay engine on tiny synthetic traces whose answers can be worked out by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inferfleet.autoscaling.policy import (
    Recommendation,
    ScalingContext,
    ScalingState,
    TierFigures,
    TierRecommendation,
)
from inferfleet.autoscaling.simulate.engine import (
    ServingModel,
    SimConfig,
    SimTier,
    head_rate_rps,
    histogram_quantile,
    initial_replicas,
    simulate,
    token_buckets,
)
from inferfleet.autoscaling.simulate.report import summarize, window
from inferfleet.design.policy_config import PolicyConfig, TierPolicy
from tests.toolkit.traces import EPOCH_S, a_trace


def sim_config(
    *, slots: int, cold_start_s: float = 60.0, step_ms: float = 100.0, prefill_tps: float = 1e12
) -> SimConfig:
    tier = SimTier(
        figures=TierFigures(name="t", usable_rps=100.0, cold_start_s=cold_start_s, max_concurrency=slots),
        serving=ServingModel(
            prefill_tokens_per_s=prefill_tps, decode_step_base_ms=step_ms, decode_step_per_seq_ms=0.0
        ),
        slots=slots,
        cost_per_gpu_hour=2.0,
    )
    policy = PolicyConfig(tiers=(TierPolicy("t", min_replicas=1, max_replicas=10),), ttft_target_ms=2500.0)
    return SimConfig(tiers=(tier,), policy=policy, ttft_slo_ms=2500.0, itl_slo_ms=1000.0)


class Fixed:
    """A policy that asks for a fixed count and records what it saw."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.seen: list[ScalingContext] = []

    def __call__(
        self, ctx: ScalingContext, state: ScalingState | None
    ) -> tuple[Recommendation, ScalingState]:
        self.seen.append(ctx)
        tier = TierRecommendation(
            name="t", replicas=self.replicas, current=None, signal="hold", reason="fixed"
        )
        return Recommendation(
            now_s=ctx.now_s, tiers=(tier,), signal="hold", reason="fixed"
        ), state or ScalingState()


def test_the_replay_reads_only_the_clock_it_is_given() -> None:
    readings = iter([100.0, 102.5])
    replay = a_trace([1.0, 2.0], output_tokens=11, span_s=120.0)
    timed = simulate(replay, sim_config(slots=2), Fixed(1), "f", clock=lambda: next(readings))
    assert timed.wall_s == 2.5 and summarize(timed)["wallSeconds"] == 2.5
    untimed = simulate(replay, sim_config(slots=2), Fixed(1), "f")
    assert untimed.wall_s is None and summarize(untimed)["wallSeconds"] is None
    assert summarize(dataclasses.replace(untimed, wall_s=2.5)) == summarize(timed)  # the same replay


def test_littles_law_in_flight_equals_rate_times_time_in_system() -> None:
    # 2 req/s, evenly spaced; each request decodes 10 steps of 100 ms = 1 s, prefill ~0.
    arrivals = [0.25 + 0.5 * i for i in range(2400)]
    policy = Fixed(1)
    replay = a_trace(arrivals, output_tokens=11, span_s=1200.0)
    result = simulate(replay, sim_config(slots=8), policy, "fixed")
    running = [ctx.tiers[0].signals.running or 0.0 for ctx in policy.seen[2:70]]
    assert np.mean(running) == pytest.approx(2.0 * 1.0, rel=0.01)  # L = lambda x W
    summary = summarize(result)
    assert summary["sloAttainment"] == 1.0
    assert result.gpu_hours == pytest.approx(1200.0 / 3600.0)  # one replica for the span
    assert result.cost_usd == pytest.approx(2.0 * 1200.0 / 3600.0)


@pytest.mark.parametrize(("slots", "within"), [(1, 3), (2, 6)])
def test_single_burst_queues_in_fifo_order(slots: int, within: int) -> None:
    # Ten requests at once on one replica, each holding a slot for 1 s: with one slot
    # the k-th waits k seconds (TTFT 0..9 s), with two slots k // 2 seconds.
    result = simulate(
        a_trace([100.0] * 10, output_tokens=11, span_s=200.0), sim_config(slots=slots), Fixed(1), "f"
    )
    waits = np.sort(result.ttft_s)
    expected = np.asarray([k // slots for k in range(10)], dtype=np.float64)
    assert waits == pytest.approx(expected, abs=1e-6)
    assert summarize(result)["sloViolations"] == 10 - within


def test_a_new_replica_serves_only_after_its_cold_start() -> None:
    # Scaled to 2 at the first tick (t=15); cold start 60 s: the new replica is Ready at 75.
    # One slot each, 10 s per request. Requests at 70 and 71: the first takes the old
    # replica, the second waits for the new one (TTFT 4 s). At 90 and 90: both start at once.
    class Grow(Fixed):
        def __call__(
            self, ctx: ScalingContext, state: ScalingState | None
        ) -> tuple[Recommendation, ScalingState]:
            self.replicas = 1 if ctx.now_s == EPOCH_S else 2  # the initial fleet is one replica
            return super().__call__(ctx, state)

    config = sim_config(slots=1, cold_start_s=60.0, step_ms=1000.0)
    result = simulate(a_trace([70.0, 71.0, 90.0, 90.0], output_tokens=11, span_s=300.0), config, Grow(1), "f")
    assert result.ttft_s.tolist() == pytest.approx([0.0, 4.0, 0.0, 0.0], abs=1e-6)
    # Paid for from the moment it was asked for, not from Ready.
    assert result.gpu_hours == pytest.approx((300.0 + (300.0 - 15.0)) / 3600.0)
    assert result.scale_ups == 1


def test_a_removed_replica_finishes_its_work_and_is_paid_until_then() -> None:
    class Down(Fixed):
        def __call__(
            self, ctx: ScalingContext, state: ScalingState | None
        ) -> tuple[Recommendation, ScalingState]:
            self.replicas = 2 if ctx.now_s - EPOCH_S < 60 else 1
            return super().__call__(ctx, state)

    # Two replicas Ready at 0 (the initial fleet asks the policy first); a 100 s request on
    # each at t=50; at t=60 one replica goes, but finishes its request at t=150.
    config = sim_config(slots=1, step_ms=10_000.0)
    policy = Down(2)
    result = simulate(a_trace([50.0, 50.0], output_tokens=11, span_s=400.0), config, policy, "f")
    assert result.ttft_s.tolist() == pytest.approx([0.0, 0.0], abs=1e-6)
    assert result.gpu_hours == pytest.approx((400.0 + 150.0) / 3600.0)
    assert result.scale_downs == 1


def test_within_both_slos_counts_a_request_late_on_ttft_and_itl_once() -> None:
    # Decode steps of 100 ms + 100 ms per running sequence; ITL SLO 250 ms, TTFT 2.5 s,
    # two slots. At 10 a request decodes alone (200 ms steps); one at 10.5 joins it
    # (300 ms: ITL-late); at 30 one runs alone again. At 50 three arrive with 20 steps
    # each: the first two start at once (the second ITL-late) and the third waits for
    # the first to end at 54 (TTFT 4 s) and joins the second: late on both.
    config = sim_config(slots=2, step_ms=100.0)
    tier = config.tiers[0]
    tier = dataclasses.replace(tier, serving=dataclasses.replace(tier.serving, decode_step_per_seq_ms=100.0))
    config = dataclasses.replace(config, tiers=(tier,), itl_slo_ms=250.0)
    replay = a_trace(
        [10.0, 10.5, 30.0, 50.0, 50.0, 50.0], output_tokens=[11, 11, 11, 21, 21, 21], span_s=120.0
    )
    result = simulate(replay, config, Fixed(1), "f")
    summary = summarize(result)
    assert result.ttft_s.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.0, 4.0], abs=1e-6)
    assert summary["sloViolations"] == 1
    assert summary["itlAttainment"] == pytest.approx(3 / 6, abs=1e-6)
    assert summary["sloViolationsWithItl"] == 3  # not 4: the last is counted once
    assert summary["sloAttainmentWithItl"] == pytest.approx(3 / 6, abs=1e-6)
    first, second = window(result, replay.arrival_s, 0.0, 40.0), window(result, replay.arrival_s, 40.0, 120.0)
    assert (first["sloViolations"], first["sloViolationsWithItl"]) == (0, 1)
    assert (second["sloViolations"], second["sloViolationsWithItl"]) == (1, 2)


def test_waiting_signal_counts_the_queue() -> None:
    policy = Fixed(1)
    simulate(a_trace([20.0] * 12, output_tokens=101, span_s=60.0), sim_config(slots=2), policy, "f")
    at_30 = next(ctx for ctx in policy.seen if ctx.now_s - EPOCH_S == 30.0)
    assert at_30.tiers[0].signals.waiting == 10.0
    assert at_30.tiers[0].signals.running == 2.0


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    bounds = (1.0, 2.0, 4.0)
    assert histogram_quantile(0.5, [0, 10, 0, 0], bounds) == pytest.approx(1.5)
    assert histogram_quantile(0.99, [50, 50, 0, 0], bounds) == pytest.approx(1.98)
    assert histogram_quantile(0.99, [0, 0, 0, 5], bounds) == 4.0  # +Inf bucket: the last bound
    assert histogram_quantile(0.99, [0, 0, 0, 0], bounds) is None


def with_max_model_len(config: SimConfig, limit: int) -> SimConfig:
    tier = config.tiers[0]
    figures = dataclasses.replace(tier.figures, max_model_len=limit)
    return dataclasses.replace(config, tiers=(dataclasses.replace(tier, figures=figures),))


def test_prompts_at_or_beyond_max_model_len_are_answered_4xx_and_never_served() -> None:
    # 1 req/s: even seconds carry 100-token prompts, odd seconds 1,500-token ones.
    arrivals = [0.5 + i for i in range(600)]
    inputs = [100 if i % 2 == 0 else 1500 for i in range(600)]
    mixed = a_trace(arrivals, input_tokens=inputs, output_tokens=11, span_s=600.0)
    policy = Fixed(2)
    result = simulate(mixed, with_max_model_len(sim_config(slots=8), 1024), policy, "fixed")
    assert result.rejected == 300
    assert np.isinf(result.ttft_s[1::2]).all() and np.isfinite(result.ttft_s[0::2]).all()
    summary = summarize(result)
    assert summary["rejected"] == 300 and summary["sloAttainment"] == pytest.approx(0.5)
    # The engines see only what they serve: 4xx answers, and histograms of short prompts.
    signals = policy.seen[20].tiers[0].signals
    assert signals.rejected_rps == pytest.approx(0.5, abs=0.05)
    assert signals.request_rate_rps == pytest.approx(0.5, abs=0.05)
    assert signals.prompt_tokens_rps == pytest.approx(50.0, rel=0.1)
    assert signals.prompt_tokens is not None and signals.prompt_tokens.p99 <= 100.0


def test_outputs_stop_where_the_context_is_full() -> None:
    # A 900-token prompt with 500 tokens to generate under max-model-len 1,024: vLLM's
    # default max_tokens leaves room for 124, so decode takes 123 steps of 100 ms, not 499.
    policy = Fixed(1)
    result = simulate(
        a_trace([1.0], output_tokens=500, span_s=120.0, input_tokens=900),
        with_max_model_len(sim_config(slots=1, step_ms=100.0), 1024),
        policy,
        "fixed",
    )
    assert result.rejected == 0
    assert summarize(result)["sloAttainment"] == 1.0
    # Done 12.3 s after its first token, so the tick at 15 s sees nothing running (499
    # steps would run until 51 s), and the output histogram holds the 124 tokens served.
    seen = policy.seen[1].tiers[0].signals
    assert seen.running == 0.0
    assert seen.generation_tokens is not None and 100.0 < seen.generation_tokens.p50 <= 200.0


def test_token_histograms_report_vllm_buckets_as_percentiles() -> None:
    # Outputs of 11 tokens, prompts of 300: the 1-2-5 buckets put 300 in (200, 500].
    arrivals = [0.5 + 0.5 * i for i in range(240)]
    policy = Fixed(1)
    simulate(
        a_trace(arrivals, output_tokens=11, span_s=120.0, input_tokens=300),
        sim_config(slots=8),
        policy,
        "fixed",
    )
    signals = policy.seen[6].tiers[0].signals
    assert signals.prompt_tokens is not None and 200.0 < signals.prompt_tokens.p50 <= 500.0
    assert signals.generation_tokens is not None and 10.0 < signals.generation_tokens.p99 <= 20.0
    assert signals.generation_tokens_rps == pytest.approx(2.0 * 11, rel=0.1)


def test_token_buckets_are_vllms_1_2_5_series_up_to_max_model_len() -> None:
    assert token_buckets(1024) == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
    assert token_buckets(5000)[-2:] == (2000.0, 5000.0)


def test_the_common_start_is_sized_for_the_requests_vllm_serves() -> None:
    """Every policy starts from a fleet sized as if the service ran before t=0: for the
    first five minutes' requests some tier serves. A prompt at or beyond every tier's
    max-model-len is answered 400 and never runs; no fleet was ever sized for it."""
    base = sim_config(slots=8)
    tier = dataclasses.replace(
        base.tiers[0], figures=dataclasses.replace(base.tiers[0].figures, usable_rps=1.0, max_model_len=1000)
    )
    cfg = dataclasses.replace(
        base,
        tiers=(tier,),
        policy=dataclasses.replace(base.policy, headroom=0.0),
    )
    arrivals = [0.1 * i for i in range(3000)]  # 10 req/s for 300 s
    long_half = [5000 if i % 2 else 10 for i in range(3000)]  # every other prompt too long
    short = a_trace(arrivals, output_tokens=2, span_s=600.0, input_tokens=10)
    mixed = a_trace(arrivals, output_tokens=2, span_s=600.0, input_tokens=long_half)
    assert initial_replicas(short, cfg) == {"t": 10}
    assert initial_replicas(mixed, cfg) == {"t": 5}
    assert head_rate_rps(mixed, cfg) == pytest.approx(5.0)
    # A tier without a max-model-len serves every prompt: all of them count.
    unlimited = dataclasses.replace(
        cfg, tiers=(dataclasses.replace(tier, figures=dataclasses.replace(tier.figures, max_model_len=0)),)
    )
    assert head_rate_rps(mixed, unlimited) == pytest.approx(10.0)
