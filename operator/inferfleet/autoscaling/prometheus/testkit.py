"""A vLLM metrics emulator and a throwaway Prometheus, for tests, benchmarks and demos.

`VllmEmulator` serves the metric names, types and histogram buckets vLLM serves, for
any number of emulated pods, each driven by the caller (queue depth, running batch,
KV usage, request rate, prompt length, TTFT). Counters grow continuously with the
configured rate, so `rate()` over any window returns that rate without the caller
ticking a clock.

`PrometheusServer` runs the real `prometheus` binary on a free loopback port with a
generated config and a temporary storage directory.

`pod_monitor_scrape_configs` writes the scrape configs prometheus-operator generates for
a PodMonitor (its job name, honor_labels, the relabelings it puts before and after the
monitor's own, and the namespace enforcement a Prometheus with `enforcedNamespaceLabel`
appends), so the real Prometheus attaches exactly the labels it would in a cluster:
Debian's build has no Kubernetes service discovery, so targets carry the
`__meta_kubernetes_*` labels it would give (`pod_targets`).
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import yaml

from inferfleet.api import labels as api_labels
from inferfleet.autoscaling.promql.queries import TTFT_BUCKETS_S
from inferfleet.design import object_names as render_names
from inferfleet.render.pod import PORT_NAME
from inferfleet.render.service_objects import prometheus_name, server_pod_monitor

NameStyle = Literal["colon", "underscore"]
Clock = Callable[[], float]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Flow:
    """A quantity growing at `rate_per_s`, integrated exactly across rate changes."""

    rate_per_s: float = 0.0
    total: float = 0.0
    since_s: float = 0.0

    def value(self, now_s: float) -> float:
        return self.total + self.rate_per_s * max(0.0, now_s - self.since_s)

    def set_rate(self, rate_per_s: float, now_s: float) -> None:
        self.total = self.value(now_s)
        self.since_s = now_s
        self.rate_per_s = rate_per_s


@dataclass
class EmulatedPod:
    """One vLLM replica's /metrics, as a PodMonitor would scrape it.

    `ttft_mix` lists (TTFT seconds, share of requests); requests finish and report
    their TTFT at `rps`. Each request brings `prompt_tokens` prompt tokens and
    generates `output_tokens`, so `vllm:prompt_tokens_total` grows at `rps x
    prompt_tokens` and `vllm:generation_tokens_total` at `rps x output_tokens`, and the
    `request_prompt_tokens` / `request_generation_tokens` histograms (vLLM's 1-2-5
    buckets up to `max_model_len`) count each request at those lengths. `rejected_rps`
    requests a second are answered 400 by the HTTP layer (`http_requests_total`,
    status `4xx`), as vLLM does for a prompt beyond max-model-len.
    `name_style="underscore"` exposes `vllm_…` names (the escaped form),
    `legacy_kv=True` the pre-0.9.2 `gpu_cache_usage_perc` name, `both_forms=True` every
    name in both forms at once. `exported_labels` go on every series the pod exports
    (what a hostile engine would claim about itself: `namespace`, `job`, ...). The
    gauges take any float, NaN and infinities included.
    """

    name: str
    namespace: str
    service: str
    tier: str
    model_name: str = "model"
    name_style: NameStyle = "colon"
    legacy_kv: bool = False
    waiting: float = 0.0
    running: float = 0.0
    kv_cache_usage: float = 0.0
    # The KV cache the engine allocated (`vllm:cache_config_info` labels); None: not yet.
    num_gpu_blocks: int | None = None
    block_size: int = 16
    up: bool = True
    ttft_mix: tuple[tuple[float, float], ...] = ((0.05, 1.0),)
    prompt_tokens: float = 512.0
    output_tokens: float = 128.0
    rejected_rps: float = 0.0
    max_model_len: int = 8192
    both_forms: bool = False
    exported_labels: dict[str, str] = field(default_factory=dict)
    # The pod's Kubernetes labels when it is not one of the operator's (None: it is).
    kube_labels: dict[str, str] | None = None
    # Requests an endpoint picker holds per pool (its flow-control queue gauge).
    door_held: dict[str, float] = field(default_factory=dict)
    # The name of the container port /metrics is served on (a picker's is `metrics`).
    port_name: str = PORT_NAME
    _finished: _Flow = field(default_factory=_Flow)
    _prompt: _Flow = field(default_factory=_Flow)
    _generated: _Flow = field(default_factory=_Flow)
    _rejected: _Flow = field(default_factory=_Flow)
    # Token-length histogram observations banked when a length or the rate changed.
    _banked_prompt: dict[int, float] = field(default_factory=dict)
    _banked_output: dict[int, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Histogram observations banked when the TTFT mix or the rate last changed.
    _banked_buckets: list[float] = field(default_factory=lambda: [0.0] * (len(TTFT_BUCKETS_S) + 1))
    _banked_sum_s: float = 0.0
    _banked_count: float = 0.0

    @property
    def pod_labels(self) -> dict[str, str]:
        """The pod's Kubernetes labels: by default the operator's for a vLLM server of this tier."""
        if self.kube_labels is not None:
            return dict(self.kube_labels)
        return {
            **render_names.tier_labels(self.service, self.tier),
            api_labels.LABEL_COMPONENT: render_names.COMPONENT_SERVER,
        }

    @property
    def target_labels(self) -> dict[str, str]:
        """The labels Prometheus attaches to this pod's series through the operator's
        PodMonitor (for the combined scrape, which stands in for many pods)."""
        return {
            api_labels.SERIES_LABEL_NAMESPACE: self.namespace,
            api_labels.SERIES_LABEL_POD: self.name,
            api_labels.SERIES_LABEL_JOB: api_labels.SCRAPE_JOB_SERVER,
            api_labels.SERIES_LABEL_SERVICE: self.service,
            api_labels.SERIES_LABEL_TIER: self.tier,
        }

    def pod_object(self, address: str) -> dict[str, Any]:
        """The Pod as the API server would list it (for `pod_targets`)."""
        host, port = address.rsplit(":", 1)
        return {
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": f"uid-{self.namespace}-{self.name}",
                "labels": self.pod_labels,
            },
            "spec": {
                "nodeName": "node-0",
                "containers": [
                    {"name": "vllm", "ports": [{"name": self.port_name, "containerPort": int(port)}]}
                ],
            },
            "status": {
                "phase": "Running",
                "podIP": host,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def set(
        self,
        *,
        now_s: float,
        waiting: float | None = None,
        running: float | None = None,
        kv_cache_usage: float | None = None,
        rps: float | None = None,
        ttft_mix: Sequence[tuple[float, float]] | None = None,
        prompt_tokens: float | None = None,
        output_tokens: float | None = None,
        rejected_rps: float | None = None,
        up: bool | None = None,
    ) -> None:
        with self._lock:
            new_rps = self._finished.rate_per_s if rps is None else rps
            if rejected_rps is not None:
                self.rejected_rps = rejected_rps
                self._rejected.set_rate(rejected_rps, now_s)
            if (prompt_tokens is not None or output_tokens is not None) and ttft_mix is None and rps is None:
                self._bank(now_s)  # requests already finished keep the lengths they had
            if waiting is not None:
                self.waiting = waiting
            if running is not None:
                self.running = running
            if kv_cache_usage is not None:
                self.kv_cache_usage = kv_cache_usage
            if up is not None:
                self.up = up
            if ttft_mix is not None or rps is not None:
                # A new TTFT mix applies to requests finishing from now on; bank the past.
                self._bank(now_s)
                if ttft_mix is not None:
                    self.ttft_mix = tuple(ttft_mix)
                self._finished.set_rate(new_rps, now_s)
            if prompt_tokens is not None or rps is not None:
                # Tokens already prefilled stay counted; the new rate applies from now on.
                if prompt_tokens is not None:
                    self.prompt_tokens = prompt_tokens
                self._prompt.set_rate(new_rps * self.prompt_tokens, now_s)
            if output_tokens is not None or rps is not None:
                if output_tokens is not None:
                    self.output_tokens = output_tokens
                self._generated.set_rate(new_rps * self.output_tokens, now_s)

    def token_buckets(self) -> list[float]:
        """vLLM's 1-2-5 bucket bounds up to max-model-len (build_1_2_5_buckets)."""
        bounds: list[float] = []
        base = 1
        while base <= self.max_model_len:
            bounds.extend(float(base * m) for m in (1, 2, 5) if base * m <= self.max_model_len)
            base *= 10
        return bounds

    def _token_counts(self, banked: dict[int, float], tokens: float, count: float) -> list[float]:
        bounds = self.token_buckets()
        counts = [banked.get(index, 0.0) for index in range(len(bounds) + 1)]
        counts[bisect.bisect_left(bounds, tokens)] += count
        return counts

    def _bank(self, now_s: float) -> None:
        buckets, sum_s, count = self._since_bank(now_s)
        bounds = self.token_buckets()
        for banked, tokens in (
            (self._banked_prompt, self.prompt_tokens),
            (self._banked_output, self.output_tokens),
        ):
            index = bisect.bisect_left(bounds, tokens)
            banked[index] = banked.get(index, 0.0) + count
        self._banked_buckets = [a + b for a, b in zip(self._banked_buckets, buckets, strict=True)]
        self._banked_sum_s += sum_s
        self._banked_count += count
        self._finished.total = self._finished.value(now_s)
        self._finished.since_s = now_s

    def _since_bank(self, now_s: float) -> tuple[list[float], float, float]:
        count = self._finished.rate_per_s * max(0.0, now_s - self._finished.since_s)
        buckets = [0.0] * (len(TTFT_BUCKETS_S) + 1)
        sum_s = 0.0
        for ttft_s, share in self.ttft_mix:
            index = bisect.bisect_left(TTFT_BUCKETS_S, ttft_s)
            buckets[index] += count * share
            sum_s += count * share * ttft_s
        return buckets, sum_s, count

    def _name(self, name: str) -> str:
        return name.replace(":", "_") if self.name_style == "underscore" else name

    def _forms(self, line: str) -> list[str]:
        # Every line in both exposition forms: a pod that spells each name twice.
        if not self.both_forms:
            return [line]
        return [line, line.replace("vllm:", "vllm_")] if "vllm:" in line else [line]

    def exposition(self, now_s: float, extra_labels: dict[str, str] | None = None) -> list[str]:
        """Text-format lines for this pod (HELP lines left out; Prometheus ignores them)."""
        with self._lock:
            fresh, fresh_sum_s, fresh_count = self._since_bank(now_s)
            buckets = [a + b for a, b in zip(self._banked_buckets, fresh, strict=True)]
            sum_s = self._banked_sum_s + fresh_sum_s
            count = self._banked_count + fresh_count
            finished = self._finished.total + fresh_count
            prompt_tokens = self._prompt.value(now_s)
            generated = self._generated.value(now_s)
            rejected = self._rejected.value(now_s)
            prompt_counts = self._token_counts(self._banked_prompt, self.prompt_tokens, fresh_count)
            output_counts = self._token_counts(self._banked_output, self.output_tokens, fresh_count)
            token_bounds = self.token_buckets()
            waiting, running, kv = self.waiting, self.running, self.kv_cache_usage
        labels = {"model_name": self.model_name, "engine": "0", **self.exported_labels}
        labels.update(extra_labels or {})

        def series(name: str, value: float, more: dict[str, str] | None = None) -> str:
            merged = {**labels, **(more or {})}
            rendered = ",".join(f'{key}="{val}"' for key, val in merged.items())
            return f"{self._name(name)}{{{rendered}}} {value!r}"

        kv_name = "vllm:gpu_cache_usage_perc" if self.legacy_kv else "vllm:kv_cache_usage_perc"
        lines = [
            f"# TYPE {self._name('vllm:num_requests_running')} gauge",
            series("vllm:num_requests_running", running),
            f"# TYPE {self._name('vllm:num_requests_waiting')} gauge",
            series("vllm:num_requests_waiting", waiting),
            f"# TYPE {self._name(kv_name)} gauge",
            series(kv_name, kv),
            f"# TYPE {self._name('vllm:request_success_total')} counter",
            series("vllm:request_success_total", float(finished), {"finished_reason": "stop"}),
            f"# TYPE {self._name('vllm:prompt_tokens_total')} counter",
            series("vllm:prompt_tokens_total", float(prompt_tokens)),
            f"# TYPE {self._name('vllm:time_to_first_token_seconds')} histogram",
        ]
        cumulative = 0.0
        for bound, observed in zip((*TTFT_BUCKETS_S, float("inf")), buckets, strict=True):
            cumulative += observed
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(series("vllm:time_to_first_token_seconds_bucket", cumulative, {"le": le}))
        lines.append(series("vllm:time_to_first_token_seconds_sum", sum_s))
        lines.append(series("vllm:time_to_first_token_seconds_count", count))
        if self.num_gpu_blocks is not None:
            info = {"block_size": str(self.block_size), "num_gpu_blocks": str(self.num_gpu_blocks),
                    "cache_dtype": "auto", "enable_prefix_caching": "True"}  # fmt: skip
            lines.append(f"# TYPE {self._name('vllm:cache_config_info')} gauge")
            lines.append(series("vllm:cache_config_info", 1.0, info))
        lines += [
            f"# TYPE {self._name('vllm:generation_tokens_total')} counter",
            series("vllm:generation_tokens_total", float(generated)),
        ]
        for metric, counts in (
            ("vllm:request_prompt_tokens", prompt_counts),
            ("vllm:request_generation_tokens", output_counts),
        ):
            lines.append(f"# TYPE {self._name(metric)} histogram")
            cumulative = 0.0
            for bound, observed in zip((*token_bounds, float("inf")), counts, strict=True):
                cumulative += observed
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(series(f"{metric}_bucket", cumulative, {"le": le}))
            lines.append(series(f"{metric}_count", cumulative))
        if self.door_held:
            lines.append("# TYPE inference_extension_flow_control_queue_size gauge")
            lines += [
                series("inference_extension_flow_control_queue_size", held, {"inference_pool": pool})
                for pool, held in sorted(self.door_held.items())
            ]
        # The OpenAI server's own counter (prometheus-fastapi-instrumentator's names).
        http = {"handler": "/v1/chat/completions", "method": "POST"}
        lines += [
            "# TYPE http_requests_total counter",
            series("http_requests_total", float(finished), {**http, "status": "2xx"}),
            series("http_requests_total", float(rejected), {**http, "status": "4xx"}),
        ]
        return [form for line in lines for form in self._forms(line)]


class VllmEmulator:
    """Serves `/pods/<name>/metrics` per pod and `/metrics` with every pod's series.

    The combined `/metrics` labels each series with the labels the operator's PodMonitor
    would attach (`namespace`, `pod`, `job`, `inferfleet_*`) and an `instance` per pod,
    so one scrape target (with `honor_labels: true`) can stand in for thousands of pods
    in a benchmark.
    """

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self.pods: dict[str, EmulatedPod] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.scrapes = 0

    def add_pod(self, pod: EmulatedPod) -> EmulatedPod:
        pod._finished.since_s = self.clock()
        pod._prompt.since_s = pod._finished.since_s
        self.pods[pod.name] = pod
        return pod

    def render(self, path: str) -> str | None:
        now_s = self.clock()
        if path == "/metrics":
            lines: list[str] = []
            for pod in self.pods.values():
                if pod.up:
                    extra = {**pod.target_labels, "instance": pod.name}
                    lines.extend(line for line in pod.exposition(now_s, extra) if not line.startswith("#"))
            return "\n".join(lines) + "\n"
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "pods" and parts[2] == "metrics":
            target = self.pods.get(parts[1])
            if target is None or not target.up:
                return None
            return "\n".join(target.exposition(now_s)) + "\n"
        return None

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("emulator not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> VllmEmulator:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = emulator.render(self.path.split("?")[0])
                emulator.scrapes += 1
                if body is None:
                    self.send_response(503)
                    self.end_headers()
                    return
                payload = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="vllm-emulator")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> VllmEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def pod_targets(self, pods: Iterable[EmulatedPod] | None = None) -> list[dict[str, Any]]:
        """Target groups for `pods` (default: all), as kubernetes_sd would find them,
        each scraped at its own path on the emulator."""
        groups = []
        for pod in self.pods.values() if pods is None else pods:
            for group in pod_targets([pod.pod_object(self.address)]):
                group["labels"]["__metrics_path__"] = f"/pods/{pod.name}/metrics"
                groups.append(group)
        return groups

    def operator_scrape_configs(
        self,
        scrape_interval_s: float = 1.0,
        prometheus: PrometheusSettings | None = None,
        pods: Iterable[EmulatedPod] | None = None,
    ) -> list[dict[str, Any]]:
        """What prometheus-operator generates for the operator's PodMonitor of every
        emulated service, each PodMonitor seeing the pods of its own namespace."""
        chosen = list(self.pods.values() if pods is None else pods)
        configs: list[dict[str, Any]] = []
        for namespace, service in sorted({(pod.namespace, pod.service) for pod in chosen}):
            configs += pod_monitor_scrape_configs(
                server_pod_monitor(namespace, service),
                {"static_configs": self.pod_targets(chosen)},
                prometheus=prometheus,
                max_interval_s=scrape_interval_s,
            )
        return configs

    def combined_scrape_config(self, job: str = "vllm-all", scrape_interval_s: float = 2.0) -> dict[str, Any]:
        return {
            "job_name": job,
            "honor_labels": True,
            "scrape_interval": f"{scrape_interval_s:g}s",
            "scrape_timeout": f"{scrape_interval_s:g}s",
            "static_configs": [{"targets": [self.address]}],
        }


# --- what prometheus-operator generates for a PodMonitor ------------------------------------


@dataclass(frozen=True)
class PrometheusSettings:
    """The fields of a prometheus-operator `Prometheus` that change what it generates for
    every PodMonitor: `enforcedNamespaceLabel` (appended, last, to each monitor's
    relabelings and metricRelabelings, set to the monitor's own namespace),
    `overrideHonorLabels` (honor_labels always false) and `ignoreNamespaceSelectors`."""

    enforced_namespace_label: str | None = None
    override_honor_labels: bool = False
    # Every monitor discovers targets in its own namespace only.
    ignore_namespace_selectors: bool = False


def sanitize(label: str) -> str:
    """A Kubernetes label name as Prometheus's meta label suffix."""
    return prometheus_name(label)


_RELABEL_FIELDS = {
    "sourceLabels": "source_labels",
    "targetLabel": "target_label",
    "replacement": "replacement",
    "regex": "regex",
    "separator": "separator",
    "modulus": "modulus",
    "action": "action",
}


def relabel_config(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A monitoring.coreos.com RelabelConfig (camelCase) as Prometheus's relabel_config."""
    unknown = set(rule) - set(_RELABEL_FIELDS)
    if unknown:
        raise ValueError(f"relabeling fields this translation does not know: {sorted(unknown)}")
    out = {_RELABEL_FIELDS[key]: value for key, value in rule.items()}
    if "action" in out:
        out["action"] = str(out["action"]).lower()
    return out


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_targets(
    pods: Iterable[Mapping[str, Any]], address_of: Callable[[Mapping[str, Any], int], str] | None = None
) -> list[dict[str, Any]]:
    """Target groups with kubernetes_sd's role=pod meta labels: one per container port.
    `address_of(pod, port)` gives the address (default: the pod IP)."""
    groups = []
    for pod in pods:
        metadata, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        meta = {
            "__meta_kubernetes_namespace": metadata["namespace"],
            "__meta_kubernetes_pod_name": metadata["name"],
            "__meta_kubernetes_pod_uid": metadata.get("uid", ""),
            "__meta_kubernetes_pod_node_name": spec.get("nodeName", ""),
            "__meta_kubernetes_pod_ip": status.get("podIP", ""),
            "__meta_kubernetes_pod_phase": status.get("phase", ""),
            "__meta_kubernetes_pod_ready": "true" if _ready(pod) else "false",
        }
        for key, value in (metadata.get("labels") or {}).items():
            meta[f"__meta_kubernetes_pod_label_{sanitize(key)}"] = value
            meta[f"__meta_kubernetes_pod_labelpresent_{sanitize(key)}"] = "true"
        for key, value in (metadata.get("annotations") or {}).items():
            meta[f"__meta_kubernetes_pod_annotation_{sanitize(key)}"] = value
            meta[f"__meta_kubernetes_pod_annotationpresent_{sanitize(key)}"] = "true"
        for container in spec.get("containers") or []:
            for port in container.get("ports") or []:
                labels = {
                    **meta,
                    "__meta_kubernetes_pod_container_name": container["name"],
                    "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                }
                number = int(port["containerPort"])
                address = (
                    address_of(pod, number)
                    if address_of is not None
                    else f"{status.get('podIP') or '0.0.0.0'}:{number}"
                )
                groups.append({"targets": [address], "labels": labels})
    return groups


def _selector_relabelings(selector: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        out.append(
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_pod_label_{sanitize(key)}",
                    f"__meta_kubernetes_pod_labelpresent_{sanitize(key)}",
                ],
                "regex": f"({value});true",
            }
        )
    for expression in selector.get("matchExpressions") or []:
        key, operator = sanitize(expression["key"]), expression["operator"]
        values = "|".join(expression.get("values") or [])
        both = [f"__meta_kubernetes_pod_label_{key}", f"__meta_kubernetes_pod_labelpresent_{key}"]
        present = [f"__meta_kubernetes_pod_labelpresent_{key}"]
        rule = {
            "In": {"action": "keep", "source_labels": both, "regex": f"({values});true"},
            "NotIn": {"action": "drop", "source_labels": both, "regex": f"({values});true"},
            "Exists": {"action": "keep", "source_labels": present, "regex": "true"},
            "DoesNotExist": {"action": "drop", "source_labels": present, "regex": "true"},
        }.get(operator)
        if rule is None:
            raise ValueError(f"unknown selector operator {operator!r}")
        out.append(rule)
    return out


_TMP_JOB = "__tmp_prometheus_job_name"


def _filter(action: str, label: str, regex: str) -> dict[str, Any]:
    return {"action": action, "source_labels": [label], "regex": regex}


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit) and duration[: -len(unit)].isdigit():
            return int(duration[: -len(unit)]) * units[unit]
    raise ValueError(f"unsupported duration {duration!r}")


def pod_monitor_scrape_configs(
    monitor: Mapping[str, Any],
    service_discovery: Mapping[str, Any],
    *,
    prometheus: PrometheusSettings | None = None,
    discovery_relabelings: Sequence[Mapping[str, Any]] = (),
    max_interval_s: float | None = None,
) -> list[dict[str, Any]]:
    """The scrape configs prometheus-operator generates for one PodMonitor, in its order
    (pkg/prometheus/promcfg.go, generatePodMonitorConfig): job `podMonitor/<ns>/<name>/<i>`,
    `honor_labels` (false unless the endpoint asks and the Prometheus does not override),
    then the relabelings: the job into `__tmp_prometheus_job_name`, drop Failed/Succeeded
    pods, keep the selector's pods and the endpoint's port, set `namespace`, `container`,
    `pod`, `job` (`<ns>/<name>`), `endpoint`; then the monitor's own relabelings; then,
    with `enforcedNamespaceLabel`, that label set to the monitor's namespace, last. The
    monitor's metricRelabelings get the same enforcement appended.

    `service_discovery` stands in for kubernetes_sd (e.g. `{"static_configs": groups}`
    from `pod_targets`); `discovery_relabelings` run first, for what service discovery
    would know and the stand-in does not (an address); `max_interval_s` caps the
    monitor's interval so tests need not wait 15 s per scrape. A monitor without a
    namespaceSelector sees its own namespace only, as in a cluster."""
    settings = prometheus or PrometheusSettings()
    metadata, spec = monitor["metadata"], monitor["spec"]
    namespace, name = metadata["namespace"], metadata["name"]
    enforced: list[dict[str, Any]] = []
    if settings.enforced_namespace_label:
        enforced = [{"target_label": settings.enforced_namespace_label, "replacement": namespace}]
    configs = []
    for index, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
        relabel: list[dict[str, Any]] = [{"source_labels": ["job"], "target_label": _TMP_JOB}]
        relabel += [dict(rule) for rule in discovery_relabelings]
        # kubernetes_sd's `namespaces`: the monitor's own unless its namespaceSelector
        # names others (or any) and the Prometheus lets it.
        selected = spec.get("namespaceSelector") or {}
        if settings.ignore_namespace_selectors or not (selected.get("any") or selected.get("matchNames")):
            relabel.append(_filter("keep", "__meta_kubernetes_namespace", namespace))
        elif not selected.get("any"):
            names = "|".join(selected["matchNames"])
            relabel.append(_filter("keep", "__meta_kubernetes_namespace", names))
        relabel.append(_filter("drop", "__meta_kubernetes_pod_phase", "(Failed|Succeeded)"))
        relabel += _selector_relabelings(spec.get("selector") or {})
        relabel.append(_filter("keep", "__meta_kubernetes_pod_container_port_name", endpoint["port"]))
        relabel += [
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ]
        for label in spec.get("podTargetLabels") or []:
            relabel.append(
                {
                    "source_labels": [f"__meta_kubernetes_pod_label_{sanitize(label)}"],
                    "target_label": sanitize(label),
                    "regex": "(.+)",
                    "replacement": "${1}",
                }
            )
        relabel.append({"target_label": "job", "replacement": f"{namespace}/{name}"})
        if spec.get("jobLabel"):
            relabel.append(
                {
                    "source_labels": [f"__meta_kubernetes_pod_label_{sanitize(spec['jobLabel'])}"],
                    "target_label": "job",
                    "regex": "(.+)",
                    "replacement": "${1}",
                }
            )
        relabel.append({"target_label": "endpoint", "replacement": endpoint["port"]})
        relabel += [relabel_config(rule) for rule in endpoint.get("relabelings") or []]
        relabel += enforced
        interval_s = _seconds(endpoint.get("interval", "30s"))
        if max_interval_s is not None:
            interval_s = min(interval_s, max_interval_s)
        config: dict[str, Any] = {
            "job_name": f"podMonitor/{namespace}/{name}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)) and not settings.override_honor_labels,
            "scrape_interval": f"{interval_s:g}s",
            "scrape_timeout": f"{interval_s:g}s",
            "metrics_path": endpoint.get("path", "/metrics"),
            **service_discovery,
            "relabel_configs": relabel,
        }
        metric_relabel = [relabel_config(rule) for rule in endpoint.get("metricRelabelings") or []]
        metric_relabel += enforced
        if metric_relabel:
            config["metric_relabel_configs"] = metric_relabel
        configs.append(config)
    return configs


class PrometheusServer:
    """The real Prometheus on 127.0.0.1:<free port>, with storage in a temporary dir."""

    def __init__(
        self,
        scrape_configs: Sequence[dict[str, Any]],
        *,
        binary: str | None = None,
        scrape_interval_s: float = 1.0,
        workdir: Path | None = None,
    ) -> None:
        found = binary or shutil.which("prometheus")
        if found is None:
            raise FileNotFoundError("prometheus binary not found on PATH")
        self.binary = found
        self.scrape_configs = list(scrape_configs)
        self.scrape_interval_s = scrape_interval_s
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inferfleet-prom-"))
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        config = {
            "global": {
                "scrape_interval": f"{self.scrape_interval_s:g}s",
                "evaluation_interval": f"{self.scrape_interval_s:g}s",
            },
            "scrape_configs": self.scrape_configs,
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def start(self, timeout_s: float = 30.0) -> PrometheusServer:
        config = self._write_config()
        log = (self.workdir / "prometheus.log").open("ab")
        self._process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=2h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self._process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"prometheus not ready after {timeout_s}s: {self.log_tail()}")

    def reload(self, scrape_configs: Sequence[dict[str, Any]]) -> None:
        """Replace the scrape configs and have the running server re-read them."""
        self.scrape_configs = list(scrape_configs)
        self._write_config()
        request = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def log_tail(self, lines: int = 20) -> str:
        path = self.workdir / "prometheus.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=5) as response:
            return json.loads(response.read())

    def wait_for_targets(self, count: int, timeout_s: float = 30.0) -> None:
        """Block until `count` targets have been scraped successfully at least once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                targets = self.api("/api/v1/targets", state="active")["data"]["activeTargets"]
            except (urllib.error.URLError, OSError, KeyError):
                targets = []
            if sum(1 for target in targets if target.get("health") == "up") >= count:
                return
            time.sleep(0.2)
        raise TimeoutError(f"fewer than {count} targets up after {timeout_s}s")

    def wait_for(
        self, query: str, predicate: Callable[[list[Any]], bool], timeout_s: float = 30.0
    ) -> list[Any]:
        """Poll an instant query until its result satisfies `predicate`."""
        deadline = time.monotonic() + timeout_s
        result: list[Any] = []
        while time.monotonic() < deadline:
            try:
                result = self.api("/api/v1/query", query=query)["data"]["result"]
            except (urllib.error.URLError, OSError, KeyError):
                result = []
            if predicate(result):
                return result
            time.sleep(0.2)
        raise TimeoutError(f"{query!r} did not reach the expected value in {timeout_s}s; last: {result!r}")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def close(self) -> None:
        self.stop()
        if self._own_workdir and os.path.isdir(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
