"""Every rendered pod lands only on its own GPU type, on a mixed cluster of real node shapes.

The expectations come from what each node really is (cluster_nodes.NODES: its GPU, spot
or not) and the tier's own spec, never from the rendered objects; node_fit decides
whether the scheduler could place a rendered pod spec on a node.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferfleet import planner
from inferfleet.api import InferenceService, labels, load_all
from inferfleet.catalog import placement
from inferfleet.config import OperatorSettings
from tests.conftest import REPO_ROOT, example_paths
from tests.toolkit.design import render
from tests.unit.render import plans
from tests.unit.render.cluster_nodes import GFD, GKE, NODES
from tests.unit.render.node_fit import Node, fits

SETTINGS = OperatorSettings()
REQUIRED = placement.REQUIRED


# ------------------------------------------------------------------ the fit helper itself


def test_node_fit_evaluates_selector_operators_taints_and_resources() -> None:
    node = Node(
        "n1",
        {"a": "1", "size": "8"},
        ({"key": "gpu", "value": "x", "effect": "NoSchedule"},),
        {"nvidia.com/gpu": 2},
    )
    tolerate = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]

    def pod(
        *expressions: dict[str, Any],
        fields: list[dict[str, Any]] | None = None,
        gpus: int = 1,
        tolerations: list[dict[str, Any]] | None = tolerate,
        selector: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        term: dict[str, Any] = {"matchExpressions": list(expressions)}
        if fields:
            term["matchFields"] = fields
        return {
            "nodeSelector": selector or {},
            "tolerations": tolerations,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus), "memory": "1Gi"}}}],
        }

    assert fits(pod({"key": "a", "operator": "In", "values": ["1"]}), node)
    assert not fits(pod({"key": "a", "operator": "In", "values": ["2"]}), node)
    assert fits(pod({"key": "b", "operator": "NotIn", "values": ["1"]}), node)  # absent label
    assert not fits(pod({"key": "a", "operator": "NotIn", "values": ["1"]}), node)
    assert fits(pod({"key": "a", "operator": "Exists"}), node)
    assert not fits(pod({"key": "a", "operator": "DoesNotExist"}), node)
    assert fits(pod({"key": "size", "operator": "Gt", "values": ["4"]}), node)
    assert not fits(pod({"key": "size", "operator": "Lt", "values": ["4"]}), node)
    assert fits(pod(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]), node)
    assert not fits(pod(fields=[{"key": "metadata.name", "operator": "In", "values": ["n2"]}]), node)
    assert not fits(pod({"key": "a", "operator": "Exists"}, tolerations=None), node)  # tainted
    assert not fits(pod({"key": "a", "operator": "Exists"}, gpus=3), node)  # 2 allocatable
    assert fits(pod({"key": "a", "operator": "Exists"}, gpus=3), node, check_resources=False)
    assert not fits(pod({"key": "a", "operator": "Exists"}, selector={"a": "2"}), node)
    wrong_value = [{"key": "gpu", "operator": "Equal", "value": "y", "effect": "NoSchedule"}]
    assert not fits(pod({"key": "a", "operator": "Exists"}, tolerations=wrong_value), node)
    assert fits(pod({"key": "a", "operator": "Exists"}, tolerations=[{"operator": "Exists"}]), node)


# ------------------------------------------------------------------ rendering helpers


def docs_minimal_spec() -> str:
    text = (REPO_ROOT / "docs" / "concepts" / "inferenceservice.md").read_text(encoding="utf-8")
    match = re.search(r"A minimal spec:\n\n```yaml\n(.*?)```", text, re.S)
    assert match, "docs/concepts/inferenceservice.md lost its minimal spec"
    return match.group(1)


def specs() -> list[tuple[str, str]]:
    found = [(path.stem, path.read_text(encoding="utf-8")) for path in example_paths()]
    return [*found, ("docs-minimal-spec", docs_minimal_spec())]


def rendered(service: InferenceService, settings: OperatorSettings = SETTINGS) -> list[dict[str, Any]]:
    plan = planner.plan_service(service, settings.catalogs())
    assert plan.feasible_tiers, f"{service.name}: nothing feasible to place"
    return render(service, plan, settings)


def serving_pods(workload: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = workload["spec"]
    if workload["kind"] == "Deployment":
        yield "deployment", spec["template"]["spec"]
    else:
        template = spec["leaderWorkerTemplate"]
        yield "leader", template["leaderTemplate"]["spec"]
        yield "worker", template["workerTemplate"]["spec"]


def tier_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"]["inferfleet.dev/tier"])


def belongs(node: Node, service: InferenceService, tier_name: str) -> bool:
    """Where a tier should run, from the spec and what the node is (not from the render)."""
    tier = next(t for t in service.spec.tiers if t.name == tier_name)
    gpu = SETTINGS.catalogs().gpu(str(tier.gpu))
    assert gpu is not None
    selector_ok = all(node.labels.get(key) == value for key, value in (tier.node_selector or {}).items())
    # A spot tier needs spot capacity; any other tier never runs on it.
    capacity_ok = node.spot if tier.capacity_type == "spot" else not node.spot
    return node.gpu == gpu.name and capacity_ok and selector_ok


def fitting(pod: dict[str, Any], *, check_resources: bool = True) -> set[str]:
    return {node.name for node in NODES if fits(pod, node, check_resources=check_resources)}


# ------------------------------------------------------------------ examples and the docs


def is_tier(obj: dict[str, Any]) -> bool:
    return labels.LABEL_TIER in obj["metadata"]["labels"]


@pytest.mark.parametrize(("name", "text"), specs(), ids=[name for name, _ in specs()])
def test_every_pod_fits_only_nodes_of_its_own_gpu_type(name: str, text: str) -> None:
    for service in load_all(text):
        objects = rendered(service)
        # Tier workloads (the front door's endpoint pickers are CPU pods of no tier).
        workloads = [o for o in objects if o["kind"] in ("Deployment", "LeaderWorkerSet") and is_tier(o)]
        assert workloads
        for workload in workloads:
            tier = tier_of(workload)
            expected = {node.name for node in NODES if belongs(node, service, tier)}
            assert expected, f"{name}/{tier}: the node table has no node for this tier; add one"
            for role, pod in serving_pods(workload):
                assert fitting(pod) == expected, f"{name}/{tier}/{role}"


@pytest.mark.parametrize(("name", "text"), specs(), ids=[name for name, _ in specs()])
def test_pre_cache_pods_fit_exactly_where_their_serving_pods_fit(name: str, text: str) -> None:
    for service in load_all(text):
        objects = rendered(service)
        serving = {
            tier_of(o): next(serving_pods(o))[1]
            for o in objects
            if o["kind"] in ("Deployment", "LeaderWorkerSet") and is_tier(o)
        }
        daemonsets = {tier_of(o): o["spec"]["template"]["spec"] for o in objects if o["kind"] == "DaemonSet"}
        assert set(daemonsets) == set(serving), name
        for tier, pod in daemonsets.items():
            # A pre-cache pod requests no GPU: it must still go nowhere but the tier's nodes,
            # never to a CPU node, an unlabelled GPU node or another GPU type.
            where = fitting(pod, check_resources=False)
            assert where == fitting(serving[tier]), f"{name}/{tier}"
            assert "cpu" not in where and "unlabelled-gpu" not in where


# ------------------------------------------------------------------ one tier per GPU type


CATALOG_GPUS = sorted({node.gpu for node in NODES if node.gpu is not None})


def one_tier(gpu: Any, **tier: Any) -> InferenceService:
    return plans.service(
        model={"name": "meta-llama/Llama-3.1-8B-Instruct"},
        tiers=[{"name": "t", "gpu": gpu, "gpusPerNode": 8, "minReplicas": 1, **tier}],
    )


def tier_pods(service: InferenceService, settings: OperatorSettings = SETTINGS) -> dict[str, dict[str, Any]]:
    objects = rendered(service, settings)
    pods = {
        role: pod
        for o in objects
        if o["kind"] in ("Deployment", "LeaderWorkerSet")
        for role, pod in serving_pods(o)
    }
    pods["cache"] = next(o["spec"]["template"]["spec"] for o in objects if o["kind"] == "DaemonSet")
    return pods


@pytest.mark.parametrize("gpu", CATALOG_GPUS)
def test_each_catalog_gpu_lands_on_every_labelling_of_itself_and_nothing_else(gpu: str) -> None:
    pods = tier_pods(one_tier(gpu))
    expected = {node.name for node in NODES if node.gpu == gpu and not node.spot}
    assert fitting(pods["deployment"]) == expected
    assert fitting(pods["cache"], check_resources=False) == expected


def test_spot_tier_needs_a_spot_node_of_its_type_and_tolerates_spot_taints() -> None:
    for gpu in ("L4", "A100-SXM-80GB"):
        pods = tier_pods(one_tier(gpu, capacityType="spot"))
        expected = {node.name for node in NODES if node.gpu == gpu and node.spot}
        assert expected and fitting(pods["deployment"]) == expected
        assert fitting(pods["cache"], check_resources=False) == expected


def test_on_demand_tiers_stay_off_spot_capacity_on_every_label_family() -> None:
    """GKE spot and preemptible, Karpenter spot, EKS node-group SPOT, AKS spot: an on-demand
    tier (the default) fits none of them, on any term of its OR-ed node affinity, and still
    fits nodes that carry no capacity label at all (GPU feature discovery)."""
    spot_nodes = {node.name for node in NODES if node.spot}
    assert {
        "gke-l4-spot",
        "gke-l4-preemptible",
        "karpenter-l4-spot",
        "eks-p4de-spot",
        "aks-l4-spot",
    } <= spot_nodes
    for gpu in ("L4", "A100-SXM-80GB", "H100-SXM-80GB"):
        pods = tier_pods(one_tier(gpu))
        for role in ("deployment", "cache"):
            where = fitting(pods[role], check_resources=False)
            assert where and not where & spot_nodes, f"{gpu}/{role}: {sorted(where & spot_nodes)}"
        # Each GPU-type alternative carries the exclusions: a spot node of any one family,
        # labelled only the way that family labels it, fits no term.
        terms = pods["deployment"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        for term in terms["nodeSelectorTerms"]:
            excluded = {e["key"] for e in term["matchExpressions"] if e["operator"] == "NotIn"}
            assert excluded == {key for key, _, _ in placement.SPOT_LABELS}, term
    assert {"gfd-l4", "gke-l4", "karpenter-l4"} <= fitting(tier_pods(one_tier("L4"))["deployment"])
    assert "karpenter-h100-reserved" in fitting(tier_pods(one_tier("H100-SXM-80GB"))["deployment"])
    assert "eks-p4de" in fitting(tier_pods(one_tier("A100-SXM-80GB"))["deployment"])
    # The tier's own required affinity is ANDed into every term, exclusions kept.
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}
    own = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}}}
    spotty = Node("gke-l4-spot-a", {GKE: "nvidia-l4", "cloud.google.com/gke-spot": "true", zone["key"]: "a"})
    plain = Node("gke-l4-a", {GKE: "nvidia-l4", zone["key"]: "a"}, (), {"nvidia.com/gpu": 8})
    pod = tier_pods(one_tier("L4", affinity=own))["deployment"]
    assert fits(pod, plain) and not fits(pod, spotty, check_resources=False)


def test_pickers_keep_off_every_node_a_gpu_label_marks() -> None:
    """The endpoint pickers are CPU pods: nodes a GPU label we know marks (GPU feature
    discovery, GKE, Karpenter, EKS Auto Mode and node groups by instance type, AKS, AMD) are
    out, untainted or not; nodes without such labels (CPU nodes, an unlabelled GPU node
    nobody can tell apart) are in. With the setting off they go anywhere untainted."""
    service = load_all((REPO_ROOT / "manifests/examples/llama-8b-chat.yaml").read_text())[0]

    def picker(settings: OperatorSettings) -> dict[str, Any]:
        objects = rendered(service, settings)
        (epp,) = [o for o in objects if o["kind"] == "Deployment" and not is_tier(o)]
        return dict(epp["spec"]["template"]["spec"])

    assert fitting(picker(SETTINGS), check_resources=False) == {"cpu", "cpu-spot", "unlabelled-gpu"}
    anywhere = fitting(picker(OperatorSettings(epp_off_gpu_nodes=False)), check_resources=False)
    assert {"gfd-l4", "eks-p4d", "aks-gpu-unknown"} <= anywhere


def test_the_tiers_own_selector_and_required_affinity_are_anded_with_the_gpu_type() -> None:
    gpus = {"nvidia.com/gpu": 8}
    l4, t4, zone = {GFD: "NVIDIA-L4"}, {GFD: "Tesla-T4"}, "topology.kubernetes.io/zone"
    nodes = (
        Node("l4-a", {**l4, zone: "a", "pool": "x"}, (), gpus),
        Node("l4-b", {**l4, zone: "b", "pool": "x"}, (), gpus),
        Node("t4-a", {**t4, zone: "a", "pool": "x"}, (), gpus),
        Node("l4-a-other-pool", {**l4, zone: "a", "pool": "y"}, (), gpus),
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": zone, "operator": "In", "values": ["a"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}},
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    },
                }
            ]
        },
    }
    pods = tier_pods(one_tier("L4", nodeSelector={"pool": "x"}, affinity=affinity))
    serving, cache = pods["deployment"], pods["cache"]
    assert {n.name for n in nodes if fits(serving, n)} == {"l4-a"}
    assert {n.name for n in nodes if fits(cache, n, check_resources=False)} == {"l4-a"}
    # Everything else the tier wrote is kept as written on serving pods; pre-cache pods
    # keep only node placement (a pod anti-affinity would block DaemonSet pods).
    assert serving["affinity"]["podAntiAffinity"] == affinity["podAntiAffinity"]
    assert (
        serving["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        == (affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"])
    )
    assert set(cache["affinity"]) == {"nodeAffinity"}
    assert set(cache["affinity"]["nodeAffinity"]) == {"requiredDuringSchedulingIgnoredDuringExecution"}


def test_opting_out_leaves_only_the_tiers_own_placement() -> None:
    own = {"example.com/accelerator": "l4"}
    service = one_tier("L4", gpuNodeAffinity="none", nodeSelector=own)
    nodes = (
        Node("custom-l4", own, (), {"nvidia.com/gpu": 8}),
        Node("gfd-l4", {"nvidia.com/gpu.product": "NVIDIA-L4"}, (), {"nvidia.com/gpu": 8}),
    )
    pods = tier_pods(service)
    assert {n.name for n in nodes if fits(pods["deployment"], n)} == {"custom-l4"}
    assert "affinity" not in pods["deployment"] and pods["cache"]["nodeSelector"] == own


def test_inline_and_catalog_file_gpus_use_their_declared_labels(tmp_path: Path) -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-RTX-6000-Ada-Generation"}
    ada = Node("ada", labels, (), {"nvidia.com/gpu": 8})
    inline = {
        "name": "rtx-6000-ada",
        "memoryGiB": 47.5,
        "fp8": True,
        "nodeLabels": {"nvidia.com/gpu.product": ["NVIDIA-RTX-6000-Ada-Generation"]},
    }
    pods = tier_pods(one_tier(inline))
    assert [n.name for n in (*NODES, ada) if fits(pods["deployment"], n)] == ["ada"]
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(
        yaml.safe_dump(
            {
                "gpus": [
                    {
                        "name": "RTX-6000-Ada",
                        "family": "ada",
                        "memoryGiB": 47.5,
                        "bandwidthTBs": 0.96,
                        "bf16Tflops": 364,
                        "fp8Tflops": 728,
                        "gpusPerNode": 8,
                        "nodeLabels": labels,
                    }
                ]
            }
        )
    )
    settings = OperatorSettings(catalog_file=str(catalog))
    pods = tier_pods(one_tier("RTX-6000-Ada"), settings)
    assert [n.name for n in (*NODES, ada) if fits(pods["deployment"], n)] == ["ada"]
    assert [n.name for n in (*NODES, ada) if fits(pods["cache"], n, check_resources=False)] == ["ada"]


def test_multi_node_leader_and_workers_share_the_placement() -> None:
    service = load_all((REPO_ROOT / "manifests/examples/llama-405b-multinode.yaml").read_text())[0]
    lws = next(o for o in rendered(service) if o["kind"] == "LeaderWorkerSet")
    (_, leader), (_, worker) = serving_pods(lws)
    h100 = {"gfd-h100", "eks-p5", "gke-h100-mega", "automode-h100", "karpenter-h100-reserved"}
    assert fitting(leader) == fitting(worker) == h100
