"""A mixed cluster as real labellers and clouds label it, for placement tests.

Each node says what it really is (`gpu`, `spot`) so a test can compute where a tier
belongs without asking the renderer. Labels and taints are the ones the components write:
GPU feature discovery (`nvidia.com/gpu.product`), GKE (`cloud.google.com/gke-accelerator`,
GPU nodes tainted `nvidia.com/gpu=present:NoSchedule`, spot `cloud.google.com/gke-spot`),
Karpenter on EKS (`karpenter.k8s.aws/instance-gpu-name`, `karpenter.sh/capacity-type`),
EKS Auto Mode (`eks.amazonaws.com/instance-gpu-name`), EKS managed node groups
(`node.kubernetes.io/instance-type`, `eks.amazonaws.com/capacityType`), AKS
(`kubernetes.azure.com/accelerator`; spot pools `kubernetes.azure.com/scalesetpriority=spot`,
tainted), AMD's node labeller
(`amd.com/gpu.product-name`, `amd.com/gpu.device-id`, taint `amd.com/gpu`).
"""

from __future__ import annotations

from tests.unit.render.node_fit import Node

NVIDIA_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
AMD_TAINT = {"key": "amd.com/gpu", "value": "present", "effect": "NoSchedule"}
AKS_SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
GPUS_8 = {"nvidia.com/gpu": 8}
AMD_8 = {"amd.com/gpu": 8}


def _gfd(name: str, product: str, gpu: str, **extra: str) -> Node:
    return Node(
        name, {"nvidia.com/gpu.product": product, "nvidia.com/gpu.present": "true", **extra}, (), GPUS_8, gpu
    )


GKE = "cloud.google.com/gke-accelerator"
GKE_SPOT = {"cloud.google.com/gke-spot": "true"}
GKE_PREEMPTIBLE = {"cloud.google.com/gke-preemptible": "true"}
KARPENTER = "karpenter.k8s.aws/instance-gpu-name"
AUTO_MODE = "eks.amazonaws.com/instance-gpu-name"
CAPACITY = "karpenter.sh/capacity-type"
INSTANCE = "node.kubernetes.io/instance-type"
NODEGROUP_CAPACITY = "eks.amazonaws.com/capacityType"
AKS_SPOT = {"kubernetes.azure.com/scalesetpriority": "spot"}
AKS_GPU = {"kubernetes.azure.com/accelerator": "nvidia"}
AMD_NAME = "amd.com/gpu.product-name"
AMD_ID = "amd.com/gpu.device-id"
GFD = "nvidia.com/gpu.product"

NODES: tuple[Node, ...] = (
    # NVIDIA GPU operator / GPU feature discovery, untainted.
    _gfd("gfd-h100", "NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"),
    # An EKS node group of p5.48xlarge (8 H100s, 2 TiB), GPU operator labels.
    _gfd(
        "eks-p5",
        "NVIDIA-H100-80GB-HBM3",
        "H100-SXM-80GB",
        **{"node.kubernetes.io/instance-type": "p5.48xlarge"},
    ),
    _gfd("gfd-h200", "NVIDIA-H200", "H200-SXM-141GB"),
    _gfd("gfd-a100-80", "NVIDIA-A100-SXM4-80GB", "A100-SXM-80GB"),
    _gfd("gfd-a100-40", "NVIDIA-A100-SXM4-40GB", "A100-SXM-40GB"),
    _gfd("gfd-l40s", "NVIDIA-L40S", "L40S"),
    _gfd("gfd-l4", "NVIDIA-L4", "L4"),
    _gfd("gfd-t4", "Tesla-T4", "T4"),
    # MIG slices of an A100: not an A100 any more.
    Node("gfd-a100-mig", {GFD: "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}, (), {"nvidia.com/gpu": 56}),
    # GKE (tainted GPU pools), on-demand and spot.
    Node("gke-l4", {GKE: "nvidia-l4"}, (NVIDIA_TAINT,), GPUS_8, "L4"),
    Node("gke-l4-spot", {GKE: "nvidia-l4", **GKE_SPOT}, (NVIDIA_TAINT,), GPUS_8, "L4", spot=True),
    Node(
        "gke-l4-preemptible", {GKE: "nvidia-l4", **GKE_PREEMPTIBLE}, (NVIDIA_TAINT,), GPUS_8, "L4", spot=True
    ),
    Node("gke-t4", {GKE: "nvidia-tesla-t4"}, (NVIDIA_TAINT,), GPUS_8, "T4"),
    Node("gke-h100-mega", {GKE: "nvidia-h100-mega-80gb"}, (NVIDIA_TAINT,), GPUS_8, "H100-SXM-80GB"),
    Node(
        "gke-a100-80-spot",
        {GKE: "nvidia-a100-80gb", **GKE_SPOT},
        (NVIDIA_TAINT,),
        GPUS_8,
        "A100-SXM-80GB",
        spot=True,
    ),
    # Karpenter on EKS, and EKS Auto Mode.
    Node("karpenter-l40s", {KARPENTER: "l40s", CAPACITY: "on-demand"}, (NVIDIA_TAINT,), GPUS_8, "L40S"),
    Node("karpenter-l4-spot", {KARPENTER: "l4", CAPACITY: "spot"}, (NVIDIA_TAINT,), GPUS_8, "L4", spot=True),
    Node("karpenter-l4", {KARPENTER: "l4", CAPACITY: "on-demand"}, (NVIDIA_TAINT,), GPUS_8, "L4"),
    # Karpenter's capacity reservations (capacity-type reserved) are not spot.
    Node("karpenter-h100-reserved", {KARPENTER: "h100", CAPACITY: "reserved"}, (), GPUS_8, "H100-SXM-80GB"),
    Node(
        "automode-h100", {AUTO_MODE: "h100", CAPACITY: "on-demand"}, (NVIDIA_TAINT,), GPUS_8, "H100-SXM-80GB"
    ),
    # EKS managed node groups: instance type only (A100 80 GB is p4de, 40 GB p4d).
    Node(
        "eks-p4de-spot",
        {INSTANCE: "p4de.24xlarge", NODEGROUP_CAPACITY: "SPOT"},
        (),
        GPUS_8,
        "A100-SXM-80GB",
        spot=True,
    ),
    Node("eks-p4d", {INSTANCE: "p4d.24xlarge", NODEGROUP_CAPACITY: "ON_DEMAND"}, (), GPUS_8, "A100-SXM-40GB"),
    Node(
        "eks-p4de", {INSTANCE: "p4de.24xlarge", NODEGROUP_CAPACITY: "ON_DEMAND"}, (), GPUS_8, "A100-SXM-80GB"
    ),
    # AKS spot pool with the GPU operator: tainted spot.
    Node(
        "aks-l4-spot", {GFD: "NVIDIA-L4", **AKS_GPU, **AKS_SPOT}, (AKS_SPOT_TAINT,), GPUS_8, "L4", spot=True
    ),
    # AKS GPU pool without the GPU operator: only AKS's own accelerator label, untainted.
    Node("aks-gpu-unknown", AKS_GPU, (), GPUS_8),
    # AMD node labeller; one VF node whose product name label is missing.
    Node("amd-mi300x", {AMD_NAME: "AMD_Instinct_MI300X_OAM", AMD_ID: "74a1"}, (AMD_TAINT,), AMD_8, "MI300X"),
    Node("amd-mi300x-vf", {AMD_ID: "74b5"}, (AMD_TAINT,), AMD_8, "MI300X"),
    Node("amd-mi325x", {AMD_NAME: "AMD_Instinct_MI325X_OAM", AMD_ID: "74a5"}, (AMD_TAINT,), AMD_8, "MI325X"),
    # A GPU node nobody labelled, untainted: which GPU it has is unknown.
    Node("unlabelled-gpu", {"kubernetes.io/os": "linux"}, (), GPUS_8),
    # A CPU node: no GPUs, no taints.
    Node("cpu", {"kubernetes.io/os": "linux", INSTANCE: "m7i.4xlarge"}),
    Node("cpu-spot", {"kubernetes.io/os": "linux", INSTANCE: "m7i.4xlarge", CAPACITY: "spot"}),
)
