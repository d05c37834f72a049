"""Reading signals from Prometheus (I/O, prometheus-api-client).

`PrometheusClient` is the only place that talks HTTP; it times and counts every query.
`SignalReader` runs one loop's queries (a fixed set, independent of how many
InferenceServices exist), refreshes the request-rate history cache when a history
step has completed, and backs off while Prometheus is failing.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from inferfleet.autoscaling.promql.backoff import Backoff
from inferfleet.autoscaling.promql.history import FetchRange, RateHistoryCache
from inferfleet.autoscaling.promql.parse import (
    KvCapacityReading,
    ServiceKey,
    TierKey,
    VectorResult,
    parse_kv_capacity,
    parse_matrix,
    parse_pod_load,
    parse_vector,
    service_key,
)
from inferfleet.autoscaling.promql.queries import (
    MIX_SIGNALS,
    QueryConfig,
    Signal,
    door_query,
    history_query,
    kv_capacity_query,
    pod_load_query,
    signal_queries,
)
from inferfleet.autoscaling.promql.signals import SignalSnapshot, assemble
from inferfleet.config import OperatorSettings
from inferfleet.metrics.operator_metrics import OperatorMetrics

log = logging.getLogger(__name__)

# A Prometheus error body's `error` text is shown up to this many characters: a parse
# error quotes the query, which is the debug log's business, not a condition's.
_ERROR_BODY_MAX_CHARS = 120
# Statuses of a proxy or a restarting Prometheus: tried once more at once.
_RETRY_STATUSES = frozenset({502, 503, 504})
# Connections kept to Prometheus: every instant query of a loop, the front door's and
# the history's range queries at once.
_POOL_CONNECTIONS = len(Signal) + 8


class QueryFailed(Exception):
    """One Prometheus query failed; `cause` is a short enumeration for metrics.

    The message is short and never holds the query (a query is some 700 characters of
    PromQL, URL-encoded in the failing URL): it says what happened ("connection refused",
    "HTTP 503", "timed out after 5s"). `status` is the HTTP status, when there was one."""

    def __init__(self, message: str, cause: str, status: int | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.status = status


def _connection_cause(error: BaseException) -> str:
    """`connection refused`, `name or service not known`, ...: the innermost OS error's
    words, without the URL (requests' message carries the whole query string)."""
    found: list[str] = re.findall(r"\[Errno -?\d+\] ([^'\")\]]+)", str(error))
    if found:
        return found[-1].strip().rstrip(".").lower()
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return type(reason or error).__name__


def _http_cause(error: PrometheusApiClientException) -> tuple[int | None, str]:
    """(status, `HTTP 503` or `HTTP 400: <Prometheus's error, capped>`)."""
    match = re.match(r"HTTP Status Code (\d+) \((.*)\)$", str(error), re.DOTALL)
    if match is None:
        return None, str(error)[:_ERROR_BODY_MAX_CHARS]
    status = int(match.group(1))
    detail = ""
    body = match.group(2)
    if body.startswith(("b'", 'b"')):
        try:
            answer = json.loads(body[2:-1].encode().decode("unicode_escape"))
            detail = str(answer.get("error") or "") if isinstance(answer, dict) else ""
        except ValueError:
            detail = ""
    if len(detail) > _ERROR_BODY_MAX_CHARS:
        detail = detail[: _ERROR_BODY_MAX_CHARS - 3] + "..."
    return status, f"HTTP {status}" + (f": {detail}" if detail else "")


@dataclass(frozen=True)
class PrometheusConfig:
    url: str
    timeout_s: float = 5.0
    bearer_token_file: str | None = None

    @classmethod
    def from_settings(cls, settings: OperatorSettings) -> PrometheusConfig:
        return cls(
            url=settings.prometheus_url,
            timeout_s=settings.prometheus_timeout_s,
            bearer_token_file=settings.prometheus_bearer_token_file,
        )


class PrometheusClient:
    """Instant and range queries with timing, failure counting and bearer-token auth."""

    def __init__(self, config: PrometheusConfig, metrics: OperatorMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.queries_made = 0
        self.range_queries_made = 0
        # No retries inside urllib3: it logs a warning per retried query, the whole
        # URL-encoded query in it (some 15 lines per loop while Prometheus is down).
        # `_call` tries a reset connection or a 502/503/504 once more itself; longer waits
        # are SignalReader's backoff, which holds decisions instead of sleeping.
        retry = Retry(total=0, raise_on_status=False)
        url = config.url.rstrip("/")
        session = requests.Session()
        self._connect = PrometheusConnect(
            url=url,
            retry=retry,
            timeout=config.timeout_s,
            # POST: a batched query over every series label set can outgrow a URL.
            method="POST",
            session=session,
        )
        # The loop's queries run side by side (SignalReader's pool): a connection each, or
        # urllib3 warns "Connection pool is full, discarding connection" every loop. The
        # longer prefix wins over the client's own adapter for the same URL.
        session.mount(f"{url}/api/", HTTPAdapter(max_retries=retry, pool_maxsize=_POOL_CONNECTIONS))

    def _headers(self) -> dict[str, str] | None:
        if not self.config.bearer_token_file:
            return None
        # Re-read on every query: projected service-account tokens rotate on disk.
        token = Path(self.config.bearer_token_file).read_text(encoding="utf-8").strip()
        return {"Authorization": f"Bearer {token}"}

    def _call(self, kind: str, run: Callable[[], Any]) -> list[Any]:
        """One query, counted and timed once, tried twice on a reset connection or a
        502/503/504 (no sleep in between)."""
        self.queries_made += 1
        if kind == "range":
            self.range_queries_made += 1
        started = time.perf_counter()
        try:
            try:
                return self._attempt(run)
            except QueryFailed as error:
                if error.cause != "connection" and error.status not in _RETRY_STATUSES:
                    raise
                log.debug("Prometheus %s query failed (%s); trying once more", kind, error)
                return self._attempt(run)
        except QueryFailed as error:
            if self.metrics is not None:
                self.metrics.query_failures_total.labels(kind=kind, cause=error.cause).inc()
            raise
        finally:
            if self.metrics is not None:
                self.metrics.query_duration_s.labels(kind=kind).observe(time.perf_counter() - started)

    def _attempt(self, run: Callable[[], Any]) -> list[Any]:
        try:
            self._connect.headers = self._headers()
            result = run()
        except requests.exceptions.Timeout as error:
            raise QueryFailed(f"timed out after {self.config.timeout_s:g}s", "timeout") from error
        except requests.exceptions.ConnectionError as error:
            message = f"cannot reach {self.config.url} ({_connection_cause(error)})"
            raise QueryFailed(message, "connection") from error
        except PrometheusApiClientException as error:
            status, message = _http_cause(error)
            raise QueryFailed(message, "http", status) from error
        except (requests.exceptions.RequestException, ValueError, KeyError, OSError) as error:
            raise QueryFailed(f"malformed answer ({type(error).__name__})", "parse") from error
        except (TypeError, AttributeError, IndexError, RecursionError) as error:
            # The client indexes `body["data"]["result"]` blindly: `data: null`, a JSON list
            # or a string where an object belongs end up here. Malformed, like bad JSON.
            raise QueryFailed(f"malformed answer ({type(error).__name__})", "parse") from error
        if not isinstance(result, list):
            raise QueryFailed(f"unexpected result type {type(result).__name__}", "parse")
        return result

    def instant(self, query: str, time_s: float) -> list[Any]:
        params = {"time": f"{time_s:.3f}"}
        return self._call("instant", lambda: self._connect.custom_query(query, params=params))

    def range(self, query: str, fetch: FetchRange) -> list[Any]:
        # The bounds are step multiples (whole seconds), so the library's rounding of
        # datetimes to whole seconds changes nothing.
        start = datetime.fromtimestamp(fetch.start_s, tz=UTC)
        end = datetime.fromtimestamp(fetch.end_s, tz=UTC)
        return self._call(
            "range", lambda: self._connect.custom_query_range(query, start, end, step=f"{fetch.step_s}s")
        )


class SignalReader:
    """One loop's worth of signal queries, with history caching and backoff."""

    def __init__(
        self,
        client: PrometheusClient,
        config: QueryConfig | None = None,
        *,
        history_retention_s: float | None = None,
        backoff: Backoff | None = None,
        pod_load: bool = False,
    ) -> None:
        self.client = client
        self.config = config or QueryConfig()
        # Running requests per pod (pod-deletion-cost), read with the rest of the tick.
        self.pod_load = pod_load_query(self.config) if pod_load else None
        self.queries = signal_queries(self.config)
        self.door = door_query(self.config)
        self.history = (
            RateHistoryCache(self.config.history_step_s, history_retention_s)
            if history_retention_s is not None
            else None
        )
        self.backoff = backoff or Backoff()
        # The instant queries (one per Signal) are independent; running them side by side
        # makes the loop's latency that of the slowest query rather than their sum.
        self._pool = ThreadPoolExecutor(max_workers=len(Signal) + 2, thread_name_prefix="promql")
        # The request-mix answers and when they were read (see QueryConfig.mix_refresh_s).
        self._mix: dict[Signal, VectorResult] = {}
        self._mix_read_s: float | None = None
        # Why the last attempt got no answer at all (None: Prometheus answered).
        self._outage: str | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def read(self, now_s: float) -> SignalSnapshot:
        """Signals of every tier at `now_s`; failures are reported in the snapshot, never raised.

        A failed signal is said as `Prometheus did not answer the `<signal>` query: <why>`
        (the query itself goes to the debug log only); an attempt where no query was
        answered logs one warning, and while backing off the last one's words are kept,
        so a condition built on them stays the same for the whole outage."""
        if not self.backoff.ready(now_s):
            reason = self._outage or "Prometheus unavailable"
            return assemble(now_s, {}, failed=dict.fromkeys(Signal, reason), history_failed=reason)
        queries_before = self.client.queries_made
        last_mix = self._mix_read_s
        mix_due = last_mix is None or now_s < last_mix or now_s - last_mix >= self.config.mix_refresh_s
        futures = {
            signal: self._pool.submit(self.client.instant, query, now_s)
            for signal, query in self.queries.items()
            if mix_due or signal not in MIX_SIGNALS
        }
        door_future = self._pool.submit(self.client.instant, self.door, now_s)
        pod_future = self._pool.submit(self.client.instant, self.pod_load, now_s) if self.pod_load else None
        vectors: dict[Signal, VectorResult] = {}
        failed: dict[Signal, str] = {}
        for signal, future in futures.items():
            try:
                vectors[signal] = parse_vector(
                    future.result(), eval_time_s=now_s, max_age_s=float(self.config.max_sample_age_s)
                )
            except QueryFailed as error:
                failed[signal] = self._unanswered(signal, self.queries[signal], str(error))
            except Exception as error:  # an answer no parser foresaw: that signal is missing
                failed[signal] = self._unanswered(
                    signal, self.queries[signal], f"malformed answer ({type(error).__name__})"
                )
        door: VectorResult | None = None
        door_failed: str | None = None
        try:
            door = parse_vector(
                door_future.result(), eval_time_s=now_s, max_age_s=float(self.config.max_sample_age_s)
            )
        except QueryFailed as error:
            door_failed = self._unanswered("front door queue", self.door, str(error))
        except Exception as error:  # an answer no parser foresaw: the door is unknown
            door_failed = self._unanswered(
                "front door queue", self.door, f"malformed answer ({type(error).__name__})"
            )
        if len(failed) == len(futures):
            self.backoff.failed(now_s)
            self._outage = next(iter(failed.values()), "")
            failed.update(dict.fromkeys(MIX_SIGNALS, self._outage))
            # One line per attempt, whatever the number of queries.
            log.warning(
                "%s; %d queries unanswered, replicas held, next attempt in %.0fs",
                self._outage,
                len(futures) + 1,
                self.backoff.delay_s(),
            )
        else:
            if self._outage is not None:
                log.info("Prometheus answers again")
            self._outage = None
            self.backoff.succeeded()
            if mix_due:
                self._mix = {signal: vectors[signal] for signal in MIX_SIGNALS if signal in vectors}
                self._mix_read_s = now_s
            else:
                vectors.update(self._mix)
        history_failed = (
            self._refresh_history(now_s) if len(failed) < len(Signal) else "Prometheus unavailable"
        )
        history = None
        if self.history is not None:
            cache = self.history
            history = {key: cache.window(key, now_s, cache.retention_s) for key in cache.service_keys()}
        pods, pods_failed = self._pod_loads(pod_future)
        return assemble(
            now_s,
            vectors,
            failed=failed,
            history=history,
            history_failed=history_failed,
            queries=self.client.queries_made - queries_before,
            door=door,
            door_failed=door_failed,
            pod_in_flight=pods,
            pod_in_flight_failed=pods_failed,
        )

    def _pod_loads(
        self, future: Future[list[Any]] | None
    ) -> tuple[dict[TierKey, dict[str, float]] | None, str | None]:
        """The per-pod running requests read with this tick, or why not (None, None: not asked)."""
        if future is None or self.pod_load is None:
            return None, None
        try:
            return parse_pod_load(future.result()), None
        except QueryFailed as error:
            return None, self._unanswered("per-pod load", self.pod_load, str(error))
        except Exception as error:  # an answer no parser foresaw: unknown, as a failure
            return None, self._unanswered(
                "per-pod load", self.pod_load, f"malformed answer ({type(error).__name__})"
            )

    @staticmethod
    def _unanswered(name: str, query: str, why: str) -> str:
        """The words for a query that failed, named by its signal; the query in the debug log."""
        log.debug("Prometheus did not answer the %s query (%s): %s", name, why, query)
        return f"Prometheus did not answer the `{name}` query: {why}"

    def _refresh_history(self, now_s: float) -> str | None:
        if self.history is None:
            return None
        fetches = self.history.next_fetches(now_s)
        if not fetches:
            return None
        query = history_query(self.config)
        futures = [self._pool.submit(self.client.range, query, fetch) for fetch in fetches]
        series: dict[ServiceKey, list[tuple[float, float]]] = {}
        try:
            for future in futures:
                for key, points in parse_matrix(future.result(), service_key).series.items():
                    series.setdefault(key, []).extend(points)
        except QueryFailed as error:
            # All or nothing: storing later chunks without an earlier one would turn the
            # missing chunk into a permanent gap instead of a retry next loop.
            return self._unanswered("request-rate history", query, str(error))
        except Exception as error:  # an answer no parser foresaw: retried next loop
            return self._unanswered(
                "request-rate history", query, f"malformed answer ({type(error).__name__})"
            )
        self.history.merge(fetches, series, now_s)
        return None


class KvCapacityReader:
    """The KV capacity every tier's engines allocated (`vllm:cache_config_info`), for the
    reconciler to put beside the plan's estimate.

    One query answers for every InferenceService; the answer is kept for `ttl_s` so that
    reconciling many objects costs one query a minute, and a failed query keeps serving
    the last answer for up to `max_stale_s` (the value only changes when engines
    restart). Never raises: without an answer the plans keep their estimates."""

    def __init__(
        self,
        client: PrometheusClient,
        config: QueryConfig | None = None,
        *,
        ttl_s: float = 60.0,
        max_stale_s: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.query = kv_capacity_query(config or QueryConfig())
        self.ttl_s = ttl_s
        self.max_stale_s = max_stale_s
        self.clock = clock
        self._lock = threading.Lock()
        self._answer: dict[TierKey, KvCapacityReading] = {}
        self._read_at: float | None = None
        self._tried_at: float | None = None
        self._failing = False

    def _refresh(self, now_s: float) -> None:
        self._tried_at = now_s
        try:
            parsed = parse_kv_capacity(self.client.instant(self.query, now_s))
        except QueryFailed as error:
            # Said once per outage, not once a minute.
            (log.debug if self._failing else log.warning)(
                "cannot read vllm:cache_config_info (plans keep their KV estimates): %s", error
            )
            self._failing = True
            if self._read_at is not None and now_s - self._read_at > self.max_stale_s:
                self._answer, self._read_at = {}, None
            return
        self._failing = False
        for problem in parsed.problems[:5]:
            log.info("vllm:cache_config_info: %s", problem)
        self._answer, self._read_at = parsed.tiers, now_s

    def tiers_of(self, namespace: str, service: str) -> dict[str, KvCapacityReading]:
        """Per tier name, what the service's engines allocated (empty when unknown)."""
        now_s = self.clock()
        with self._lock:
            if self._tried_at is None or now_s - self._tried_at >= self.ttl_s:
                self._refresh(now_s)
            answer = self._answer
        return {
            key.tier: reading
            for key, reading in answer.items()
            if key.namespace == namespace and key.service == service
        }
