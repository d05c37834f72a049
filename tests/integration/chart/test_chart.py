"""The Helm chart through real Helm: lint, schema, rendered objects, generated files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from inferfleet.catalog import default_catalogs, placement
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.cluster import access
from inferfleet.config import ENV_PREFIX, OperatorSettings
from tests.conftest import REPO_ROOT
from tests.integration.chart.helmchart import (
    CHART_DIR,
    NAMESPACE,
    by_kind,
    env_of,
    gen_install,
    named,
    one,
    operator_container,
    render,
    values_file,
)

pytestmark = pytest.mark.integration

K8S_VERSION = "1.30"
# Kinds from CRDs that kubernetes-validate has no schema for.
CUSTOM_KINDS = {
    *("ServiceMonitor", "PrometheusRule", "KopfPeering", "ClusterKopfPeering", "Certificate", "Issuer")
}
FILES_DIR = CHART_DIR / "files"
HAS_MONITORING_FILES = (FILES_DIR / "grafana-dashboard.json").exists() and (
    FILES_DIR / "prometheus-rules.yaml"
).exists()


@pytest.fixture(scope="module")
def default_objects() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def full_objects() -> list[dict[str, Any]]:
    return render(values_file("full.yaml"))


# ---------------------------------------------------------------- lint and schema


@pytest.mark.parametrize("values_name", [None, "full.yaml"])
def test_lint_is_clean_in_strict_mode(values_name: str | None) -> None:
    values = values_file(values_name) if values_name else None
    report = helm.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE, kube_version="v1.30.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_bad_values_are_rejected_with_messages_naming_each_key() -> None:
    bad = values_file("bad.yaml")
    with pytest.raises(helm.HelmValuesError) as error:
        render(bad)
    message = str(error.value)
    keys = ("/replicaCount", "/scaling/headroom", "/scaling/mode", "/cache/nodePath", "/prometheus/url")
    for where in keys:
        assert where in message, f"{where} missing from: {message}"
    assert "unknownTopLevelKey" in message
    report = helm.lint(CHART_DIR, bad, namespace=NAMESPACE)
    assert report["errors"], "helm lint must fail on values the schema rejects"


@pytest.mark.parametrize(
    "override",
    [
        {"scaling": {"syncPeriodSeconds": 1}},
        {"watchNamespaces": ["Not_A_Namespace"]},
        {"catalog": {"gpus": [{"name": "X"}]}},
        {"catalog": {"gpus": [{"name": "X", "memoryGiB": 8, "bandwidthTBs": 1, "bf16Tflops": 9, "typo": 1}]}},
        {"extraEnv": [{"name": "INFERFLEET_HEADROOM", "value": "9"}]},
        {"image": {"digest": "latest"}},
        {"scaling": {"headroomm": 0.1}},
    ],
)
def test_schema_rejects_single_bad_values(override: dict[str, Any]) -> None:
    with helm.Chart.load(CHART_DIR) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values(override))


def test_catalog_schema_matches_the_operators_gpu_records() -> None:
    """values.schema.json's catalog item is the catalog's GpuSpec, field for field."""
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    item = schema["properties"]["catalog"]["properties"]["gpus"]["items"]
    gpu_schema = GpuSpec.model_json_schema(by_alias=True)
    assert set(item["properties"]) == set(gpu_schema["properties"]) - {"inline"}
    assert sorted(item["required"]) == sorted(gpu_schema["required"])
    assert item["additionalProperties"] is False


def test_every_value_is_documented() -> None:
    """Each key in values.yaml has a comment right above it, or is a map of documented keys.

    Inside free-form Kubernetes blobs (resources, securityContext, ...: objects the schema
    gives no properties) the blob's own comment documents it.
    """
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    lines = (CHART_DIR / "values.yaml").read_text(encoding="utf-8").splitlines()
    key = re.compile(r"^(\s*)([A-Za-z][\w]*):")
    stack: list[tuple[int, dict[str, Any] | None]] = [(-1, schema)]
    undocumented = []
    for i, line in enumerate(lines):
        match = key.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        node = parent.get("properties", {}).get(match.group(2)) if parent else None
        stack.append((indent, node))
        if parent is None or "properties" not in parent:
            continue  # free-form blob
        assert node is not None, f"values.yaml key {match.group(2)} is not in values.schema.json"
        previous = next((p for p in reversed(lines[:i]) if p.strip()), "")
        if not previous.strip().startswith("#") and "properties" not in node:
            undocumented.append(match.group(2))
    assert undocumented == []


# ---------------------------------------------------------------- rendered objects


def test_default_render_is_highly_available_with_the_webhook(default_objects: list[dict[str, Any]]) -> None:
    """Two replicas, one elected by the Lease; every replica serves the webhook."""
    kinds = sorted(obj["kind"] for obj in default_objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "Service",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ]
    deployment = one(default_objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    args = operator_container(default_objects)["args"]
    assert args[:2] == ["run", "--peering=inferfleet"]
    assert f"--webhook-host=inferfleet-webhook.{NAMESPACE}.svc" in args
    assert not any(a.startswith("--webhook-cert-dir") for a in args)  # each replica its own
    single = operator_container(render({"replicaCount": 1}))["args"]
    assert single[:2] == ["run", "--standalone"]
    container = operator_container(default_objects)
    assert container["command"] == ["inferfleet"]
    assert container["image"] == "ghcr.io/inferfleet/inferfleet:0.1.0"
    for obj in default_objects:
        if obj["kind"] not in {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"}:
            assert obj["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("values_name", [None, "full.yaml"])
def test_operator_pod_is_hardened(values_name: str | None) -> None:
    objects = render(values_file(values_name) if values_name else None)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    ctx = operator_container(objects)["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["privileged"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctx["runAsUser"] >= 10000
    resources = operator_container(objects)["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    # A writable /tmp since the root filesystem is read-only.
    mounts = {m["name"]: m["mountPath"] for m in operator_container(objects)["volumeMounts"]}
    assert mounts["tmp"] == "/tmp"


def test_probes_hit_kopfs_health_endpoint(full_objects: list[dict[str, Any]]) -> None:
    container = operator_container(full_objects)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = env_of(full_objects)
    assert ports["health"] == int(env["INFERFLEET_LIVENESS_PORT"])
    assert ports["metrics"] == int(env["INFERFLEET_METRICS_PORT"])
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_default_values_are_the_operators_defaults(default_objects: list[dict[str, Any]]) -> None:
    """The chart's defaults and OperatorSettings' defaults are the same settings."""
    env = env_of(default_objects)
    assert all(name.startswith(ENV_PREFIX) for name in env)
    fields = {ENV_PREFIX + name.upper() for name in OperatorSettings.model_fields}
    assert set(env) <= fields, f"env vars the operator does not read: {set(env) - fields}"
    optional = {
        "INFERFLEET_CATALOG_FILE",
        "INFERFLEET_PROMETHEUS_BEARER_TOKEN_FILE",
        "INFERFLEET_GATEWAY_NAME",
        "INFERFLEET_GATEWAY_NAMESPACE",
        "INFERFLEET_FRONT_DOOR_HOSTNAME",
        # Unset: every SLO the spec declares (not the same as an explicit ttft).
        "INFERFLEET_CAPACITY_SLOS",
    }
    assert fields - set(env) == optional
    assert OperatorSettings.from_env(env) == OperatorSettings()


def test_values_become_the_operators_settings(full_objects: list[dict[str, Any]]) -> None:
    settings = OperatorSettings.from_env(env_of(full_objects))
    values = values_file("full.yaml")
    scaling = values["scaling"]
    assert settings.namespaces == ("ml-serving", "ml-batch")
    assert settings.log_format == "text"
    assert settings.prometheus_url == values["prometheus"]["url"]
    assert settings.prometheus_timeout_s == 12.5
    assert settings.prometheus_bearer_token_file == "/var/run/secrets/inferfleet/prometheus/bearer"
    assert settings.scaling_mode == "advisory"
    assert settings.sync_period_s == scaling["syncPeriodSeconds"]
    assert settings.scale_up_stabilization_s == scaling["scaleUpStabilizationSeconds"]
    assert settings.scale_down_stabilization_s == scaling["scaleDownStabilizationSeconds"]
    assert settings.scale_down_max_replicas_per_step == scaling["scaleDownMaxReplicasPerStep"]
    assert settings.scale_down_max_percent_per_step == scaling["scaleDownMaxPercentPerStep"]
    assert settings.scale_up_cooldown_s == scaling["scaleUpCooldownSeconds"]
    assert settings.scale_down_cooldown_s == scaling["scaleDownCooldownSeconds"]
    assert settings.headroom == scaling["headroom"]
    assert settings.queue_depth_per_replica == scaling["queueDepthPerReplica"]
    assert settings.predictive_enabled is False
    assert settings.forecast_window_hours == scaling["forecastWindowHours"]
    assert settings.cold_start_margin_s == scaling["coldStartMarginSeconds"]
    assert settings.interruption_hold_min == scaling["interruptionHoldMinutes"]
    assert settings.capacity_slos == scaling["capacitySlos"] == "ttft"  # explicit, not the default
    assert settings.vllm_image == values["images"]["vllm"]["nvidia"]
    assert settings.vllm_image_amd == values["images"]["vllm"]["amd"]
    assert settings.epp_image == values["images"]["endpointPicker"]
    assert settings.pd_sidecar_image == values["images"]["pdSidecar"]
    assert settings.gateway_name == values["frontDoor"]["gateway"]["name"]
    assert settings.gateway_namespace == values["frontDoor"]["gateway"]["namespace"]
    assert settings.front_door_match == "hostname"
    assert settings.front_door_hostname == values["frontDoor"]["hostname"]
    assert settings.allowed_gateways == ("team-gateways/*", "shared/inference-gateway")
    assert settings.amd_supplemental_groups == (44, 992)
    assert settings.vllm_run_as_user == values["serving"]["runAsUser"]
    assert settings.vllm_run_as_root is True
    assert settings.model_probe_deadline_s == values["serving"]["modelProbeDeadlineSeconds"] == 90
    assert settings.operator_image == operator_container(full_objects)["image"]
    assert settings.operator_image.endswith("@" + values["image"]["digest"])
    assert settings.cache_node_path == values["cache"]["nodePath"]
    assert settings.cache_allowed_root == values["cache"]["allowedRoot"]
    assert settings.cache_budget_gib == values["cache"]["budgetGiB"]
    assert settings.catalog_file == "/etc/inferfleet/catalog/gpus.yaml"


def test_catalog_additions_are_mounted_where_the_operator_reads_them(
    full_objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    configmap = named(full_objects, "ConfigMap", "-catalog")
    (tmp_path / "gpus.yaml").write_text(configmap["data"]["gpus.yaml"], encoding="utf-8")
    rendered = yaml.safe_load(configmap["data"]["gpus.yaml"])["gpus"]
    assert rendered == values_file("full.yaml")["catalog"]["gpus"]
    # The operator's own loader reads it and the planner then knows the GPU.
    catalogs = default_catalogs().with_gpu_file(tmp_path / "gpus.yaml")
    gpu = catalogs.gpu("RTX-6000-Ada")
    assert gpu is not None and gpu.memory_gib == 47.5 and gpu.fp8_native
    pod = one(full_objects, "Deployment")["spec"]["template"]["spec"]
    cm_name = configmap["metadata"]["name"]
    volume = next(v for v in pod["volumes"] if v.get("configMap", {}).get("name") == cm_name)
    mount = next(m for m in operator_container(full_objects)["volumeMounts"] if m["name"] == volume["name"])
    catalog_file = env_of(full_objects)["INFERFLEET_CATALOG_FILE"]
    assert catalog_file == f"{mount['mountPath']}/gpus.yaml" and mount["readOnly"] is True


def test_prometheus_token_is_a_mounted_file_never_an_env_value(full_objects: list[dict[str, Any]]) -> None:
    container = operator_container(full_objects)
    assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in container["env"])
    pod = one(full_objects, "Deployment")["spec"]["template"]["spec"]
    secret_volume = next(v for v in pod["volumes"] if v["name"] == "prometheus-token")
    assert secret_volume["secret"]["secretName"] == "prometheus-reader"
    mount = next(m for m in container["volumeMounts"] if m["name"] == secret_volume["name"])
    assert mount["readOnly"] is True
    token_file = env_of(full_objects)["INFERFLEET_PROMETHEUS_BEARER_TOKEN_FILE"]
    assert token_file.startswith(mount["mountPath"] + "/")


def test_two_replicas_elect_one_leader_and_spread(full_objects: list[dict[str, Any]]) -> None:
    deployment = one(full_objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert operator_container(full_objects)["args"][:2] == ["run", "--peering=inferfleet-ha"]
    # One election (the Lease): no kopf peering object of either kind.
    assert by_kind(full_objects, "KopfPeering") == [] == by_kind(full_objects, "ClusterKopfPeering")
    assert one(full_objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    clustered = render({"replicaCount": 2})
    assert operator_container(clustered)["args"][:2] == ["run", "--peering=inferfleet"]
    pod = one(clustered, "Deployment")["spec"]["template"]["spec"]
    assert "podAntiAffinity" in pod["affinity"]
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert set(spread) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    assert {c["whenUnsatisfiable"] for c in spread.values()} == {"ScheduleAnyway"}
    assert (
        "topologySpreadConstraints"
        not in one(render({"replicaCount": 1}), "Deployment")["spec"]["template"]["spec"]
    )


def test_operator_pod_keeps_off_every_gpu_node_the_operator_knows(
    default_objects: list[dict[str, Any]], full_objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The chart's node affinity is the operator's own rule (catalog.placement), with the
    chart's catalog additions; unlabelled nodes qualify; `affinity` or `offGpuNodes:
    false` replace it."""

    def required(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        affinity = one(objects, "Deployment")["spec"]["template"]["spec"]["affinity"]
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert len(terms) == 1, terms
        expressions: list[dict[str, Any]] = terms[0]["matchExpressions"]
        return expressions

    assert required(default_objects) == placement.off_gpu_expressions(default_catalogs())
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(
        yaml.safe_dump({"gpus": values_file("full.yaml")["catalog"]["gpus"]}), encoding="utf-8"
    )
    assert required(full_objects) == placement.off_gpu_expressions(default_catalogs().with_gpu_file(catalog))
    odd = {
        "name": "Odd",
        "memoryGiB": 24,
        "bandwidthTBs": 1,
        "bf16Tflops": 100,
        "nodeLabels": {"pool": ["gpu-a"]},
    }
    with_odd = render({"catalog": {"gpus": [odd]}})
    catalog.write_text(yaml.safe_dump({"gpus": [odd]}), encoding="utf-8")
    assert required(with_odd) == placement.off_gpu_expressions(default_catalogs().with_gpu_file(catalog))
    assert {"key": "pool", "operator": "NotIn", "values": ["gpu-a"]} in required(with_odd)
    # Both replicas spread over nodes too; a user's affinity, or false, replaces the rule.
    assert "podAntiAffinity" in one(full_objects, "Deployment")["spec"]["template"]["spec"]["affinity"]
    own = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert one(render({"affinity": own}), "Deployment")["spec"]["template"]["spec"]["affinity"] == own
    # offGpuNodes false drops the node rule; the two replicas still spread over nodes.
    kept = one(render({"offGpuNodes": False}), "Deployment")["spec"]["template"]["spec"]["affinity"]
    assert set(kept) == {"podAntiAffinity"}, kept
    single = one(render({"offGpuNodes": False, "replicaCount": 1}), "Deployment")["spec"]["template"]["spec"]
    assert "affinity" not in single, single
    assert env_of(default_objects)["INFERFLEET_EPP_OFF_GPU_NODES"] == "true"
    assert not OperatorSettings.from_env(
        env_of(render({"frontDoor": {"pickerOffGpuNodes": False}}))
    ).epp_off_gpu_nodes


def test_webhook_is_served_behind_a_service_with_a_shared_certificate(
    full_objects: list[dict[str, Any]],
) -> None:
    args = operator_container(full_objects)["args"]
    host = next(a.split("=", 1)[1] for a in args if a.startswith("--webhook-host="))
    service = named(full_objects, "Service", "-webhook")
    assert host == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    ports = {p["name"]: p["containerPort"] for p in operator_container(full_objects)["ports"]}
    # kopf registers https://HOST:PORT with its listening port, so the Service uses the same.
    webhook_port = int(env_of(full_objects)["INFERFLEET_WEBHOOK_PORT"])
    assert service["spec"]["ports"][0]["port"] == ports["webhook"] == webhook_port
    certificate = one(full_objects, "Certificate")
    assert host in certificate["spec"]["dnsNames"]
    cert_dir = next(a.split("=", 1)[1] for a in args if a.startswith("--webhook-cert-dir="))
    mount = next(m for m in operator_container(full_objects)["volumeMounts"] if m["mountPath"] == cert_dir)
    pod = one(full_objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert one(full_objects, "Issuer")["spec"] == {"selfSigned": {}}
    off_args = operator_container(render({"webhook": {"enabled": False}}))["args"]
    assert not any(a.startswith("--webhook") for a in off_args)


def test_release_holds_the_webhook_configuration_the_replicas_fill_in(
    full_objects: list[dict[str, Any]],
) -> None:
    # Owned by the release so that uninstall removes it; empty so that neither an install
    # nor an upgrade touches the webhook the replicas write (controller.webhook_config).
    configuration = one(full_objects, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["name"] == access.WEBHOOK_CONFIGURATION
    assert "webhooks" not in configuration
    assert configuration["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert not by_kind(full_objects, "MutatingWebhookConfiguration")
    assert not by_kind(render({"webhook": {"enabled": False}}), "ValidatingWebhookConfiguration")


def test_metrics_service_and_service_monitor_select_the_operator(full_objects: list[dict[str, Any]]) -> None:
    pod_labels = one(full_objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = named(full_objects, "Service", "-metrics")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    monitor = one(full_objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


def test_network_policy_allows_only_what_the_operator_needs(full_objects: list[dict[str, Any]]) -> None:
    policy = one(full_objects, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    egress_ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 443, 6443, 9090}
    api_rule = next(r for r in policy["egress"] if any(p["port"] == 6443 for p in r["ports"]))
    assert api_rule["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    assert by_kind(render(), "NetworkPolicy") == []


def test_monitoring_objects_stay_behind_their_flags(default_objects: list[dict[str, Any]]) -> None:
    assert by_kind(default_objects, "PrometheusRule") == []
    assert by_kind(default_objects, "ConfigMap") == []
    flags = {"dashboards": {"enabled": True}, "prometheusRule": {"enabled": True}}
    if not HAS_MONITORING_FILES:
        with pytest.raises(helm.HelmRenderError, match="is missing from the chart"):
            render(flags)
        pytest.skip("charts/inferfleet/files/ has no dashboard/rules yet (live autoscaler issue)")
    objects = render(flags)
    dashboard = named(objects, "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["inferfleet.json"])["panels"]
    rule = one(objects, "PrometheusRule")
    assert rule["spec"]["groups"] and all(group["rules"] for group in rule["spec"]["groups"])


@pytest.mark.parametrize("values", [None, "full.yaml", {"replicaCount": 2}], ids=["default", "full", "ha"])
def test_every_rendered_object_validates_against_kubernetes_schemas(values: Any) -> None:
    objects = render(values_file(values) if isinstance(values, str) else values)
    objects += gen_install.chart_crds()
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


# ---------------------------------------------------------------- generated files


def test_chart_crds_are_the_generated_crds() -> None:
    chart_crds = CHART_DIR / "crds"
    for source in sorted((REPO_ROOT / "crds").glob("*.yaml")):
        copy = chart_crds / source.name
        assert copy.read_text(encoding="utf-8") == source.read_text(encoding="utf-8"), (
            f"{copy} is stale: run hack/gen-chart-crds.sh"
        )
    peering = (REPO_ROOT / "hack" / "kopf-peering-crds.yaml").read_text(encoding="utf-8")
    assert (chart_crds / "kopf.dev-peerings.yaml").read_text(encoding="utf-8") == peering
    expected = {p.name for p in (REPO_ROOT / "crds").glob("*.yaml")} | {"kopf.dev-peerings.yaml"}
    assert {p.name for p in chart_crds.glob("*.yaml")} == expected


def test_install_bundle_is_fresh() -> None:
    path: Path = gen_install.INSTALL_PATH
    assert path.read_text(encoding="utf-8") == gen_install.install_bundle(), (
        "manifests/install.yaml is stale: run .venv/bin/python hack/gen_install.py"
    )


def test_install_bundle_objects_validate_and_start_with_namespace_and_crds() -> None:
    objects = [o for o in yaml.safe_load_all(gen_install.INSTALL_PATH.read_text(encoding="utf-8")) if o]
    assert objects[0]["kind"] == "Namespace"
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    crd_positions = [i for i, o in enumerate(objects) if o["kind"] == "CustomResourceDefinition"]
    assert crd_positions == list(range(1, 1 + len(crd_positions)))
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
