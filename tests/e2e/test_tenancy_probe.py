"""Tenants' model sources on the real API server: no Secret access, nothing shared blocks.

Two teams, each a namespace at Pod Security `restricted`. The operator runs with the
chart's ServiceAccount and RBAC (which grant no Secret at all). Team A names three model
sources that answer one byte every 5 s; team B a private hub model whose token lives in
its own Secret. Each model the catalog lacks gets a probe Job in its own namespace, which
the suite runs as the pods' kubelet (tests/toolkit/probe_kubelet.py: the real `inferfleet
cache probe`, the Secret as files, the result posted as the termination message).

- team B's new service is planned from its probe's result while team A's probes still
  trickle (the operator waits on none of them);
- team A's services end Failed with DeadlineExceeded, each in its own status;
- the operator's identity never asked for a Secret (the audit log), and the verdicts
  survive a restart without a new probe.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Operators
from tests.e2e.harness import NAMESPACE_LABEL, Audit, Cluster, conditions, eventually, holds, token_kubeconfig
from tests.integration.chart.helmchart import gen_install
from tests.integration.fetcher.hub_server import FakeRepo, HubServer
from tests.toolkit.model_sources import (
    UNCATALOGUED_MODEL,
    HostileServer,
    HostileState,
    uncatalogued_model_files,
)
from tests.toolkit.probe_kubelet import ProbeKubelet

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# The chart's settings but for where things listen (the suite's own, as in test_rbac).
LOCAL_SETTINGS = {
    "INFERFLEET_LOG_FORMAT",
    "INFERFLEET_LIVENESS_PORT",
    "INFERFLEET_METRICS_PORT",
    "INFERFLEET_WEBHOOK_PORT",
    "INFERFLEET_PROMETHEUS_URL",
    "INFERFLEET_PROMETHEUS_TIMEOUT_S",
    "INFERFLEET_SYNC_PERIOD_S",
}
PROBE_DEADLINE_S = 30
SLOW_SERVICES = 3


def team_namespace(cluster: Cluster, team: str) -> str:
    name = f"e2e-{team}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl(
        "label",
        "namespace",
        name,
        f"{NAMESPACE_LABEL}=true",
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    return name


def secret(namespace: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hub-token", "namespace": namespace},
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def service(name: str, namespace: str, model: str) -> dict[str, Any]:
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": model, "credentialsSecretRef": {"name": "hub-token", "key": "token"}},
            "workload": {
                "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
                "outputTokens": {"p50": 200, "p95": 400, "p99": 800},
                "peakRequestsPerSecond": 2,
            },
            "tiers": [{"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 1, "maxReplicas": 2}],
            "cache": {"mode": "none"},
        },
    }


@pytest.fixture
def sources() -> Iterator[tuple[HubServer, HostileServer]]:
    with HubServer() as hub, HostileServer(HostileState("slow", interval_s=5.0)) as slow:
        hub.add_repo(FakeRepo(UNCATALOGUED_MODEL, token="hf_team_b")).add_commit(uncatalogued_model_files())
        yield hub, slow


def chart_operator(cluster: Cluster, namespace: str, operators: Operators, tmp_path: Path) -> tuple[Any, str]:
    """The operator with the chart's ServiceAccount, RBAC, arguments and settings."""
    release = f"probe-{uuid.uuid4().hex[:5]}"
    objects = gen_install.render_chart({}, name=release, namespace=namespace)
    rbac = [obj for obj in objects if obj["kind"] in RBAC_KINDS]
    for obj in rbac:
        if obj["kind"].startswith("Cluster"):
            obj["metadata"].setdefault("labels", {})[NAMESPACE_LABEL] = "true"
    rules = [
        rule for obj in rbac if obj["kind"] in ("ClusterRole", "Role") for rule in obj.get("rules") or []
    ]
    assert rules and not any("secrets" in rule.get("resources", []) for rule in rules)
    cluster.apply(rbac, manager="helm")
    (account,) = [obj["metadata"]["name"] for obj in rbac if obj["kind"] == "ServiceAccount"]
    kubeconfig = token_kubeconfig(cluster, namespace, account, tmp_path / "chart-sa.kubeconfig")
    (deployment,) = [obj for obj in objects if obj["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {
        item["name"]: item["value"]
        for item in container["env"]
        if "value" in item and item["name"] not in LOCAL_SETTINGS
    }
    env["INFERFLEET_MODEL_PROBE_DEADLINE_S"] = str(PROBE_DEADLINE_S)
    operator = operators.start(
        namespace,
        name="chart",
        kubeconfig=kubeconfig,
        run_args=[arg for arg in container["args"][1:] if not arg.startswith("--webhook")],
        lease_namespace=namespace,
        env=env,
    )
    return operator, f"system:serviceaccount:{namespace}:{account}"


def verdict(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = (cluster.service(namespace, name).get("status") or {}).get("modelSource") or {}
    return found


def probe_jobs(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return cluster.list("batch/v1/jobs", namespace, "inferfleet.dev/component=model-probe")


def test_a_slow_tenant_delays_no_other_and_the_operator_reads_no_secret(
    cluster: Cluster,
    namespace: str,
    operators: Operators,
    sources: tuple[HubServer, HostileServer],
    tmp_path: Path,
) -> None:
    hub, slow = sources
    team_a, team_b = team_namespace(cluster, "team-a"), team_namespace(cluster, "team-b")
    cluster.apply([secret(team_a, "hf_team_a"), secret(team_b, "hf_team_b")], manager="kubectl")
    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    mark = audit.mark() if audit else 0
    operator, user = chart_operator(cluster, namespace, operators, tmp_path)

    def environment(pod_namespace: str, pod: Any) -> dict[str, str]:
        return {"HF_ENDPOINT": slow.endpoint if pod_namespace == team_a else hub.endpoint}

    with ProbeKubelet(cluster.kubectl, (team_a, team_b), environment) as kubelet:
        cluster.apply([service(f"slow-{i}", team_a, f"acme/slow-{i}") for i in range(SLOW_SERVICES)])

        def trickling() -> None:
            assert len(probe_jobs(cluster, team_a)) == SLOW_SERVICES
            running = {pod for ns, pod in kubelet._seen if ns == team_a}
            assert len(running) == SLOW_SERVICES, f"probe pods run so far: {running}"

        eventually(trickling, 90, what="team A's probes to be reading their slow sources")
        # The probe pods were admitted at Pod Security `restricted`, with no API token.
        pods = cluster.list("v1/pods", team_a, "inferfleet.dev/component=model-probe")
        assert pods and all(p["spec"]["automountServiceAccountToken"] is False for p in pods)

        started = time.monotonic()
        cluster.apply([service("chat", team_b, UNCATALOGUED_MODEL)])

        def planned() -> None:
            live = cluster.service(team_b, "chat")
            found = verdict(cluster, team_b, "chat")
            assert found.get("state") == "Resolved", (found or conditions(live), kubelet.run_of(team_b))
            plan = (live.get("status") or {}).get("plan") or []
            assert plan and plan[0]["feasible"], plan

        eventually(planned, 60, what="team B's service to be planned from its probe")
        planned_s = time.monotonic() - started
        # ... while every one of team A's probes is still trickling: nobody waited on them.
        states = {verdict(cluster, team_a, f"slow-{i}").get("state") for i in range(SLOW_SERVICES)}
        assert states == {"Probing"}, states
        assert planned_s < PROBE_DEADLINE_S, planned_s
        read = conditions(cluster.service(team_b, "chat")).get("ModelConfigRead") or {}
        assert (read.get("status"), read.get("reason")) == ("True", "ConfigRead"), read
        (run,) = kubelet.run_of(team_b)
        assert run.exit_code == 0 and '"ok":true' in run.message
        # The token the probe used was team B's own, from its Secret.
        assert any(h.get("authorization") == "Bearer hf_team_b" for _, _, h in hub.state.seen) or any(
            h.get("Authorization") == "Bearer hf_team_b" for _, _, h in hub.state.seen
        )

        def failed() -> None:
            for i in range(SLOW_SERVICES):
                found = verdict(cluster, team_a, f"slow-{i}")
                assert (found.get("state"), found.get("reason")) == ("Failed", "DeadlineExceeded"), found

        eventually(failed, PROBE_DEADLINE_S + 90, what="team A's probes to fail at their deadline")
        assert not kubelet.errors, kubelet.errors
        eventually(lambda: _no_jobs(cluster, team_b), 60, what="team B's finished probe Job to be pruned")

    # A restart keeps every verdict: team B stays planned and no probe runs again.
    operator.stop()
    operator.start()
    time.sleep(5)

    def steady() -> None:
        assert verdict(cluster, team_b, "chat").get("state") == "Resolved"
        assert probe_jobs(cluster, team_b) == []

    holds(steady, 10)

    if audit is not None:
        calls = audit.events(mark, users=[user])
        assert calls, "the audit log saw nothing of the operator"
        assert not [e for e in calls if e.resource.startswith("secrets")], "the operator asked for a Secret"
        denied = sorted(
            {f"{e.verb} {e.resource}" for e in calls if e.code == 403 and e.authorization == "forbid"}
        )
        assert not denied, denied
        # Server-side apply: a PATCH that creates.
        written = {"create", "patch"}
        created = {e.namespace for e in calls if e.resource == "jobs" and e.verb in written and e.code < 300}
        assert {team_a, team_b} <= created


def _no_jobs(cluster: Cluster, namespace: str) -> None:
    assert probe_jobs(cluster, namespace) == []
