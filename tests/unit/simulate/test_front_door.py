"""The simulator replays the front door the renderer makes: hold at zero and its TTL, the
wake, the length filter, route weights, and KV taken per request length."""

from __future__ import annotations

import dataclasses

import numpy as np

from inferfleet.autoscaling.policy import decide
from inferfleet.autoscaling.simulate.engine import SimConfig, SimResult, simulate
from inferfleet.autoscaling.simulate.setup import build_config
from inferfleet.autoscaling.simulate.traces import Trace
from inferfleet.config import OperatorSettings
from tests.toolkit import ServiceBuilder, a_service
from tests.toolkit.design import designed
from tests.toolkit.traces import a_trace, bursts

SETTINGS = OperatorSettings(gateway_name="inference-gateway")
# Two tiers that may scale to zero behind the front door.
CHAT = (
    a_service("chat")
    .model("meta-llama/Llama-3.1-8B-Instruct")
    .workload(
        inputTokens={"p50": 500, "p95": 1500, "p99": 3000},
        outputTokens={"p50": 100, "p95": 200, "p99": 300},
        peakRequestsPerSecond=4,
    )
    .tiers(
        {"name": "l4", "gpu": "L4", "minReplicas": 0, "maxReplicas": 4, "costPerGpuHour": 0.8},
        {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 0, "maxReplicas": 2, "costPerGpuHour": 1.6},
    )
    .with_spec(scaling={"allowScaleToZero": True})
)


def config(chat: ServiceBuilder, settings: OperatorSettings = SETTINGS) -> SimConfig:
    service = chat.service()
    return build_config(designed(service, settings))


def first_after_idle(result: SimResult, trace: Trace, starts: list[float]) -> list[float]:
    index = np.searchsorted(trace.arrival_s, starts)
    return [float(result.ttft_s[i]) for i in index]


def test_the_first_request_after_idle_is_held_and_served_within_cold_start_plus_margin() -> None:
    cfg = config(CHAT)
    assert cfg.front_door is not None and len(cfg.front_door.pools) == 1
    # Hours apart (the fleet is at zero before each), and off the autoscaler's tick grid.
    starts = [7207.3, 14_411.9, 21_603.1]
    trace = bursts(starts)  # 12 requests each, within one cold start
    result = simulate(trace, cfg, decide, "inferfleet")
    # The picker holds up to its queue limit (the pinned router's maxRequests) and refuses
    # the rest of the burst at once (503); none of what it held is dropped.
    (pool,) = cfg.front_door.pools
    assert 1 <= pool.queue_limit < 12
    assert result.held == 3 * pool.queue_limit and result.held_expired == 0
    assert result.shed == len(trace) - result.held
    assert np.count_nonzero(np.isfinite(result.ttft_s)) == result.held
    cold = {tier.figures.name: tier.figures.cold_start_s for tier in cfg.tiers}
    margin = cfg.policy.cold_start_margin_s
    for ttft in first_after_idle(result, trace, starts):
        # Held until the woken tier is Ready: its cold start, plus at most one sync period to
        # notice the queue, well within the hold margin.
        assert max(cold.values()) + margin >= ttft >= min(cold.values())
    # The idle hours cost nothing: the fleet was at zero between the bursts.
    assert result.gpu_hours < 3 * (max(cold.values()) + 3600.0) / 3600.0 * 8


def test_a_saturated_pool_sheds_at_once_and_a_pool_at_zero_still_holds_its_first_request() -> None:
    # One L4 replica, no more: 50 requests/s of the declared mix for 30 s is far beyond it.
    warm = CHAT.only_tier("l4", "L4", min_replicas=1, max_replicas=1).with_spec(
        scaling={"allowScaleToZero": False}
    )
    cfg = config(warm)
    (pool,) = cfg.front_door.pools
    assert pool.hold_s >= 120  # the hold is still the cold start's, for a pool at zero
    flood = bursts([600.0], per_burst=1500, gap_s=0.02, prompt_tokens=500, output_tokens=100)
    result = simulate(flood, cfg, decide, "inferfleet")
    served = result.ttft_s[np.isfinite(result.ttft_s)]
    # What the replica cannot start soon is refused at once (429), never queued for the
    # hold; what it takes is answered within the TTFT SLO.
    assert result.shed > len(flood) // 2 and result.held == 0
    assert result.served == len(flood) - result.shed
    assert served.max() <= cfg.ttft_slo_ms / 1000.0
    # The same limit at zero: the first request after idle is held through the cold start.
    cold = config(CHAT)
    burst = simulate(bursts([7207.3], per_burst=3), cold, decide, "inferfleet")
    assert burst.held >= 1 and np.isfinite(burst.ttft_s[0])


def test_a_hold_shorter_than_the_cold_start_drops_what_it_held() -> None:
    cfg = config(CHAT.with_spec(frontDoor={"holdSeconds": 30}))
    assert all(tier.figures.cold_start_s > 45 for tier in cfg.tiers)
    result = simulate(bursts([7200.0], per_burst=5), cfg, decide, "inferfleet")
    assert result.held == 5 and result.held_expired == 5  # counted as failures
    assert not np.isfinite(result.ttft_s).any()


def test_without_a_front_door_the_requests_after_idle_are_refused() -> None:
    # The same spec behind plain Services (validation refuses scale to zero there; this is
    # why): the Service has no endpoint, every request of the burst is refused at once, and
    # with no pod to report a queue nothing wakes a tier.
    cfg = config(CHAT, OperatorSettings())
    assert cfg.front_door is None
    result = simulate(bursts([7207.3], per_burst=5, span_s=7800.0), cfg, decide, "inferfleet")
    assert result.held == 0 and result.unroutable == 5
    assert not np.isfinite(result.ttft_s).any()


def test_prompts_no_tier_can_take_get_vllms_400_and_are_counted() -> None:
    l4 = {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4, "overrides": {"maxModelLen": 4096}}
    cfg = config(CHAT.tiers(l4).with_spec(scaling={"allowScaleToZero": False}))
    prompts = [800, 5000, 800, 4096, 4095]
    result = simulate(bursts([60.0], per_burst=5, prompt_tokens=prompts), cfg, decide, "inferfleet")
    assert result.rejected == 2  # 5000 and 4096 tokens (vLLM refuses max-model-len and more)
    assert np.isfinite(result.ttft_s[[0, 2, 4]]).all() and not np.isfinite(result.ttft_s[[1, 3]]).any()


def test_in_a_share_pool_a_long_prompt_overflows_to_a_tier_that_can_take_it() -> None:
    tiers = [
        {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4, "overrides": {"maxModelLen": 2048}},
        {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 1, "maxReplicas": 2},
    ]
    chat = CHAT.tiers(*tiers).with_spec(scaling={"allowScaleToZero": False})
    cfg = config(chat.workload(routing={"l4": 1.0}))
    assert cfg.front_door is not None
    weights = {pool.name: pool.weight for pool in cfg.front_door.pools}
    assert weights == {"chat-l4": 1000.0, "chat-a100": 0.0}
    prompts = [500] * 6 + [3000] * 6
    result = simulate(bursts([60.0], per_burst=12, prompt_tokens=prompts), cfg, decide, "inferfleet")
    assert result.rejected == 0 and np.isfinite(result.ttft_s).all()


def test_without_a_front_door_a_long_prompt_sent_to_a_short_tier_gets_vllms_400() -> None:
    tiers = [
        {"name": "l4", "gpu": "L4", "minReplicas": 2, "maxReplicas": 2, "overrides": {"maxModelLen": 2048}},
        {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 2, "maxReplicas": 2},
    ]
    cfg = config(CHAT.tiers(*tiers).with_spec(scaling={"allowScaleToZero": False}), OperatorSettings())
    long_prompts = bursts([60.0], per_burst=200, gap_s=0.05, prompt_tokens=3000)
    result = simulate(long_prompts, cfg, decide, "inferfleet")
    # kube-proxy spreads over the four pods: about half the long prompts land on L4.
    assert 60 <= result.rejected <= 140


def test_a_long_context_takes_more_of_a_replicas_kv_cache() -> None:
    one_l4 = CHAT.only_tier("l4", "L4", min_replicas=1, max_replicas=1)
    base = config(one_l4.with_spec(scaling={"allowScaleToZero": False}))
    (tier,) = base.tiers
    assert tier.kv_tokens_per_slot > 0
    slots, share = tier.slots, tier.kv_tokens_per_slot
    arrivals = [1.0] * slots
    short = a_trace(arrivals, input_tokens=100, output_tokens=50, span_s=600.0, name="kv")
    long_prompt = int(share * 2)  # each needs about three slots' share of the KV cache
    long = dataclasses.replace(short, input_tokens=np.full(slots, long_prompt, dtype=np.int64))
    fits = simulate(short, base, decide, "inferfleet")
    crowded = simulate(long, base, decide, "inferfleet")
    # Short requests all start at once; long ones queue behind each other for KV.
    assert np.ptp(fits.ttft_s) < 1.0
    assert np.max(crowded.ttft_s) > np.max(fits.ttft_s) + 1.0
