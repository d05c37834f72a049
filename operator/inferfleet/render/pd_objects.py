"""The objects of a deployed prefill/decode split (pure): what llm-d users run.

A request's path: the Gateway asks the service's endpoint picker, whose P/D profile
handler first picks a decode pod (decode filter: `llm-d.ai/role=decode`, or no role at
all, so the tiers outside the split keep serving whole requests) and then, when the
prompt has at least `SPLIT_MIN_UNCACHED_TOKENS` tokens no decode pod has cached, a
prefill pod (prefill filter: `llm-d.ai/role=prefill`), named in a request header. The
Gateway sends the request to the decode pod's routing sidecar (port 8000, the pool's
target port), which has the prefill pod's vLLM compute the prompt, then hands the
request to its own vLLM (port 8200) with the KV cache's handle; vLLM's NixlConnector
pulls the cache from the prefill pod (side channel on port 5600, each pod announcing
its IP). Without the header the sidecar passes the request straight to its vLLM.

Hostile tenants: the sidecar sends prompts only to pods of its own InferencePool
(`--enable-ssrf-protection`), so a client's own prefill header cannot steer it at
another service. It watches that pool and its pods with a ServiceAccount bound to the
picker's read-only Role in the service's namespace; the token is mounted into the
sidecar alone, never into vLLM (which runs the model's code).

The ports, flags and labels follow the pinned llm-d router release (settings
`epp_image`, `pd_sidecar_image`, v0.10.0).
"""

from __future__ import annotations

import json
from typing import Any

from inferfleet.api import InferenceService, labels
from inferfleet.design import object_names as names
from inferfleet.design.pd_split import SPLIT_MIN_UNCACHED_TOKENS, Role
from inferfleet.render.vllm_args import HTTP_PORT

ROLE_LABEL = labels.LABEL_PD_ROLE
# The decode pod's vLLM moves off the pool's port, which its sidecar takes.
DECODE_VLLM_PORT = 8200
SIDECAR_NAME = "routing-proxy"
SIDECAR_PORT_NAME = "pd-proxy"
# vLLM's NixlConnector handshake: VLLM_NIXL_SIDE_CHANNEL_PORT's default (vllm/envs.py).
NIXL_SIDE_CHANNEL_PORT = 5600
KV_TRANSFER_CONFIG = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
SIDECAR_RESOURCES = {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
TOKEN_VOLUME = "pd-sidecar-token"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_EXPIRY_S = 3600
DECIDER = "prefix-based-pd-decider"


def vllm_port(role: Role | None) -> int:
    """The port vLLM listens on: the pool's, except behind a decode pod's sidecar."""
    return DECODE_VLLM_PORT if role == "decode" else HTTP_PORT


def kv_transfer_args(role: Role | None) -> list[str]:
    """vLLM's KV connector for a role (both roles send and receive: kv_both)."""
    if role is None:
        return []
    return ["--kv-transfer-config", json.dumps(KV_TRANSFER_CONFIG, separators=(",", ":"))]


def role_labels(role: Role | None) -> dict[str, str]:
    return {} if role is None else {ROLE_LABEL: role}


def vllm_env(role: Role | None) -> list[dict[str, Any]]:
    """Where the pod's NixlConnector listens for the other role's handshake: its own IP."""
    if role is None:
        return []
    return [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
    ]


def vllm_ports(role: Role | None) -> list[dict[str, Any]]:
    if role is None:
        return []
    return [{"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"}]


def sidecar_service_account(service: InferenceService) -> str:
    return names.bounded(f"{service.name}-pd-sidecar")


def _tcp_probe(period_s: int, failures: int) -> dict[str, Any]:
    return {
        "tcpSocket": {"port": SIDECAR_PORT_NAME},
        "periodSeconds": period_s,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def sidecar(namespace: str, pool: str, image: str) -> dict[str, Any]:
    """The decode pod's routing sidecar: a native sidecar (an init container that keeps
    running), so it starts before vLLM and stops after it."""
    return {
        "name": SIDECAR_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "args": [
            f"--port={HTTP_PORT}",
            f"--vllm-port={DECODE_VLLM_PORT}",
            "--kv-connector=nixlv2",
            # Plain HTTP inside the pod network, as the picker's other endpoints.
            "--secure-proxy=false",
            "--enable-ssrf-protection=true",
        ],
        "env": [
            {"name": "INFERENCE_POOL_NAMESPACE", "value": namespace},
            {"name": "INFERENCE_POOL_NAME", "value": pool},
        ],
        "ports": [{"name": SIDECAR_PORT_NAME, "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "readinessProbe": _tcp_probe(5, 3),
        "livenessProbe": _tcp_probe(15, 4),
        "resources": SIDECAR_RESOURCES,
        "volumeMounts": [{"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": True}],
    }


def token_volume() -> dict[str, Any]:
    """The sidecar's API token, CA and namespace: what an automounted token would give,
    mounted into one container instead of every one."""
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRY_S}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }


def access_objects(
    service: InferenceService, picker_role: str, owner: dict[str, str] | None
) -> list[dict[str, Any]]:
    """The sidecar's identity, bound to the picker's Role: read pods and InferencePools in
    the service's namespace (its SSRF allowlist), nothing else."""
    name = sidecar_service_account(service)
    object_labels = {**names.service_labels(service.name), labels.LABEL_COMPONENT: "pd-sidecar"}
    metadata: dict[str, Any] = {"name": name, "namespace": service.namespace, "labels": object_labels}
    if owner:
        metadata["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": picker_role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": service.namespace}],
        },
    ]


def picker_plugins_and_profiles(
    shared_plugins: list[dict[str, Any]], scorers: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The picker's P/D configuration: `shared_plugins` (the length filter, the load
    scorers, the picker) plus the role filters, the decider and the profile handler. Both
    profiles weigh pods as a colocated pool does (`scorers`): the length filter keeps a
    prompt off a pod that cannot hold it, whichever role that pod plays."""
    plugins = [
        {"type": "disagg-headers-handler"},
        *shared_plugins,
        {"type": "prefill-filter"},
        {"type": "decode-filter"},
        {"type": DECIDER, "parameters": {"nonCachedTokens": SPLIT_MIN_UNCACHED_TOKENS}},
        {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": DECIDER}}},
    ]
    profiles = [
        {
            "name": role,
            # Copies: one dict in both profiles would be dumped as a YAML anchor and alias.
            "plugins": [
                {"pluginRef": f"{role}-filter"},
                *map(dict, scorers),
                {"pluginRef": "max-score-picker"},
            ],
        }
        for role in ("decode", "prefill")
    ]
    return plugins, profiles
