"""Status and Events a tenant's text reaches: bounded and escaped at every writer.

The tenant names an inline GPU with a bidi override and a newline (a forged line in
`kubectl describe`), and a source whose error text is a megabyte (status.plan[].reasons
was 1.1 MB at 6e505f6, and at 3 MB the status write fails). The reconciler's status and
Events, the autoscaler's, and the CLI's table all show the text escaped and cut.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferfleet import planner
from inferfleet.api import labels
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.promql.queries import Signal
from inferfleet.autoscaling.promql.signals import SignalSnapshot
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from tests.toolkit import reconciled as tk
from tests.unit.api.samples import base_spec, document
from tests.unit.autoscaler.conftest import ScriptedReader
from tests.unit.autoscaler.test_runner import NS, T0, two_tier
from tests.unit.reconcile.fixtures import Control, example

FORBIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# 245 characters: within the CRD's 253 for a name; 100 bidi isolates escape to 600.
GPU_NAME = "RTX\u202eevil\n  Degraded: False" + "\u2066" * 100 + "A" * 115
ENDPOINT_ERROR = "<html>" + "E" * 1_100_000 + "\u202e</html>"


# The caps the operator promises (api.safe_text): a condition message, an Event message.
CONDITION_MESSAGE_MAX_CHARS = 8192
EVENT_MESSAGE_MAX_CHARS = 1024


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def raw(value: Any) -> set[str]:
    if isinstance(value, str):
        return {c for c in value if unicodedata.category(c) in FORBIDDEN}
    if isinstance(value, dict):
        return set().union(set(), *(raw(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(set(), *(raw(v) for v in value))
    return set()


def hostile() -> dict[str, Any]:
    body = example()
    body["spec"]["tiers"][0]["gpu"] = {
        "name": GPU_NAME,
        "memoryGiB": 48,
        "bf16Tflops": 180,
        "memoryBandwidthTBs": 0.96,
        "nodeLabels": {"nvidia.com/gpu.product": "RTX-6000-Ada"},
    }
    return body


def with_endpoint_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a source's error body made of the plan at 6e505f6: one reason line (the
    planner's first tier gets it, wherever the design plans)."""
    plan_tier = planner.plan_tier

    def with_error(*args: Any, **kwargs: Any) -> Any:
        found = plan_tier(*args, **kwargs)
        if found.name != "l4":
            return found
        why = f"config.json could not be read: {ENDPOINT_ERROR}"
        return found.model_copy(update={"reasons": [why, *found.reasons]})

    monkeypatch.setattr(planner, "plan_tier", with_error)


def test_the_reconciler_writes_tenant_text_escaped_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    control = Control()
    with_endpoint_error(monkeypatch)
    control.submit(hostile())
    control.reconcile()

    status = control.status()
    assert not raw(status), raw(status)
    assert json_bytes(status) < 64 * 1024
    tier = status["plan"][0]
    assert tier["gpu"].startswith("RTX\\u202eevil\\n  Degraded: False\\u2066")
    assert tier["reasons"][0].endswith("more characters cut]") and len(tier["reasons"][0]) <= 1024
    assert any("\\u202eevil\\n" in line for line in tier["reasons"][1:])
    events = control.cluster.events
    assert events and all(len(e["message"]) <= 1024 and not raw(e["message"]) for e in events)
    planned = [e for e in events if e["reason"] == "PlanChanged"]
    assert planned and "RTX\\u202eevil\\n" in planned[0]["message"]

    # Settled (the pass after the one that created the node-cache claim sees it bound):
    # what the pass computes is what status holds, so it writes nothing.
    control.reconcile()
    writes = sum(op == "patch_status" for op, _ in control.cluster.calls)
    control.reconcile()
    assert sum(op == "patch_status" for op, _ in control.cluster.calls) == writes


class HostileReader(ScriptedReader):
    """A Prometheus answering errors with the body an endpoint chose."""

    def read(self, now_s: float) -> SignalSnapshot:
        self.reads += 1
        return SignalSnapshot(
            time_s=now_s, failed=dict.fromkeys(Signal, "bad gateway: \u202eevil\n" + "x" * 50_000)
        )


def test_the_autoscaler_writes_error_text_escaped_and_bounded(cluster: InMemoryCluster) -> None:
    two_tier(cluster)
    reader = HostileReader()
    try:
        settings = OperatorSettings(sync_period_s=15, predictive_enabled=False, scale_down_stabilization_s=60)
        autoscaler = Autoscaler(cluster, reader, settings)
        autoscaler.run_once(T0)
        status = tk.status(cluster, NS, "chat")
        assert not raw(status), raw(status)
        active = tk.condition(cluster, NS, "chat", labels.CONDITION_SCALING_ACTIVE)
        assert active is not None and "\\u202eevil\\n" in active["message"]
        assert len(active["message"]) <= CONDITION_MESSAGE_MAX_CHARS
        assert all(not raw(e["message"]) and len(e["message"]) <= 1024 for e in cluster.events)
        # The same failure next tick: nothing new to write.
        writes = sum(op == "patch_status" for op, _ in cluster.calls)
        autoscaler.run_once(T0 + 15)
        assert sum(op == "patch_status" for op, _ in cluster.calls) == writes
    finally:
        reader.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from inferfleet.cli import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
        encoding="utf-8",
    )


def test_the_cli_prints_tenant_text_escaped_and_keeps_the_json_contract(tmp_path: Path) -> None:
    spec = base_spec()
    spec["tiers"] = [
        {
            "name": "odd",
            "gpu": {"name": GPU_NAME, "memoryGiB": 80, "bf16Tflops": 900, "memoryBandwidthTBs": 3},
        }
    ]
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(document(spec), allow_unicode=True), encoding="utf-8")
    table = _cli("plan", "-f", str(path))
    assert table.returncode == 0, table.stderr
    assert "RTX\\u202eevil\\n" in table.stdout
    assert not raw(table.stdout.replace("\n", "")), raw(table.stdout.replace("\n", ""))
    assert "  Degraded: False" not in table.stdout.splitlines()
    plan = _cli("plan", "-f", str(path), "-o", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["tiers"][0]["gpu"] == GPU_NAME  # the contract: the name as given
    assert "\u202e" not in plan.stdout  # JSON escapes it (\u202e) on the terminal
