"""The vLLM pod template: assembled in one place, extended by one call.

`pod_spec` builds the whole pod for a tier from the plan. Other features add to it
through `PodAdditions` (init containers, volumes, mounts, env): the weight pre-cache
(issue 5) returns one from a contributor listed in `render.POD_CONTRIBUTORS`, and
`extend` merges it, so nobody edits the template to add a sidecar or a volume.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfleet import catalog
from inferfleet.api import InferenceService, TierPlan, TierSpec
from inferfleet.api.spec import InlineGpu
from inferfleet.config import OperatorSettings
from inferfleet.render import lifecycle, templating
from inferfleet.render.model_source import ModelSource
from inferfleet.render.vllm_args import HTTP_PORT, served_model_name, vllm_args

CONTAINER_NAME = "vllm"
PORT_NAME = "http"
SHM_VOLUME = "dshm"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
# Resource name an inline GPU may give to mean "no accelerator" (CPU-only test tiers).
NO_ACCELERATOR = "none"
# Host-side resources per GPU: tokenisation, the API server and weight loading need a
# few cores and some RAM per GPU worker; /dev/shm carries NCCL and Ray object traffic.
CPU_PER_GPU = 4
MEMORY_BASE_GIB = 16
MEMORY_PER_GPU_GIB = 8
SHM_PER_GPU_GIB = 4
SHM_MIN_GIB = 2
SHM_MAX_GIB = 64

# Multi-node replicas (LeaderWorkerSet) run vLLM on a Ray cluster spanning the group:
# the leader starts the Ray head, waits for every worker node, then serves.
LEADER_SCRIPT = """\
set -eu
ray start --head --port=6379 --disable-usage-stats
until [ "$(python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); \
print(sum(1 for n in ray.nodes() if n["Alive"]))')" -ge "${LWS_GROUP_SIZE}" ]; do sleep 5; done
exec vllm serve "$@"
"""
WORKER_SCRIPT = 'exec ray start --address="${LWS_LEADER_ADDRESS}:6379" --block --disable-usage-stats'


@dataclass(frozen=True)
class PodAdditions:
    """What a feature adds to every vLLM pod of a tier."""

    init_containers: tuple[dict[str, Any], ...] = ()
    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()
    env: tuple[dict[str, Any], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)


def extend(pod: dict[str, Any], additions: PodAdditions) -> dict[str, Any]:
    """A copy of a pod spec with `additions` merged in (vLLM container = the first)."""
    out = copy.deepcopy(pod)
    if additions.init_containers:
        out["initContainers"] = [*out.get("initContainers", []), *copy.deepcopy(additions.init_containers)]
    if additions.volumes:
        out["volumes"] = [*out.get("volumes", []), *copy.deepcopy(additions.volumes)]
    container = out["containers"][0]
    if additions.mounts:
        container["volumeMounts"] = [*container.get("volumeMounts", []), *copy.deepcopy(additions.mounts)]
    if additions.env:
        container["env"] = [*container.get("env", []), *copy.deepcopy(additions.env)]
    return out


def gpu_resource_name(tier: TierSpec) -> str:
    """The extended resource the device plugin advertises for the tier's GPU."""
    if isinstance(tier.gpu, InlineGpu):
        return tier.gpu.resource_name
    # The built-in catalog (loaded once, immutable) knows each vendor's resource name.
    known = catalog.default_catalogs().gpu(tier.gpu)
    return known.resource_name if known is not None else DEFAULT_GPU_RESOURCE


def gpus_per_pod(plan: TierPlan) -> int:
    return max(1, plan.gpus_per_replica // max(1, plan.nodes_per_replica))


def _resources(service: InferenceService, tier: TierSpec, plan: TierPlan) -> dict[str, Any]:
    gpus = gpus_per_pod(plan)
    requests = {"cpu": str(CPU_PER_GPU * gpus), "memory": f"{MEMORY_BASE_GIB + MEMORY_PER_GPU_GIB * gpus}Gi"}
    limits: dict[str, str] = {}
    resource = gpu_resource_name(tier)
    if resource != NO_ACCELERATOR:
        limits[resource] = str(gpus)
    user = service.spec.serving.resources if service.spec.serving else None
    if user is not None:
        requests.update(user.requests or {})
        limits.update(user.limits or {})
    out: dict[str, Any] = {"requests": dict(sorted(requests.items()))}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    return out


def _env(service: InferenceService, source: ModelSource) -> list[dict[str, Any]]:
    env: dict[str, dict[str, Any]] = {}
    credentials = service.spec.model.credentials_secret_ref
    if credentials is not None and source.scheme == "hf":
        # Always a reference: the token never appears in an object the operator writes.
        env["HF_TOKEN"] = {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": credentials.name, "key": credentials.key}},
        }
    for name, value in source.env:
        env[name] = {"name": name, "value": value}
    serving = service.spec.serving
    for user in (serving.env if serving is not None else None) or []:
        if user.name != "HF_TOKEN":  # the secret reference wins over a literal
            env[user.name] = {"name": user.name, "value": user.value}
    return list(env.values())


def _tolerations(tier: TierSpec) -> list[dict[str, Any]]:
    tolerations = [t.to_wire() for t in tier.tolerations or []]
    resource = gpu_resource_name(tier)
    # GPU node pools are commonly tainted with the device's resource name.
    if resource != NO_ACCELERATOR and not any(t.get("key") == resource for t in tolerations):
        tolerations.append({"key": resource, "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def _shm_volume(plan: TierPlan) -> dict[str, Any]:
    size_gib = min(SHM_MAX_GIB, max(SHM_MIN_GIB, SHM_PER_GPU_GIB * gpus_per_pod(plan)))
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{size_gib}Gi"}}


@dataclass(frozen=True)
class TierContext:
    """Everything a tier's objects are rendered from (also what contributors receive)."""

    service: InferenceService
    tier: TierSpec
    plan: TierPlan
    settings: OperatorSettings
    source: ModelSource


def pod_spec(ctx: TierContext, role: str = "server") -> dict[str, Any]:
    """The pod spec of one tier; `role` is server (Deployment, LWS leader) or worker."""
    service, tier, plan, settings, source = ctx.service, ctx.tier, ctx.plan, ctx.settings, ctx.source
    serving = service.spec.serving
    image = (serving.image if serving is not None else None) or settings.vllm_image
    served_name = served_model_name(service)
    multi_node = plan.nodes_per_replica > 1
    server = role == "server"
    if not multi_node:
        command, args = ["vllm", "serve"], vllm_args(service, plan, source)
    elif server:
        command, args = ["bash", "-c", LEADER_SCRIPT, "vllm-leader"], vllm_args(service, plan, source)
    else:
        command, args = ["bash", "-c", WORKER_SCRIPT], []
    env_from = []
    if source.credentials_as_env_from and service.spec.model.credentials_secret_ref is not None:
        env_from.append({"secretRef": {"name": service.spec.model.credentials_secret_ref.name}})
    context = {
        "termination_grace_s": lifecycle.termination_grace_s(service),
        "node_selector": dict(sorted((tier.node_selector or {}).items())),
        "tolerations": _tolerations(tier),
        "affinity": tier.affinity,
        "container_name": CONTAINER_NAME,
        "image": image,
        "command": command,
        "args": args,
        "env": _env(service, source),
        "env_from": env_from,
        "ports": [{"name": PORT_NAME, "containerPort": HTTP_PORT, "protocol": "TCP"}] if server else [],
        "resources": _resources(service, tier, plan),
        "mounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, *source.mounts],
        "volumes": [_shm_volume(plan), *source.volumes],
        "startup_probe": lifecycle.startup_probe(plan, PORT_NAME) if server else None,
        "readiness_probe": lifecycle.readiness_probe(HTTP_PORT, served_name) if server else None,
        "liveness_probe": lifecycle.liveness_probe(PORT_NAME) if server else None,
        "pre_stop": lifecycle.pre_stop(service, HTTP_PORT) if server else None,
    }
    return templating.render_json("pod.json.j2", pod=context)


def progress_deadline_s(plan: TierPlan) -> int:
    """A rollout is stuck when a new pod has not started well past its startup budget."""
    return max(600, math.ceil(lifecycle.startup_budget_s(plan) * 1.5))
