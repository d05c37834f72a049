"""A deployed prefill/decode split as objects: each role's pods, the decode pods' routing
sidecar and its identity, the picker's P/D profiles; nothing of it where the split is not
deployed."""

from __future__ import annotations

import json
from typing import Any

import yaml

from inferfleet.api import labels, load_all
from inferfleet.config import OperatorSettings
from inferfleet.design import design
from inferfleet.render import pd_objects, render
from tests.conftest import EXAMPLES_DIR
from tests.unit.render.validation import validate, validate_picker_config

EXAMPLE = EXAMPLES_DIR / "rag-8b-disaggregated.yaml"


def rendered(**spec_changes: Any) -> list[dict[str, Any]]:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"].update(spec_changes)
    (service,) = load_all(yaml.safe_dump(document))
    return render(design(service, OperatorSettings()))


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def pod(objects: list[dict[str, Any]], tier: str) -> dict[str, Any]:
    template: dict[str, Any] = named(objects, "Deployment", f"rag-8b-disaggregated-{tier}")["spec"][
        "template"
    ]
    return template


def vllm(pod_template: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod_template["spec"]["containers"][0]
    assert container["name"] == "vllm"
    return container


def flag(container: dict[str, Any], name: str) -> str | None:
    args = container["args"]
    return args[args.index(name) + 1] if name in args else None


def picker_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    picker = named(objects, "Deployment", "rag-8b-disaggregated-epp")
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    text = args[args.index("--config-text") + 1]
    assert "&id" not in text  # plain YAML: no anchors or aliases
    config: dict[str, Any] = yaml.safe_load(text)
    return config


def test_each_role_runs_the_nixl_connector_and_announces_its_ip() -> None:
    objects = rendered()
    for tier, role in (("l40s", "prefill"), ("h100", "decode")):
        template = pod(objects, tier)
        assert template["metadata"]["labels"][pd_objects.ROLE_LABEL] == role
        container = vllm(template)
        assert json.loads(flag(container, "--kv-transfer-config") or "{}") == {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_both",
        }
        env = {e["name"]: e for e in container["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
    for obj in objects:
        validate(obj)


def test_the_decode_pod_puts_the_sidecar_on_the_pools_port_and_vllm_behind_it() -> None:
    objects = rendered()
    template = pod(objects, "h100")
    container = vllm(template)
    assert flag(container, "--port") == "8200"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8200, "nixl": 5600}
    # Probes and the drain follow vLLM to its port.
    assert container["readinessProbe"]["exec"]["command"][3] == "8200"
    assert container["lifecycle"]["preStop"]["exec"]["command"][3] == "8200"
    (sidecar,) = [c for c in template["spec"]["initContainers"] if c["name"] == "routing-proxy"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["ports"] == [{"name": "pd-proxy", "containerPort": 8000, "protocol": "TCP"}]
    assert "--vllm-port=8200" in sidecar["args"]
    assert "--enable-ssrf-protection=true" in sidecar["args"]
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env == {"INFERENCE_POOL_NAMESPACE": "ml-serving", "INFERENCE_POOL_NAME": "rag-8b-disaggregated"}
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    # The compile cache is published once vLLM answers on its own port.
    (hold,) = [c for c in template["spec"]["initContainers"] if c["name"] == "cache-hold"]
    assert hold["args"][hold["args"].index("--engine-url") + 1] == "http://127.0.0.1:8200/health"
    # The pool targets 8000 on every pod: the sidecar here, vLLM on the prefill pods.
    pool = named(objects, "InferencePool", "rag-8b-disaggregated")
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert flag(vllm(pod(objects, "l40s")), "--port") == "8000"


def test_only_the_sidecar_holds_an_api_token() -> None:
    objects = rendered()
    decode = pod(objects, "h100")["spec"]
    assert decode["automountServiceAccountToken"] is False
    assert decode["serviceAccountName"] == "rag-8b-disaggregated-pd-sidecar"
    (volume,) = [v for v in decode["volumes"] if v["name"] == pd_objects.TOKEN_VOLUME]
    assert volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    mounted = {
        c["name"]
        for c in [*decode["containers"], *decode["initContainers"]]
        if any(m["name"] == pd_objects.TOKEN_VOLUME for m in c.get("volumeMounts", []))
    }
    assert mounted == {"routing-proxy"}
    prefill = pod(objects, "l40s")["spec"]
    assert "serviceAccountName" not in prefill
    assert all(c["name"] != "routing-proxy" for c in prefill.get("initContainers", []))
    # Its identity reads what the picker reads, in this namespace.
    binding = named(objects, "RoleBinding", "rag-8b-disaggregated-pd-sidecar")
    assert binding["roleRef"]["name"] == "rag-8b-disaggregated-epp"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rag-8b-disaggregated-pd-sidecar", "namespace": "ml-serving"}
    ]
    role = named(objects, "Role", "rag-8b-disaggregated-epp")
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}


def test_the_picker_splits_long_uncached_prompts() -> None:
    config = picker_config(rendered())
    validate_picker_config(config)
    types = [plugin["type"] for plugin in config["plugins"]]
    for needed in ("disagg-headers-handler", "prefill-filter", "decode-filter", "disagg-profile-handler"):
        assert needed in types
    (decider,) = [p for p in config["plugins"] if p["type"] == "prefix-based-pd-decider"]
    assert decider["parameters"] == {"nonCachedTokens": 500}
    profiles = {profile["name"]: profile["plugins"] for profile in config["schedulingProfiles"]}
    assert set(profiles) == {"decode", "prefill"}
    assert profiles["decode"][0] == {"pluginRef": "decode-filter"}
    assert profiles["prefill"][0] == {"pluginRef": "prefill-filter"}
    for plugins in profiles.values():
        assert {"pluginRef": "context-length", "weight": 1.0} in plugins
        assert plugins[-1] == {"pluginRef": "max-score-picker"}


def test_nothing_of_the_split_where_it_is_not_deployed() -> None:
    objects = rendered(
        frontDoor={"gateway": {"name": "inference-gateway"}, "endpointPicker": {"name": "epp"}}
    )
    for tier in ("h100", "l40s"):
        template = pod(objects, tier)
        assert pd_objects.ROLE_LABEL not in template["metadata"]["labels"]
        container = vllm(template)
        assert flag(container, "--port") == "8000"
        assert flag(container, "--kv-transfer-config") is None
        assert all(c["name"] != "routing-proxy" for c in template["spec"].get("initContainers", []))
    assert not [o for o in objects if o["metadata"]["name"].endswith("-pd-sidecar")]
    off = rendered(serving={"disaggregation": {"mode": "off"}})
    assert [profile["name"] for profile in picker_config(off)["schedulingProfiles"]] == ["default"]
    assert all(o["metadata"]["labels"].get(labels.LABEL_COMPONENT) != "pd-sidecar" for o in off)
