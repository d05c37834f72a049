"""Where a tier's pods may run: its GPU type, its capacity type, and the tier's own rules.

A pod that only requests `nvidia.com/gpu: 1` fits any node with a free NVIDIA GPU: an FP8
plan for an L4 lands on a T4 (no FP8, no BF16) and vLLM refuses to start. So every
serving pod (Deployment, LeaderWorkerSet leader and workers) gets a required node
affinity built from its GPU's `nodeLabels` (catalog or inline), one node-selector term
per labelling scheme, OR-ed: GPU feature discovery, GKE, Karpenter, EKS Auto Mode, AMD's
labeller. A spot tier also requires a spot node, as each cloud labels one; every other
tier requires a node that is not spot on any label family we know (GKE, Karpenter, EKS
node groups, AKS), so a warm minimum never lands on capacity the cloud takes back.

How it combines with the tier's own fields (docs/concepts/placement.md):
- `nodeSelector` is copied as written; Kubernetes ANDs it with the affinity.
- `affinity` is copied as written, except its required node affinity: each of the tier's
  own node-selector terms is ANDed with each default term (their matchExpressions
  joined), so the pod must satisfy the tier's rule AND be on its GPU type. Preferred node
  affinity and pod (anti-)affinity are untouched.
- `gpuNodeAffinity: none` drops the default terms (GPU type and capacity type): the tier's
  own placement alone decides (validation requires it to have one).

The front door's endpoint pickers and the operator itself are CPU pods: `off_gpu_nodes()`
keeps them off every node a GPU label we know marks (`GPU_NODE_LABELS`, the catalog's).

Pre-cache pods (`precache/workloads.py`) get `node_only()` of the same placement: the same
selector, required node affinity and tolerations, so the DaemonSet has a pod on exactly
the nodes the tier's serving pods can use, and nowhere else.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferfleet.api.node_labels import alternatives
from inferfleet.api.spec import NO_ACCELERATOR, InlineGpu, TierSpec, required_node_terms
from inferfleet.catalog import Catalogs
from inferfleet.catalog.gpus import GpuSpec, gpu_from_inline

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# The tier's own terms times the default ones; beyond this the pod spec grows without
# bound (render.checks refuses the tier and names its affinity).
MAX_NODE_SELECTOR_TERMS = 64

# How each big cloud labels spot capacity (key, value, cloud). A spot tier requires one.
# - GKE: Spot VMs `cloud.google.com/gke-spot=true`, legacy preemptible VMs
#   `cloud.google.com/gke-preemptible=true` (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms).
# - Karpenter (EKS, EKS Auto Mode, AKS node auto-provisioning): `karpenter.sh/capacity-type=spot`
#   (karpenter.sh/docs/concepts/scheduling, well-known labels).
# - EKS managed node groups: `eks.amazonaws.com/capacityType=SPOT` (capacityType SPOT|ON_DEMAND).
# - AKS spot node pools: `kubernetes.azure.com/scalesetpriority=spot`
#   (learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_LABELS: tuple[tuple[str, str, str], ...] = (
    ("cloud.google.com/gke-spot", "true", "gcp"),
    ("cloud.google.com/gke-preemptible", "true", "gcp"),
    ("karpenter.sh/capacity-type", "spot", "any"),
    ("eks.amazonaws.com/capacityType", "SPOT", "aws"),
    ("kubernetes.azure.com/scalesetpriority", "spot", "azure"),
)


# An on-demand tier's pods: none of the spot labels above. NotIn also matches a node
# without the label, so a cluster that labels no capacity type schedules them anywhere;
# the node-selector terms are OR-ed, so every term carries all five.
def off_spot() -> list[dict[str, Any]]:
    return [{"key": key, "operator": "NotIn", "values": [value]} for key, value, _ in SPOT_LABELS]


# Spot nodes some clouds taint: AKS always (kubernetes.azure.com/scalesetpriority=spot:NoSchedule),
# GKE when node auto-provisioning or the pool asks for it (cloud.google.com/gke-spot=true:NoSchedule).
SPOT_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": "cloud.google.com/gke-preemptible", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    },
)
# Label domains that only one cloud's nodes carry; a GPU label of one cloud is never
# paired with another cloud's spot label (no node has both).
_CLOUD_DOMAINS = {
    "cloud.google.com": "gcp",
    "karpenter.k8s.aws": "aws",
    "eks.amazonaws.com": "aws",
    "kubernetes.azure.com": "azure",
    "karpenter.azure.com": "azure",
}


@dataclass(frozen=True)
class NodePlacement:
    """A pod's node placement: what goes into its spec."""

    node_selector: dict[str, str]
    affinity: dict[str, Any] | None
    tolerations: list[dict[str, Any]]

    def node_only(self) -> NodePlacement:
        """The same nodes without pod (anti-)affinity or preferences: for pre-cache pods."""
        required = ((self.affinity or {}).get("nodeAffinity") or {}).get(REQUIRED)
        affinity = {"nodeAffinity": {REQUIRED: required}} if required else None
        return NodePlacement(dict(self.node_selector), affinity, [dict(t) for t in self.tolerations])

    def pod_fields(self) -> dict[str, Any]:
        """nodeSelector / affinity / tolerations as pod spec keys, leaving out empty ones."""
        fields: dict[str, Any] = {}
        if self.node_selector:
            fields["nodeSelector"] = self.node_selector
        if self.affinity:
            fields["affinity"] = self.affinity
        if self.tolerations:
            fields["tolerations"] = self.tolerations
        return fields


def tier_gpu(tier: TierSpec, catalogs: Catalogs) -> GpuSpec | None:
    """The tier's GPU record: inline, or the operator's catalogs (built-in plus catalog_file)."""
    if isinstance(tier.gpu, InlineGpu):
        return gpu_from_inline(tier.gpu)
    return catalogs.gpu(tier.gpu)


def resource_name(tier: TierSpec, gpu: GpuSpec | None) -> str:
    if isinstance(tier.gpu, InlineGpu):
        return tier.gpu.resource_name
    return gpu.resource_name if gpu is not None else "nvidia.com/gpu"


def _cloud(key: str) -> str:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return _CLOUD_DOMAINS.get(domain, "any")


def _requirement(key: str, values: tuple[str, ...]) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def default_terms(tier: TierSpec, gpu: GpuSpec | None) -> list[dict[str, Any]]:
    """The GPU-type and capacity-type node-selector terms the operator requires, OR-ed."""
    if tier.gpu_node_affinity == "none":
        return []
    gpu_alternatives: list[tuple[str, list[dict[str, Any]]]] = []
    if gpu is not None and resource_name(tier, gpu) != NO_ACCELERATOR:
        gpu_alternatives = [
            (_cloud(key), [_requirement(key, values)]) for key, values in alternatives(gpu.node_labels)
        ]
    spot_alternatives: list[tuple[str, list[dict[str, Any]]]] = []
    if tier.capacity_type == "spot":
        spot_alternatives = [(cloud, [_requirement(key, (value,))]) for key, value, cloud in SPOT_LABELS]
    # On-demand tiers: every term also excludes spot capacity (the terms are OR-ed).
    excluded = off_spot() if tier.capacity_type != "spot" else []
    if not gpu_alternatives or not spot_alternatives:
        only = gpu_alternatives or spot_alternatives
        if not only:
            return [{"matchExpressions": excluded}] if excluded else []
        return [{"matchExpressions": [*_copy(expressions), *_copy(excluded)]} for _, expressions in only]
    terms = []
    pairs = itertools.product(gpu_alternatives, spot_alternatives)
    for (gpu_cloud, gpu_expr), (spot_cloud, spot_expr) in pairs:
        if "any" in (gpu_cloud, spot_cloud) or gpu_cloud == spot_cloud:
            terms.append({"matchExpressions": _copy([*gpu_expr, *spot_expr])})
    return terms


def _and(own: list[dict[str, Any]], default: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Terms matching a node when one of `own` AND one of `default` match it."""
    combined = []
    for mine, ours in itertools.product(own, default):
        term = _copy(mine)
        term["matchExpressions"] = [*term.get("matchExpressions", []), *_copy(ours["matchExpressions"])]
        combined.append(term)
    return combined


def combined_term_count(tier: TierSpec, gpu: GpuSpec | None) -> int:
    """How many required node-selector terms the tier's pods get."""
    ours = len(default_terms(tier, gpu))
    own = len(required_node_terms(tier.affinity) or [])
    return ours * own if ours and own else ours or own


def tolerations(tier: TierSpec, resource: str) -> list[dict[str, Any]]:
    out = [t.to_wire() for t in tier.tolerations or []]
    # GPU node pools are commonly tainted with the device's resource name (GKE, EKS and
    # AKS GPU pools: nvidia.com/gpu; the AMD GPU operator: amd.com/gpu).
    if resource != NO_ACCELERATOR and not any(t.get("key") == resource for t in out):
        out.append({"key": resource, "operator": "Exists", "effect": "NoSchedule"})
    if tier.capacity_type == "spot":
        for toleration in SPOT_TOLERATIONS:
            if not any(t.get("key") == toleration["key"] for t in out):
                out.append(dict(toleration))
    return out


def tier_placement(tier: TierSpec, gpu: GpuSpec | None) -> NodePlacement:
    """The serving pods' placement for a tier on its GPU (the tier's record: inline or
    from the catalogs; see the module docstring for the rules)."""
    resource = resource_name(tier, gpu)
    affinity: dict[str, Any] | None = _copy(tier.affinity) if tier.affinity else None
    ours = default_terms(tier, gpu)
    if ours:
        own = required_node_terms(tier.affinity)
        terms = _and(own, ours) if own else ours
        affinity = affinity or {}
        node_affinity = dict(affinity.get("nodeAffinity") or {})
        node_affinity[REQUIRED] = {"nodeSelectorTerms": terms}
        affinity["nodeAffinity"] = node_affinity
    return NodePlacement(
        node_selector=dict(sorted((tier.node_selector or {}).items())),
        affinity=affinity,
        tolerations=tolerations(tier, resource),
    )


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


# Labels only GPU nodes carry: a CPU pod (the endpoint pickers, the operator) requires each
# to be absent. Beside the catalog's GPU-type keys, the presence labels the GPU stacks add:
# - NVIDIA GPU operator / GPU feature discovery: `nvidia.com/gpu.present=true` on every
#   node with an NVIDIA GPU, `nvidia.com/gpu.product` (NVIDIA/k8s-device-plugin,
#   docs/gpu-feature-discovery);
# - GKE: `cloud.google.com/gke-accelerator` on GPU node pools (GKE docs, "About GPUs");
# - Karpenter on AWS / EKS Auto Mode: `karpenter.k8s.aws/instance-gpu-name`,
#   `eks.amazonaws.com/instance-gpu-name` (well-known labels of each);
# - AKS GPU node pools: `kubernetes.azure.com/accelerator` (e.g. `nvidia`);
# - AMD's node labeller: `amd.com/gpu.product-name`, `amd.com/gpu.device-id`.
# A catalog key outside this list (e.g. `node.kubernetes.io/instance-type`, which CPU nodes
# carry too) is excluded by its GPU values only (NotIn), never by its presence.
GPU_NODE_LABELS: tuple[str, ...] = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "eks.amazonaws.com/instance-gpu-name",
    "kubernetes.azure.com/accelerator",
    "amd.com/gpu.product-name",
    "amd.com/gpu.device-id",
)


def off_gpu_expressions(catalogs: Catalogs) -> list[dict[str, Any]]:
    """One node-selector term's expressions that no GPU node we can recognise matches.

    DoesNotExist and NotIn match a node without the label, so on a cluster that labels
    nothing every node qualifies."""
    expressions: list[dict[str, Any]] = [{"key": key, "operator": "DoesNotExist"} for key in GPU_NODE_LABELS]
    values: dict[str, set[str]] = {}
    for gpu in catalogs.gpus.values():
        for key, listed in alternatives(gpu.node_labels):
            if key not in GPU_NODE_LABELS:
                values.setdefault(key, set()).update(listed)
    expressions += [
        {"key": key, "operator": "NotIn", "values": sorted(found)} for key, found in sorted(values.items())
    ]
    return expressions


def off_gpu_nodes(catalogs: Catalogs) -> NodePlacement:
    """Placement of a CPU pod of ours: required node affinity off every GPU node we know."""
    term = {"matchExpressions": off_gpu_expressions(catalogs)}
    return NodePlacement({}, {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}, [])


def selector_text(node_selector: Mapping[str, str] | None, affinity: Mapping[str, Any] | None) -> str:
    """A pod's required node placement in the label-selector syntax of `kubectl get nodes
    -l`: one selector per node-selector term, joined by " OR ". What every term shares
    (the tier's nodeSelector, the capacity-type exclusions) is said once, at the end."""
    required = ((affinity or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}
    terms = [
        [
            *map(_expression_text, term.get("matchExpressions") or []),
            *map(_field_text, term.get("matchFields") or []),
        ]
        for term in required.get("nodeSelectorTerms") or []
    ]
    shared = [f"{key}={value}" for key, value in sorted((node_selector or {}).items())]
    if len(terms) > 1:
        common = [part for part in terms[0] if all(part in term for term in terms[1:])]
        terms = [[part for part in term if part not in common] for term in terms]
        shared += [part for part in common if part not in shared]
    elif terms:
        shared = [*terms.pop(), *shared]
    choices = " OR ".join(",".join(term) for term in terms if term)
    if choices and shared:
        return f"{choices}; each with {','.join(shared)}"
    return choices or ",".join(shared) or "any node"


def _expression_text(expression: Mapping[str, Any]) -> str:
    key, operator = str(expression.get("key")), str(expression.get("operator"))
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In" and len(values) == 1:
        return f"{key}={values[0]}"
    if operator in ("In", "NotIn"):
        return f"{key} {operator.lower()} ({','.join(values)})"
    if operator == "Exists":
        return key
    if operator == "DoesNotExist":
        return f"!{key}"
    if operator in ("Gt", "Lt") and values:
        return f"{key}{'>' if operator == 'Gt' else '<'}{values[0]}"
    return f"{key} {operator} {values}"


def _field_text(expression: Mapping[str, Any]) -> str:
    return "field " + _expression_text(expression)
