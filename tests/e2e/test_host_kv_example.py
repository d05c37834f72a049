"""The bundled example with both of a cold start's caches and a host KV tier, on the real
control plane: its serving pods are scheduled on the nodes whose memory the tier was
sized from (p5.48xlarge H100s, the fleet's own truth), run vLLM with the tier the status
plan reports (flags and a memory request that covers it), and mount only their own
compile-cache key beside their model's weights."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, controlplane, eventually, example
from tests.e2e.test_compile_cache import _check_pod

SERVICE_LABEL = "inferfleet.dev/service"
COMPONENT_LABEL = "inferfleet.dev/component"


def gib(quantity: str) -> float:
    """A binary-suffixed memory quantity (Mi, Gi, Ti) in GiB."""
    for suffix, scale in (("Mi", 1 / 1024), ("Gi", 1.0), ("Ti", 1024.0)):
        if quantity.endswith(suffix):
            return float(quantity.removesuffix(suffix)) * scale
    raise AssertionError(f"unexpected memory quantity {quantity!r}")


def test_the_host_kv_example_runs_its_tier_and_its_own_compile_key_on_the_nodes_it_was_sized_for(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    body = example("rag-70b-host-kv", namespace)
    cluster.apply([body])
    name = body["metadata"]["name"]
    gpu_of = controlplane.fleet_gpus()

    def deployed() -> tuple[dict[str, Any], dict[str, Any], str]:
        status = cluster.service(namespace, name).get("status") or {}
        (tier,) = status.get("plan") or [None]
        assert tier is not None and tier["hostKvCacheGiB"] > 0, status.get("conditions")
        (entry,) = [e for e in status.get("cache") or [] if e.get("tier") == "h100"]
        assert entry.get("compileKey"), entry
        pods = [
            pod
            for pod in cluster.list("v1/pods", namespace, f"{SERVICE_LABEL}={name},{COMPONENT_LABEL}=vllm")
            if pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
        ]
        assert pods, "no serving pod scheduled yet"
        return tier, pods[0], str(entry["compileKey"])

    tier, pod, key = eventually(deployed, 180, what="plan with a host KV tier, compile key, a scheduled pod")
    node = cluster.kubectl_json("get", "node", pod["spec"]["nodeName"])
    assert gpu_of.get(node["metadata"]["name"]) == "H100-SXM-80GB"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    vllm = next(c for c in pod["spec"]["containers"] if c["name"] == "vllm")
    args = vllm["args"]
    size = tier["hostKvCacheGiB"]
    assert args[args.index("--kv-offloading-size") + 1] == f"{size:g}"
    assert args[args.index("--kv-offloading-backend") + 1] == "native"
    # The pod asks for the tier's pinned memory on top of its own, and the node has it.
    requested_gib = gib(vllm["resources"]["requests"]["memory"])
    assert requested_gib > size
    assert requested_gib <= gib(node["status"]["allocatable"]["memory"])
    _check_pod(pod, key)
