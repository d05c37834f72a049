"""The shipped alert rules, unit-tested with promtool against synthetic vLLM series."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferfleet.api.labels import SCRAPE_JOB_SERVER
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

RULES = REPO_ROOT / "charts" / "inferfleet" / "files" / "prometheus-rules.yaml"
# What the operator's PodMonitor attaches: the target's namespace, the tier's labels.
TIER = {"namespace": "ns", "inferfleet_service": "chat", "inferfleet_tier": "h100"}
OPERATOR_JOB = {"job": SCRAPE_JOB_SERVER}


def series(name: str, values: str, **extra: str) -> dict[str, str]:
    """A series as the operator's PodMonitor scrapes it (its job unless `extra` says)."""
    labels = ",".join(f'{key}="{value}"' for key, value in {**OPERATOR_JOB, **TIER, **extra}.items())
    return {"series": f"{name}{{{labels}}}", "values": values}


def ttft_buckets(prefix: str, slow_per_min: int, fast_per_min: int) -> list[dict[str, str]]:
    """Observations: `fast` at <= 0.1 s and `slow` in the (2.5, 5] s bucket, per minute."""
    name = f"{prefix}time_to_first_token_seconds_bucket"
    total = slow_per_min + fast_per_min
    return [
        series(name, f"0+{fast_per_min}x20", pod="p0", le="0.1"),
        series(name, f"0+{fast_per_min}x20", pod="p0", le="2.5"),
        series(name, f"0+{total}x20", pod="p0", le="5.0"),
        series(name, f"0+{total}x20", pod="p0", le="+Inf"),
    ]


def alert(
    name: str, severity: str, extra: dict[str, str] | None = None, **annotations: str
) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": severity, **TIER, **(extra or {})},
        "exp_annotations": annotations,
    }


CASES: list[dict[str, Any]] = [
    {
        # Every request slow, exposed under the current `vllm:` names: page.
        "input_series": ttft_buckets("vllm:", slow_per_min=10, fast_per_min=0),
        "alert_rule_test": [
            {
                "eval_time": "10m",
                "alertname": "InferfleetTTFTP99Critical",
                "exp_alerts": [
                    alert(
                        "InferfleetTTFTP99Critical",
                        "page",
                        summary="TTFT p99 above 2 s on ns/chat tier h100",
                        description=(
                            "Users wait 4.975s for the first token (p99 over 5 minutes). Check the tier's "
                            "queue, Ready replicas and the autoscaler's last decision (kubectl get ifs -o "
                            "yaml, status.lastScalingDecision)."
                        ),
                    )
                ],
            }
        ],
    },
    {
        # Healthy latency under the escaped `vllm_` names: nothing fires.
        "input_series": ttft_buckets("vllm_", slow_per_min=0, fast_per_min=100),
        "alert_rule_test": [
            {"eval_time": "15m", "alertname": "InferfleetTTFTP99Critical", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "InferfleetTTFTP99High", "exp_alerts": []},
        ],
    },
    {
        # KV usage at 90% under the pre-0.9.2 escaped name: warn after 10 minutes.
        "input_series": [series("vllm_gpu_cache_usage_perc", "0.9x30", pod="p1")],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "InferfleetKVCacheUsageHigh", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "InferfleetKVCacheUsageHigh",
                "exp_alerts": [
                    alert(
                        "InferfleetKVCacheUsageHigh",
                        "warning",
                        {"pod": "p1"},
                        summary="KV cache above 85% on pod p1 (ns/chat tier h100)",
                        description=(
                            "KV cache usage is 90%; vLLM preempts sequences when it runs out. More "
                            "replicas, a larger maxModelLen budget or an fp8 KV cache help."
                        ),
                    )
                ],
            },
        ],
    },
    {
        # The queue grows by 6 requests a minute: warn once it has grown for 5 minutes.
        "input_series": [series("vllm:num_requests_waiting", "0+6x30", pod="p0")],
        "alert_rule_test": [
            {"eval_time": "3m", "alertname": "InferfleetQueueGrowing", "exp_alerts": []},
            {
                "eval_time": "12m",
                "alertname": "InferfleetQueueGrowing",
                "exp_alerts": [
                    alert(
                        "InferfleetQueueGrowing",
                        "warning",
                        summary="Request queue growing for 5 minutes on ns/chat tier h100",
                        description=(
                            "The queue grows by 6.0 requests a minute. Check the Scaling condition: replicas "
                            "may be stuck cold-starting."
                        ),
                    )
                ],
            },
        ],
    },
    {
        # A flat queue is not an alert, however deep.
        "input_series": [series("vllm:num_requests_waiting", "50x30", pod="p0")],
        "alert_rule_test": [{"eval_time": "15m", "alertname": "InferfleetQueueGrowing", "exp_alerts": []}],
    },
]


# Another team's pod, scraped by its own PodMonitor (job `<its namespace>/<monitor>`),
# whose series claim the tier's labels (a monitor's relabelings can write any of them, or
# `honorLabels: true` keeps what the pod exports): slow, failing, full and queueing.
FORGED = {"job": "evil/forger"}
FORGED_CASE: dict[str, Any] = {
    "input_series": [
        *(
            {**entry, "series": entry["series"].replace(f'job="{SCRAPE_JOB_SERVER}"', 'job="evil/forger"')}
            for entry in ttft_buckets("vllm:", slow_per_min=10, fast_per_min=0)
        ),
        series("vllm:kv_cache_usage_perc", "0.99x30", pod="p1", **FORGED),
        series("vllm:num_requests_waiting", "0+60x30", pod="p0", **FORGED),
        series("vllm:request_success_total", "0+60x30", pod="p0", finished_reason="error", **FORGED),
    ],
    "alert_rule_test": [
        {"eval_time": "15m", "alertname": name, "exp_alerts": []}
        for name in (
            "InferfleetTTFTP99Critical",
            "InferfleetTTFTP99High",
            "InferfleetKVCacheUsageHigh",
            "InferfleetQueueGrowing",
            "InferfleetRequestErrorsHigh",
        )
    ],
}


def promtool_test(tmp_path: Path, cases: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (it ships with Debian's prometheus package)")
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", **case} for case in cases],
    }
    path = tmp_path / "rules_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, check=False)


def test_rules_pass_promtool_check() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (it ships with Debian's prometheus package)")
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_fire_on_the_seed_thresholds(tmp_path: Path) -> None:
    result = promtool_test(tmp_path, CASES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_series_another_job_forges_for_a_tier_raise_no_alert(tmp_path: Path) -> None:
    """The rules read the operator's job only: another team's monitor cannot page for a tier."""
    result = promtool_test(tmp_path, [FORGED_CASE])
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_groups_are_what_the_chart_wraps() -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert set(document) == {"groups"}
    alerts = {
        rule["alert"]: rule for group in document["groups"] for rule in group["rules"] if "alert" in rule
    }
    assert alerts["InferfleetTTFTP99Critical"]["labels"]["severity"] == "page"
    assert alerts["InferfleetKVCacheUsageHigh"]["labels"]["severity"] == "warning"
    assert alerts["InferfleetQueueGrowing"]["for"] == "5m"
