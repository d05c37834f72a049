"""PromQL for the autoscaler's signals (pure: strings in, strings out).

Every query aggregates over *all* InferenceServices at once and groups by the target
labels Prometheus attaches (`namespace`, and the service and tier the operator's
PodMonitor copies from pod labels), so the cost of one autoscaler loop is a fixed number
of queries however many objects exist.

Only series of the operator's own scrape jobs count (`job="inferfleet-vllm"`, the
pickers' `job="inferfleet-epp"`): a pod scraped by anyone else's monitor, whatever labels
it exports or its monitor writes, is never read. Which namespace a series counts for is
only as trustworthy as the `namespace` label; the platform's Prometheus must pin it to
the monitor's namespace (`enforcedNamespaceLabel: namespace`, see
docs/concepts/live-autoscaler.md), or one namespace's PodMonitor could relabel its series
into another's.

Newer Prometheus client libraries can expose `vllm:foo` as `vllm_foo` when a scrape
negotiates OpenMetrics with UTF-8 escaping, and vLLM has renamed metrics over time (a
release in the deprecation window exposes the old and the new name side by side). Every
exposed name gets an expression of its own and they are combined with `or`, which
matches series on their labels ignoring `__name__`, so a pod is counted once (the
left-hand, current name wins). Never one regex selector over several names: rate() and
timestamp() drop the name, and one pod exposing two of them would then fail the whole
query ("vector cannot contain metrics with the same labelset") for every tenant.

Gauges are checked series by series before they are summed: a pod's reading outside
what the signal can measure (negative, NaN, infinite, a KV usage above 1) turns its
tier's sum into NaN, which the parser reads as missing data for that tier alone.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inferfleet.api.labels import (
    PD_ROLE_PREFILL,
    SCRAPE_JOB_PICKER,
    SCRAPE_JOB_SERVER,
    SERIES_LABEL_JOB,
    SERIES_LABEL_NAMESPACE,
    SERIES_LABEL_POD,
    SERIES_LABEL_ROLE,
    SERIES_LABEL_SERVICE,
    SERIES_LABEL_TIER,
)
from inferfleet.autoscaling.policy import plausible

# The grouping labels, in the order `TierKey` uses them.
SERIES_LABELS: tuple[str, str, str] = (SERIES_LABEL_NAMESPACE, SERIES_LABEL_SERVICE, SERIES_LABEL_TIER)
_BY = ", ".join(SERIES_LABELS)

# vLLM's TTFT histogram buckets (seconds), as vllm/v1/metrics/loggers.py declares them.
# The emulator in `testkit` exposes exactly these so histogram_quantile interpolates the
# same way it would against a real engine.
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip


class Signal(enum.StrEnum):
    """One instant query per signal, each over every InferenceService."""

    waiting = "waiting"
    running = "running"
    kv_cache_usage = "kvCacheUsage"
    ttft_p99 = "ttftP99"
    request_rate = "requestRate"
    prompt_tokens_rate = "promptTokensRate"
    ready_replicas = "readyReplicas"
    # The request mix (autoscaling.policy.mix): output tokens, 4xx answers, token-length percentiles.
    generation_tokens_rate = "generationTokensRate"
    rejected_rate = "rejectedRate"
    prompt_tokens_p50 = "promptTokensP50"
    prompt_tokens_p95 = "promptTokensP95"
    prompt_tokens_p99 = "promptTokensP99"
    generation_tokens_p50 = "generationTokensP50"
    generation_tokens_p95 = "generationTokensP95"
    generation_tokens_p99 = "generationTokensP99"


# The request-mix signals change over minutes, not seconds: SignalReader queries them
# once per `QueryConfig.mix_refresh_s` and reuses the answer in between.
MIX_SIGNALS = frozenset(
    {
        Signal.generation_tokens_rate,
        Signal.rejected_rate,
        Signal.prompt_tokens_p50,
        Signal.prompt_tokens_p95,
        Signal.prompt_tokens_p99,
        Signal.generation_tokens_p50,
        Signal.generation_tokens_p95,
        Signal.generation_tokens_p99,
    }
)

# The token-length percentiles each histogram is read at, by signal.
MIX_QUANTILES: dict[Signal, float] = {
    Signal.prompt_tokens_p50: 0.5,
    Signal.prompt_tokens_p95: 0.95,
    Signal.prompt_tokens_p99: 0.99,
    Signal.generation_tokens_p50: 0.5,
    Signal.generation_tokens_p95: 0.95,
    Signal.generation_tokens_p99: 0.99,
}


def escaped(name: str) -> str:
    """`vllm:x` → `vllm_x`: the form UTF-8-escaping exposition produces for colons."""
    return name.replace(":", "_")


def exposed_names(names: Sequence[str]) -> list[str]:
    """Every name a family can be exposed under, current name first, each form once."""
    out: list[str] = []
    for name in names:
        for form in (name, escaped(name)):
            if form not in out:
                out.append(form)
    return out


def series(name: str, job: str = SCRAPE_JOB_SERVER, matchers: str = "") -> str:
    """One exact metric name, from the operator's own scrape job only."""
    extra = f", {matchers}" if matchers else ""
    return f'{name}{{{SERIES_LABEL_JOB}="{job}"{extra}}}'


def _family(names: Sequence[str], each: Callable[[str], str], job: str = SCRAPE_JOB_SERVER) -> str:
    return " or ".join(each(series(name, job)) for name in exposed_names(names))


@dataclass(frozen=True)
class MetricNames:
    """The vLLM metric names read; where a metric was renamed, the current name first."""

    waiting: tuple[str, ...] = ("vllm:num_requests_waiting",)
    running: tuple[str, ...] = ("vllm:num_requests_running",)
    # Renamed in vLLM 0.9.2; the old name was removed in 0.12 but older fleets still run it.
    kv_cache_usage: tuple[str, ...] = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    ttft_bucket: tuple[str, ...] = ("vllm:time_to_first_token_seconds_bucket",)
    # Finished requests of every finished_reason: at steady state it equals the arrival
    # rate, and vLLM has exposed it under this name in every release we support.
    requests_finished: tuple[str, ...] = ("vllm:request_success_total",)
    # Prompt tokens prefilled (a counter; prometheus_client appends `_total`).
    prompt_tokens: tuple[str, ...] = ("vllm:prompt_tokens_total",)
    # Info gauge (always 1) whose labels carry the engine's cache config, num_gpu_blocks
    # and block_size included, once the KV cache is allocated.
    cache_config_info: tuple[str, ...] = ("vllm:cache_config_info",)
    generation_tokens: tuple[str, ...] = ("vllm:generation_tokens_total",)
    # Token lengths of finished requests (1-2-5 buckets up to max-model-len).
    prompt_tokens_bucket: tuple[str, ...] = ("vllm:request_prompt_tokens_bucket",)
    generation_tokens_bucket: tuple[str, ...] = ("vllm:request_generation_tokens_bucket",)
    # The OpenAI server's HTTP counter (prometheus-fastapi-instrumentator, on the same
    # /metrics): a prompt beyond max-model-len is answered 400 before the engine sees it.
    http_requests: str = "http_requests_total"
    completion_handlers: str = "/v1/(chat/)?completions"
    # The front door's endpoint pickers: requests their flow control holds, per
    # `inference_pool` (the Inference Extension's name, and llm-d's router's own).
    door_queue: tuple[str, ...] = (
        "inference_extension_flow_control_queue_size",
        "llm_d_epp_flow_control_queue_size",
    )


@dataclass(frozen=True)
class QueryConfig:
    """Windows and freshness rules for the signal queries.

    `rate_window_s` must hold at least two scrapes (4x the scrape interval is safe);
    `max_sample_age_s` drops gauge samples older than this, so a series Prometheus still
    returns inside its 5-minute lookback is not read as the present.
    """

    rate_window_s: int = 120
    # Token-length percentiles need more requests than a rate: ten minutes of them.
    mix_window_s: int = 600
    # The mix signals are read at most this often (0: every loop).
    mix_refresh_s: int = 60
    max_sample_age_s: int = 60
    ttft_quantile: float = 0.99
    # The policy's forecaster reads one point per minute.
    history_step_s: int = 60
    # Wider than the step so a point still has two samples with 30 s scrapes; adjacent
    # points overlap by a minute, which smooths a little and loses nothing.
    history_rate_window_s: int = 120
    names: MetricNames = MetricNames()

    def __post_init__(self) -> None:
        windows = (
            self.rate_window_s,
            self.max_sample_age_s,
            self.history_step_s,
            self.history_rate_window_s,
            self.mix_window_s,
        )
        if min(windows) <= 0:
            raise ValueError("query windows must be positive")
        if self.mix_refresh_s < 0:
            raise ValueError("mix_refresh_s must not be negative")
        if not 0 < self.ttft_quantile < 1:
            raise ValueError("ttft_quantile must lie strictly between 0 and 1")


def _duration(seconds: int) -> str:
    return f"{int(seconds)}s"


def _number(value: float) -> str:
    """A PromQL number literal (plain decimal: `1e+12` style exponents are avoided)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite bound: {value}")
    return repr(float(value)) if abs(value) < 1e16 else f"{value:.17g}"


def _fresh(selector: str, max_age_s: int) -> str:
    # timestamp() yields each sample's own scrape time, so this keeps only series scraped
    # within max_age_s of the evaluation time.
    return f"({selector} and (time() - timestamp({selector})) < {int(max_age_s)})"


def _fresh_family(names: Sequence[str], max_age_s: int, job: str = SCRAPE_JOB_SERVER) -> str:
    return _family(names, lambda selector: _fresh(selector, max_age_s), job)


def _rate_family(names: Sequence[str], window_s: int, job: str = SCRAPE_JOB_SERVER) -> str:
    window = _duration(window_s)
    return _family(names, lambda selector: f"rate({selector}[{window}])", job)


def checked(expr: str, bounds: plausible.Bounds) -> str:
    """`expr` with each series outside `bounds` (NaN fails every comparison) as NaN.

    Summed, one such pod makes its tier's reading NaN, which the parser reads as missing
    data for that tier, instead of a bad pod's -50 hiding among its siblings' load.
    `+ 0` and `* NaN` both drop the metric name, so `or` pairs each series with itself.
    """
    low, high = _number(bounds.low), _number(bounds.high)
    return f"((({expr}) + 0) >= {low} <= {high}) or (({expr}) * NaN)"


def gauge_sum(names: Sequence[str], max_age_s: int, bounds: plausible.Bounds = plausible.COUNT) -> str:
    return f"sum by ({_BY}) ({checked(_fresh_family(names, max_age_s), bounds)})"


def gauge_avg(names: Sequence[str], max_age_s: int, bounds: plausible.Bounds = plausible.FRACTION) -> str:
    return f"avg by ({_BY}) ({checked(_fresh_family(names, max_age_s), bounds)})"


def replicas_reporting(names: Sequence[str], max_age_s: int) -> str:
    """Replicas (pods) with a fresh sample, counting a multi-engine pod once."""
    family = _fresh_family(names, max_age_s)
    return f"count by ({_BY}) (group by ({_BY}, {SERIES_LABEL_POD}) ({family}))"


def histogram_quantile(names: Sequence[str], quantile: float, window_s: int) -> str:
    return f"histogram_quantile({quantile:g}, sum by ({_BY}, le) ({_rate_family(names, window_s)}))"


def counter_rate(names: Sequence[str], window_s: int) -> str:
    return f"sum by ({_BY}) ({_rate_family(names, window_s)})"


def rejected_rate(names: MetricNames, window_s: int) -> str:
    """4xx answers per second from the completion handlers (400 for a prompt beyond
    max-model-len; the instrumentator groups codes as `4xx` by default)."""
    selector = series(names.http_requests, matchers=f'handler=~"{names.completion_handlers}", status=~"4.."')
    return f"sum by ({_BY}) (rate({selector}[{_duration(window_s)}]))"


def signal_queries(config: QueryConfig) -> dict[Signal, str]:
    """The instant queries of one autoscaler loop, one per signal."""
    names = config.names
    mix = {
        signal: histogram_quantile(
            names.prompt_tokens_bucket
            if signal.value.startswith("prompt")
            else names.generation_tokens_bucket,
            quantile,
            config.mix_window_s,
        )
        for signal, quantile in MIX_QUANTILES.items()
    }
    return {
        Signal.waiting: gauge_sum(names.waiting, config.max_sample_age_s),
        Signal.running: gauge_sum(names.running, config.max_sample_age_s),
        # The tier's average, not the hottest pod: the router spreads load, so the mean
        # is the pressure more replicas would relieve.
        Signal.kv_cache_usage: gauge_avg(names.kv_cache_usage, config.max_sample_age_s),
        Signal.ttft_p99: histogram_quantile(names.ttft_bucket, config.ttft_quantile, config.rate_window_s),
        Signal.request_rate: counter_rate(names.requests_finished, config.rate_window_s),
        # Summed over the tier's replicas: the prefill load the tier carries.
        Signal.prompt_tokens_rate: counter_rate(names.prompt_tokens, config.rate_window_s),
        Signal.ready_replicas: replicas_reporting(names.running, config.max_sample_age_s),
        Signal.generation_tokens_rate: counter_rate(names.generation_tokens, config.rate_window_s),
        Signal.rejected_rate: rejected_rate(names, config.rate_window_s),
        **mix,
    }


def door_query(config: QueryConfig) -> str:
    """Requests the front door holds, per pool, keyed like a tier: the pool's name goes
    into the tier label, so the result parses as `TierKey(namespace, service, pool)`.

    Summed per pool first: label_replace over raw series could make two of them one label
    set (a picker exporting its own `inferfleet_tier`) and fail the query for everyone."""
    fresh = _fresh_family(config.names.door_queue, config.max_sample_age_s, SCRAPE_JOB_PICKER)
    by_pool = f"{SERIES_LABEL_NAMESPACE}, {SERIES_LABEL_SERVICE}, inference_pool"
    per_pool = f"sum by ({by_pool}) ({checked(fresh, plausible.COUNT)})"
    relabelled = f'label_replace({per_pool}, "{SERIES_LABEL_TIER}", "$1", "inference_pool", "(.+)")'
    return f"sum by ({_BY}) ({relabelled})"


def pod_load_query(config: QueryConfig) -> str:
    """In-flight requests per pod (the target's `pod` label): read with the tick's other
    queries when pod-deletion-cost is on, so the write phase asks Prometheus nothing."""
    family = _fresh_family(config.names.running, config.max_sample_age_s)
    return f"sum by ({_BY}, {SERIES_LABEL_POD}) ({family})"


# Labels of `vllm:cache_config_info` that carry the allocated KV cache.
KV_BLOCKS_LABEL = "num_gpu_blocks"
KV_BLOCK_SIZE_LABEL = "block_size"


def kv_capacity_query(config: QueryConfig) -> str:
    """Replicas per (tier, num_gpu_blocks, block_size) that report their KV cache.

    An info metric carries its numbers in labels, so the query counts pods per distinct
    value; the parser takes each tier's smallest. Not fresh-filtered like the load
    gauges: the value never changes while an engine lives, and Prometheus' own lookback
    drops pods that are gone."""
    by = f"{_BY}, {KV_BLOCKS_LABEL}, {KV_BLOCK_SIZE_LABEL}"
    family = _family(
        config.names.cache_config_info, lambda selector: f"group by ({by}, {SERIES_LABEL_POD}) ({selector})"
    )
    return f"count by ({by}) ({family})"


def history_query(config: QueryConfig) -> str:
    """Request rate per InferenceService (all tiers summed), for a range query.

    The forecaster predicts the service's demand and the policy places it across tiers,
    so the history is per service: a third of the series a per-tier history would cost.
    """
    # A split's prefill pods finish a prefill of every request their decode pods finish.
    not_prefill = f'{SERIES_LABEL_ROLE}!="{PD_ROLE_PREFILL}"'
    window = _duration(config.history_rate_window_s)
    rates = " or ".join(
        f"rate({series(name, SCRAPE_JOB_SERVER, not_prefill)}[{window}])"
        for name in exposed_names(config.names.requests_finished)
    )
    return f"sum by ({SERIES_LABEL_NAMESPACE}, {SERIES_LABEL_SERVICE}) ({rates})"


def align_down(t_s: float, step_s: int) -> float:
    """The last multiple of `step_s` at or before `t_s`.

    Range queries start on step multiples so the points of successive loops fall on the
    same grid and the cache can append instead of re-fetching.
    """
    return float(math.floor(t_s / step_s) * step_s)
