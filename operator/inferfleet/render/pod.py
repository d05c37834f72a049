"""The vLLM pod template: assembled in one place, extended by one call.

`pod_spec` builds the whole pod for a tier from the plan. Other features add to it
through `PodAdditions` (init containers, volumes, mounts, env): the weight pre-cache
(issue 5) returns one from a contributor listed in `render.POD_CONTRIBUTORS`, and
`extend` merges it, so nobody edits the template to add a sidecar or a volume.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import InferenceService, TierPlan, TierSpec, vllm_flags
from inferfleet.api.spec import NO_ACCELERATOR
from inferfleet.catalog import placement
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.config import OperatorSettings
from inferfleet.design.pd_split import Role
from inferfleet.planner.host_memory import CPU_PER_GPU, gpus_per_pod, memory_limit_gib, memory_request_gib
from inferfleet.render import lifecycle, pd_objects, runtime, templating
from inferfleet.render.model_source import ModelSource
from inferfleet.render.vllm_args import served_model_name, vllm_args

CONTAINER_NAME = "vllm"
PORT_NAME = "http"
SHM_VOLUME = "dshm"
# The root filesystem is read-only; vLLM, torch, Triton, Ray and the HF hub write only
# under HOME (caches, config, a hub download when weights are not pre-cached) and /tmp
# (Ray's session, torch inductor). Both are emptyDirs without a size limit: a hub
# download may be the whole model.
HOME_VOLUME = "home"
HOME_PATH = "/home/vllm"
TMP_VOLUME = "tmp"
# The hub token is a read-only file, never an environment variable (huggingface_hub
# reads HF_TOKEN_PATH); 0440 so only the pod's user and group can read it.
HF_TOKEN_VOLUME = "hf-token"
HF_TOKEN_DIR = "/var/run/secrets/inferfleet/hf"
HF_TOKEN_FILE = "token"
SECRET_FILE_MODE = 0o440
# Variables the hardening owns; validation refuses them in serving.env (api.vllm_flags).
RESERVED_ENV = vllm_flags.RESERVED_ENV
# Host-side resources per GPU: tokenisation, the API server and weight loading need a
# few cores and some RAM per GPU worker; /dev/shm carries NCCL and Ray object traffic.
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
    pod_fields: Mapping[str, Any] = field(default_factory=dict)  # e.g. serviceAccountName


def clone_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, tuples, scalars), several times
    faster than copy.deepcopy, which renders spent a third of their time in."""
    if isinstance(value, dict):
        return {key: clone_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clone_json(item) for item in value]
    if isinstance(value, tuple):
        return tuple(clone_json(item) for item in value)
    return value


def extend(pod: dict[str, Any], additions: PodAdditions) -> dict[str, Any]:
    """A copy of a pod spec with `additions` merged in (vLLM container = the first)."""
    return extend_in_place(clone_json(pod), additions)


def extend_in_place(pod: dict[str, Any], additions: PodAdditions) -> dict[str, Any]:
    """`extend` on a pod the caller owns (no copy of it; the additions are copied)."""
    pod.update(clone_json(dict(additions.pod_fields)))
    if additions.init_containers:
        pod["initContainers"] = [*pod.get("initContainers", []), *clone_json(additions.init_containers)]
    if additions.volumes:
        pod["volumes"] = [*pod.get("volumes", []), *clone_json(additions.volumes)]
    container = pod["containers"][0]
    if additions.mounts:
        container["volumeMounts"] = [*container.get("volumeMounts", []), *clone_json(additions.mounts)]
    if additions.env:
        container["env"] = [*container.get("env", []), *clone_json(additions.env)]
    return pod


_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity_bytes(quantity: str) -> float | None:
    """A memory quantity in bytes, None when it is not one we can read."""
    text = quantity.strip()
    for suffixes in (_BINARY_SUFFIXES, _DECIMAL_SUFFIXES):
        for suffix, factor in suffixes.items():
            if text.endswith(suffix):
                number = text.removesuffix(suffix)
                return float(number) * factor if _is_number(number) else None
    return float(text) if _is_number(text) else None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _resources(service: InferenceService, plan: TierPlan, resource: str) -> dict[str, Any]:
    gpus = gpus_per_pod(plan)
    requests = {"cpu": str(CPU_PER_GPU * gpus), "memory": f"{memory_request_gib(plan)}Gi"}
    limits: dict[str, str] = {}
    if resource != NO_ACCELERATOR:
        limits[resource] = str(gpus)
    user = service.spec.serving.resources if service.spec.serving else None
    if user is not None:
        requests.update(user.requests or {})
        limits.update(user.limits or {})
    if "memory" not in limits:
        # Always a memory limit: a leaking or runaway pod is OOM-killed on its own
        # instead of pushing the node (and its other GPU pods) into memory pressure.
        # Never below the request, or the API server refuses the pod.
        default_gib = memory_limit_gib(plan)
        requested = quantity_bytes(str(requests["memory"]))
        if requested is not None and requested > default_gib * 2**30:
            limits["memory"] = str(requests["memory"])
        else:
            limits["memory"] = f"{default_gib}Gi"
    return {"requests": dict(sorted(requests.items())), "limits": dict(sorted(limits.items()))}


def _needs_hub_token(service: InferenceService, source: ModelSource) -> bool:
    # Pre-cached weights load offline (HF_HUB_OFFLINE=1): the pod never talks to the
    # hub, so it gets no token at all.
    offline = dict(source.env).get("HF_HUB_OFFLINE") == "1"
    return service.spec.model.credentials_secret_ref is not None and source.scheme == "hf" and not offline


def _hub_token_volume(service: InferenceService) -> dict[str, Any]:
    credentials = service.spec.model.credentials_secret_ref
    assert credentials is not None
    # Only the one key, under a fixed file name: the rest of the Secret stays out of the pod.
    return {
        "name": HF_TOKEN_VOLUME,
        "secret": {
            "secretName": credentials.name,
            "items": [{"key": credentials.key, "path": HF_TOKEN_FILE}],
            "defaultMode": SECRET_FILE_MODE,
        },
    }


def _writable_env() -> dict[str, str]:
    """Point every cache vLLM and its libraries write at the writable HOME volume."""
    cache = f"{HOME_PATH}/.cache"
    return {
        "HOME": HOME_PATH,
        # An arbitrary UID has no passwd entry; getpass.getuser() (torch, triton) reads USER.
        "USER": "vllm",
        "XDG_CACHE_HOME": cache,
        "XDG_CONFIG_HOME": f"{HOME_PATH}/.config",
        "VLLM_CACHE_ROOT": f"{cache}/vllm",
        "TRITON_CACHE_DIR": f"{cache}/triton",
        "TORCHINDUCTOR_CACHE_DIR": f"{cache}/torchinductor",
        # numba caches next to its sources in site-packages by default: read-only here.
        "NUMBA_CACHE_DIR": f"{cache}/numba",
        "CUDA_CACHE_PATH": f"{cache}/nv",
    }


def _env(service: InferenceService, source: ModelSource) -> list[dict[str, Any]]:
    env: dict[str, dict[str, Any]] = {
        name: {"name": name, "value": value} for name, value in _writable_env().items()
    }
    if _needs_hub_token(service, source):
        path = f"{HF_TOKEN_DIR}/{HF_TOKEN_FILE}"
        env["HF_TOKEN_PATH"] = {"name": "HF_TOKEN_PATH", "value": path}
    for name, value in source.env:
        env[name] = {"name": name, "value": value}
    serving = service.spec.serving
    for user in (serving.env if serving is not None else None) or []:
        if user.name not in RESERVED_ENV:  # validation refuses them; the mounted secret wins
            env[user.name] = user.to_wire()
    return list(env.values())


def pod_security_context(
    settings: OperatorSettings, supplemental_groups: list[int] | None = None
) -> dict[str, Any]:
    """Pod-level: a non-root UID unless root was asked for explicitly; seccomp always.

    `supplemental_groups`: the device groups the GPU's vendor needs (render.runtime)."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if not settings.vllm_run_as_root:
        uid = settings.vllm_run_as_user
        # fsGroup makes the mounted token and the emptyDirs readable by that group.
        context.update(runAsNonRoot=True, runAsUser=uid, runAsGroup=uid, fsGroup=uid)
        if supplemental_groups:
            context["supplementalGroups"] = list(supplemental_groups)
    return context


def container_security_context() -> dict[str, Any]:
    """Container-level: never privileged, no escalation, no capabilities, read-only root.

    GPUs reach the container through the device plugin (device nodes, no capability),
    and NCCL/Ray need none of NET_RAW, SYS_ADMIN or IPC_LOCK to run over TCP or NVLink.
    """
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def harden(pod: dict[str, Any], settings: OperatorSettings) -> dict[str, Any]:
    """A copy of `pod` where every container gets the restricted defaults it lacks.

    Applied after contributors extend the pod, so their init containers and sidecars
    are covered too; a key a contributor set itself is left as it is.
    """
    return harden_in_place(clone_json(pod), settings)


def harden_in_place(pod: dict[str, Any], settings: OperatorSettings) -> dict[str, Any]:
    """`harden` on a pod the caller owns (no copy)."""
    pod.setdefault("automountServiceAccountToken", False)
    security = pod.setdefault("securityContext", {})
    for key, value in pod_security_context(settings).items():
        security.setdefault(key, value)
    for group in ("initContainers", "containers"):
        for container in pod.get(group, []):
            context = container.setdefault("securityContext", {})
            for key, value in container_security_context().items():
                context.setdefault(key, value)
    return pod


def _shm_volume(plan: TierPlan) -> dict[str, Any]:
    size_gib = min(SHM_MAX_GIB, max(SHM_MIN_GIB, SHM_PER_GPU_GIB * gpus_per_pod(plan)))
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{size_gib}Gi"}}


def _volumes(service: InferenceService, plan: TierPlan, source: ModelSource) -> list[dict[str, Any]]:
    volumes = [_shm_volume(plan), {"name": HOME_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "emptyDir": {}}]
    if _needs_hub_token(service, source):
        volumes.append(_hub_token_volume(service))
    return [*volumes, *source.volumes]


def _mounts(service: InferenceService, source: ModelSource) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
        {"name": HOME_VOLUME, "mountPath": HOME_PATH},
        {"name": TMP_VOLUME, "mountPath": "/tmp"},
    ]
    if _needs_hub_token(service, source):
        mounts.append({"name": HF_TOKEN_VOLUME, "mountPath": HF_TOKEN_DIR, "readOnly": True})
    return [*mounts, *source.mounts]


@dataclass(frozen=True)
class TierRenderContext:
    """Everything a tier's objects are rendered from (also what contributors receive)."""

    service: InferenceService
    tier: TierSpec
    plan: TierPlan
    settings: OperatorSettings
    source: ModelSource
    image: str  # the vLLM build the design chose for the tier (design.images)
    gpu: GpuSpec | None  # the tier's GPU record (None: no catalog has it)
    role: Role | None = None  # prefill or decode in a deployed split (render.pd_objects)
    pool: str | None = None  # the InferencePool a decode pod's sidecar may send prompts into


def _probes(plan: TierPlan, served_name: str, port: int, *, server: bool) -> dict[str, Any]:
    if not server:  # a LeaderWorkerSet worker: a Ray node, no HTTP server
        return {
            "startup_probe": lifecycle.worker_startup_probe(),
            "readiness_probe": lifecycle.worker_readiness_probe(),
            "liveness_probe": lifecycle.worker_liveness_probe(),
        }
    return {
        "startup_probe": lifecycle.startup_probe(plan, PORT_NAME),
        "readiness_probe": lifecycle.readiness_probe(port, served_name),
        "liveness_probe": lifecycle.liveness_probe(PORT_NAME),
    }


def pod_spec(ctx: TierRenderContext, role: str = "server") -> dict[str, Any]:
    """The pod spec of one tier; `role` is server (Deployment, LWS leader) or worker."""
    service, tier, plan, settings, source = ctx.service, ctx.tier, ctx.plan, ctx.settings, ctx.source
    image = ctx.image
    served_name = served_model_name(service)
    multi_node = plan.nodes_per_replica > 1
    server = role == "server"
    port = pd_objects.vllm_port(ctx.role)
    role_args = tuple(pd_objects.kv_transfer_args(ctx.role))
    if not multi_node:
        command, args = ["vllm", "serve"], vllm_args(service, plan, source, port, role_args)
    elif server:
        command = ["bash", "-c", LEADER_SCRIPT, "vllm-leader"]
        args = vllm_args(service, plan, source, port, role_args)
    else:
        command, args = ["bash", "-c", WORKER_SCRIPT], []
    resource = placement.resource_name(tier, ctx.gpu)
    where = placement.tier_placement(tier, ctx.gpu)
    env_from = []
    if source.credentials_as_env_from and service.spec.model.credentials_secret_ref is not None:
        env_from.append({"secretRef": {"name": service.spec.model.credentials_secret_ref.name}})
    context = {
        "termination_grace_s": lifecycle.termination_grace_s(service),
        "node_selector": where.node_selector,
        "tolerations": where.tolerations,
        "affinity": where.affinity,
        "container_name": CONTAINER_NAME,
        "image": image,
        "command": command,
        "args": args,
        "env": [*_env(service, source), *pd_objects.vllm_env(ctx.role)],
        "env_from": env_from,
        "ports": [
            {"name": PORT_NAME, "containerPort": port, "protocol": "TCP"},
            *pd_objects.vllm_ports(ctx.role),
        ]
        if server
        else [],
        "resources": _resources(service, plan, resource),
        "mounts": _mounts(service, source),
        "volumes": _volumes(service, plan, source),
        **_probes(plan, served_name, port, server=server),
        "pre_stop": lifecycle.pre_stop(service, port) if server else None,
        "pod_security": pod_security_context(settings, runtime.supplemental_groups(ctx.gpu, settings)),
        "container_security": container_security_context(),
    }
    return templating.render_json("pod.json.j2", pod=context)


def progress_deadline_s(plan: TierPlan) -> int:
    """A rollout is stuck when a new pod has not started well past its startup budget."""
    return max(600, math.ceil(lifecycle.startup_budget_s(plan) * 1.5))
