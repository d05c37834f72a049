"""A prefill/decode split on the real control plane: the bundled long-prompt example's
prefill pods run on L40S nodes and its decode pods on H100 nodes (judged by the fleet's
own truth, never the rendered objects), each role labelled for the picker, the picker
configured with P/D profiles, and the decode pods' routing sidecar holding an identity
that reads its own namespace's pool and pods, nothing in another namespace."""

from __future__ import annotations

from typing import Any

import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, controlplane, eventually, example, ready

ROLE_LABEL = "llm-d.ai/role"
SERVICE_LABEL = "inferfleet.dev/service"
TIER_LABEL = "inferfleet.dev/tier"
COMPONENT_LABEL = "inferfleet.dev/component"


def serving(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        pod
        for pod in cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}={name},{COMPONENT_LABEL}=vllm")
        if not pod["metadata"].get("deletionTimestamp")
    ]


def test_each_role_runs_on_its_gpu_behind_a_picker_configured_for_the_split(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = example("rag-8b-disaggregated", namespace)
    cluster.apply([body])
    name = body["metadata"]["name"]
    gpu_of = controlplane.fleet_gpus()
    wanted = {"l40s": ("prefill", "L40S"), "h100": ("decode", "H100-SXM-80GB")}

    def placed() -> dict[str, list[dict[str, Any]]]:
        by_tier: dict[str, list[dict[str, Any]]] = {}
        for pod in serving(cluster, namespace, name):
            by_tier.setdefault(pod["metadata"]["labels"][TIER_LABEL], []).append(pod)
        status = cluster.service(namespace, name).get("status") or {}
        assert set(by_tier) == set(wanted), (sorted(by_tier), status.get("summary"), status.get("conditions"))
        for tier, pods in by_tier.items():
            role, gpu = wanted[tier]
            for pod in pods:
                assert pod["metadata"]["labels"].get(ROLE_LABEL) == role, status.get("disaggregation")
                node = pod["spec"].get("nodeName")
                assert node is not None and gpu_of.get(node) == gpu, (tier, node, gpu_of.get(node))
                assert ready(pod), pod["metadata"]["name"]
        return by_tier

    by_tier = eventually(placed, 240, what="prefill pods Ready on L40S nodes and decode pods on H100 nodes")
    decode = by_tier["h100"][0]["spec"]
    assert decode["serviceAccountName"] == f"{name}-pd-sidecar"
    assert [c["name"] for c in decode["initContainers"] if c.get("restartPolicy") == "Always"][-1] == (
        "routing-proxy"
    )
    status = cluster.service(namespace, name)["status"]
    split = status["disaggregation"]
    assert (split["prefillTier"], split["decodeTier"], split["deployed"]) == ("l40s", "h100", True)

    picker = cluster.kubectl_json("get", "deployment", f"{name}-epp", "-n", namespace)
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    config = yaml.safe_load(args[args.index("--config-text") + 1])
    assert {profile["name"] for profile in config["schedulingProfiles"]} == {"prefill", "decode"}

    # The sidecar's identity, as the API server's authorizer answers for it.
    subject = f"system:serviceaccount:{namespace}:{name}-pd-sidecar"

    def can(verb: str, resource: str, where: str) -> bool:
        done = cluster.kubectl("auth", "can-i", verb, resource, "-n", where, "--as", subject, check=False)
        return done.stdout.strip() == "yes"

    assert can("list", "pods", namespace)
    assert can("watch", "inferencepools.inference.networking.k8s.io", namespace)
    assert not can("list", "pods", "default")
    assert not can("get", "secrets", namespace)
    assert not can("create", "pods", namespace)
