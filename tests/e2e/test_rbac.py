"""RBAC exactly sufficient: the operator runs with the chart's ServiceAccount (a token from
the TokenRequest API), the chart's rendered RBAC and the chart's own `inferfleet run`
arguments and settings, through reconcile, events, the autoscaler's scale-up and
scale-down (with pod-deletion-cost where the values turn it on), the webhook
registration and the leader Lease. Any 403 from the authorizer fails.

(That the chart grants nothing beyond what the code calls is the chart test's job:
tests/integration/chart/test_rbac.py.)"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.e2e.conftest import Operators
from tests.e2e.harness import Audit, Cluster, conditions, eventually, example, token_kubeconfig
from tests.e2e.test_restart import deployment_replicas, scale
from tests.integration.chart.helmchart import gen_install

RBAC_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
}
# The (empty) webhook configuration the chart holds and the replicas fill in.
WEBHOOK_KINDS = {"ValidatingWebhookConfiguration"}
# Chart arguments replaced by the suite's own: the webhook is reached on loopback (with
# the suite's certificate where the values ask for cert-manager's) instead of the
# in-cluster Service.
REPLACED_ARGS = ("--webhook-host", "--webhook-cert-dir")
# Settings the suite sets itself (ports, Prometheus, log format, a short sync period).
LOCAL_SETTINGS = {
    "INFERFLEET_LOG_FORMAT",
    "INFERFLEET_LIVENESS_PORT",
    "INFERFLEET_METRICS_PORT",
    "INFERFLEET_WEBHOOK_PORT",
    "INFERFLEET_PROMETHEUS_URL",
    "INFERFLEET_PROMETHEUS_TIMEOUT_S",
    "INFERFLEET_SYNC_PERIOD_S",
}


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {
                "replicaCount": 2,
                "watchNamespaces": ["WATCHED"],
                "webhook": {"enabled": True, "certManager": {"enabled": True}},
                "scaling": {"podDeletionCost": True},
            },
            id="ha-namespaced-webhook",
        ),
    ],
)
def test_operator_with_the_charts_service_account_never_gets_403(
    cluster: Cluster, namespace: str, operators: Operators, values: dict[str, Any], tmp_path: Any
) -> None:
    values = _substitute(values, namespace)
    release = f"rbac-{uuid.uuid4().hex[:5]}"
    objects = gen_install.render_chart(values, name=release, namespace=namespace)
    rbac = [obj for obj in objects if obj["kind"] in RBAC_KINDS]
    for obj in rbac:
        if obj["kind"].startswith("Cluster"):
            obj["metadata"].setdefault("labels", {})["inferfleet.dev/e2e"] = "true"  # removed at the end
    cluster.apply(rbac, manager="helm")
    webhook_configurations = [obj for obj in objects if obj["kind"] in WEBHOOK_KINDS]
    if webhook_configurations:
        cluster.apply(webhook_configurations, manager="helm")
    (account,) = [obj["metadata"]["name"] for obj in rbac if obj["kind"] == "ServiceAccount"]
    kubeconfig = token_kubeconfig(cluster, namespace, account, tmp_path / "chart-sa.kubeconfig")
    (deployment,) = [obj for obj in objects if obj["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    chart_args = [arg for arg in container["args"][1:] if not arg.startswith(REPLACED_ARGS)]
    assert container["args"][0] == "run"
    # The chart's settings, but for where things listen and what they talk to on loopback.
    chart_env = {
        item["name"]: item["value"]
        for item in container["env"]
        if "value" in item and item["name"] not in LOCAL_SETTINGS
    }
    webhook = bool(values.get("webhook", {}).get("enabled", True))
    cert_manager = bool(values.get("webhook", {}).get("certManager", {}).get("enabled"))

    audit = Audit(cluster.audit_log) if cluster.audit_log else None
    mark = audit.mark() if audit else 0
    operator = operators.start(
        namespace,
        name="chart",
        kubeconfig=kubeconfig,
        webhook=webhook,
        webhook_certificate=cert_manager,
        run_args=chart_args,
        lease_namespace=namespace,
        env=chart_env,
    )
    user = f"system:serviceaccount:{namespace}:{account}"

    body = example("llama-8b-chat", namespace)
    tier = body["spec"]["tiers"][0]
    # Scale down without waiting, so the autoscaler's scale-down (and its pod-deletion-cost
    # annotations) happens within the test.
    body["spec"]["scaling"]["scaleDown"] = {"stabilizationSeconds": 0, "cooldownSeconds": 0}
    # A new service has no history the forecaster trusts (under 80 % of the last half
    # hour), and the autoscaler never scales down on a history with holes: reactive only.
    body["spec"]["scaling"]["predictive"] = {"enabled": False}
    cluster.apply([body])

    def ready() -> None:
        live = cluster.service(namespace, body["metadata"]["name"])
        assert conditions(live).get("Ready", {}).get("status") == "True", conditions(live)

    eventually(ready, 150, what="Ready with the chart's identity")
    workload = f"{body['metadata']['name']}-{tier['name']}"
    # Above the warm minimum with no load: the autoscaler scales down, marking idle pods.
    scale(cluster, namespace, workload, tier["minReplicas"] + 2)
    eventually(
        lambda: _at(cluster, namespace, workload, tier["minReplicas"], body["metadata"]["name"]),
        120,
        what="the autoscaler to scale down to the warm minimum",
    )
    # Below the warm minimum: the autoscaler scales back up.
    scale(cluster, namespace, workload, 0)
    eventually(
        lambda: _at(cluster, namespace, workload, tier["minReplicas"], body["metadata"]["name"]),
        90,
        what="the autoscaler to restore the warm minimum",
    )
    if webhook:
        bad = example("llama-8b-chat", namespace)
        bad["metadata"]["name"] = "bad"
        bad["spec"]["tiers"][0]["gpu"] = {"name": "custom", "memoryGiB": -1}
        eventually(lambda: _denied(cluster, bad), 60, what="the webhook (registered by the chart's identity)")
    operator.stop()
    if webhook:
        # `helm uninstall` deletes what the release holds: no configuration of the webhook
        # outlives the operator.
        assert sorted(obj["kind"] for obj in webhook_configurations) == sorted(WEBHOOK_KINDS)
        for obj in webhook_configurations:
            cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=true")
        for kind in (*WEBHOOK_KINDS, "MutatingWebhookConfiguration"):
            left = cluster.kubectl("get", kind.lower(), "-o", "name", check=False)
            assert "validate.inferfleet.dev" not in left.stdout, f"{kind} left behind: {left.stdout}"

    # RBAC's own wording ('... is forbidden: User "..." cannot <verb> resource ...'); a 403
    # for another reason (an event in a namespace being deleted) is no RBAC gap.
    denial = re.compile(r'forbidden: User "[^"]+" cannot ')
    forbidden = [line for line in operator.text().splitlines() if denial.search(line)]
    assert not forbidden, "\n".join(forbidden[:20])
    if audit is not None:
        calls = audit.events(mark, users=[user])
        denied = sorted(
            {
                f"{e.verb} {e.group}/{e.resource} ns={e.namespace}"
                for e in calls
                if e.code == 403 and e.authorization == "forbid"
            }
        )
        assert any(e.authorization == "allow" for e in calls), (
            "the audit log carries no authorization decisions"
        )
        assert not denied, "RBAC denied the chart's ServiceAccount:\n" + "\n".join(denied)
        done = {(e.verb, e.resource) for e in calls if 200 <= e.code < 300}
        expected = {
            ("patch", "deployments/scale"),
            ("patch", "inferenceservices/status"),
            ("create", "events"),
        }
        if values.get("scaling", {}).get("podDeletionCost"):
            expected |= {("patch", "pods")}
        if values.get("replicaCount", 2) > 1:
            expected |= {("update", "leases")}
        if webhook:
            expected |= {("update", "validatingwebhookconfigurations")}
        assert expected <= done, f"not exercised: {sorted(expected - done)}"


def _substitute(values: dict[str, Any], namespace: str) -> dict[str, Any]:
    if "watchNamespaces" in values:
        values = {**values, "watchNamespaces": [namespace]}
    return values


def _at(cluster: Cluster, namespace: str, name: str, count: int, service: str) -> None:
    found = deployment_replicas(cluster, namespace, name)
    decision = (cluster.service(namespace, service).get("status") or {}).get("lastScalingDecision")
    assert found == count, f"{name}: {found} replicas, expected {count}; last decision: {decision}"


def _denied(cluster: Cluster, body: dict[str, Any]) -> None:
    import yaml

    done = cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(body), check=False)
    assert done.returncode != 0 and "denied the request" in done.stderr, done.stderr
