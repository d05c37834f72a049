"""Kubernetes objects for weight pre-caching, and the serving pods' side of it. Pure.

Mechanism (cache.mode nvme): one DaemonSet per tier, restricted to the tier's nodes.

- It follows the tier's reachable nodes by construction: the DaemonSet controller puts a
  pre-cache pod on every node matching the tier's nodeSelector/nodeAffinity (with the
  tier's tolerations), including nodes the cluster autoscaler adds, as soon as they
  join — before the scheduler has placed a replica there, and whether or not a replica
  ever lands there, so a scale-up onto a new node finds the weights already local.
  A Job per node would need the operator to watch Nodes, create and garbage-collect one
  Job per (node, revision), and re-create Jobs when nodes come and go; the DaemonSet
  controller already does exactly this.
- Its pod fetches, then keeps running (`inferfleet cache fetch --hold`): that running
  process pins the revision against garbage collection for as long as the tier wants
  it, and collects older revisions under the node's budget every few minutes. Its
  readiness probe is `inferfleet cache verify`, so DESIRED/READY in
  `kubectl get ds -l inferfleet.dev/service=<name>` is "nodes eligible / nodes with the
  weights", which is also what CacheReady reports. Failures are ordinary pod restarts
  with the kubelet's backoff (CrashLoopBackOff), with `Reason: detail` in the
  termination message and the progress lines in `kubectl logs`.
- A revision change rolls the DaemonSet (all nodes at once: these pods serve nothing);
  new serving pods wait in their init container until their node has the revision.

cache.mode pvc: one Job fetching into the shared claim (one copy serves all nodes, so
per-node pods would only race for the same files); its name carries a hash of what it
fetches, so a new revision is a new Job and the old one is pruned with it.

The node cache reaches pods only through the namespace's claim (caching.precache.volumes): a
hostPath in a tenant's pod would fail Pod Security `baseline` and open every other
team's weights on the node. Pre-cache pods mount the namespace's whole tree; serving
pods mount only their own models' directories (subPath), read-only.

Serving pods (both modes) run `inferfleet cache verify --wait-s --pin` as an init
container (waiting with a message naming the DaemonSet instead of letting vLLM
download), which resolves the ref once and leaves a link to that exact revision in a
pod-local directory; vLLM loads the link with HF_HUB_OFFLINE=1, and `inferfleet cache
hold --pinned` (a native sidecar) holds that same revision while the pod lives. A ref
that moves later (a new fetch) never changes what a running pod loads or holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from inferfleet.api import InferenceService, Plan, TierPlan, TierSpec, labels
from inferfleet.caching.precache import compile_cache, volumes
from inferfleet.caching.precache.layout import DEFAULT_REF, SourceRef, credentials_key, parse_source, ref_name
from inferfleet.catalog import placement
from inferfleet.config import OperatorSettings
from inferfleet.planner.startup import compile_cache_use

COMPONENT_CACHE: Final = "cache"
LABEL_CACHE_REVISION: Final = f"{labels.GROUP}/cache-revision"
CACHE_VOLUME: Final = "model-cache"
# The serving pod's first init container; its --revision says what the pod loads
# (reconcile.rollout reads it back to hold a rollout until the new revision is cached).
VERIFY_CONTAINER: Final = "cache-verify"
CACHE_MOUNT_PATH: Final = "/var/cache/inferfleet"
# The engine's HTTP port and health path (render.vllm_args, render.lifecycle): the hold
# sidecar publishes a first start's compile caches once vLLM answers there (a decode pod
# of a prefill/decode split serves on another port: EngineHome.port).
ENGINE_PORT: Final = 8000
ENGINE_HEALTH_PATH: Final = "/health"
# A pod-local directory (emptyDir) holding one link per cached model to the revision the
# pod's verify container resolved: what vLLM loads and the hold sidecar pins.
PINS_VOLUME: Final = "pinned-revisions"
PINS_PATH: Final = "/run/inferfleet/pinned"
TMP_VOLUME: Final = "tmp"
SOURCES_ROOT: Final = "/mnt/sources"
CREDENTIALS_MOUNT: Final = "/var/run/secrets/inferfleet/source"
CREDENTIALS_VOLUME: Final = "source-credentials"
# How long a serving pod waits in its init container for the node's cache before the
# container fails (and restarts with backoff, saying why in its log and termination message).
VERIFY_WAIT_S: Final = 1800
READINESS_PERIOD_S: Final = 20
GC_INTERVAL_S: Final = 300
JOB_BACKOFF_LIMIT: Final = 6
_NAME_MAX: Final = 63
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class CachedModel:
    """One thing to cache: the base model or a LoRA adapter."""

    role: str  # "model" or "adapter-<name>"
    source: SourceRef
    revision: str
    # The credentials Secret (name, key) it is read with, part of its directory's name.
    secret: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        return credentials_key(self.source, self.secret)

    def dest(self, root: str = CACHE_MOUNT_PATH) -> str:
        return f"{root}/{self.key}"

    def ref_path(self, root: str = CACHE_MOUNT_PATH) -> str:
        """The ref symlink inside the cache (what the pin resolves once)."""
        return f"{self.dest(root)}/refs/{ref_name(self.revision)}"

    @property
    def pin(self) -> str:
        """What vLLM loads: the link the pod's verify container made to one revision."""
        return f"{PINS_PATH}/{self.role}"


def _bounded(name: str, limit: int = _NAME_MAX) -> str:
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """A label value (<= 63 chars of [A-Za-z0-9._-]) that still identifies `text`."""
    safe = _LABEL_VALUE.sub("_", text).strip("_.-") or "x"
    if safe != text or len(safe) > _NAME_MAX:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        safe = f"{safe[: _NAME_MAX - 9].rstrip('_.-')}-{digest}"
    return safe


def cache_mode(service: InferenceService) -> str:
    cache = service.spec.cache
    return cache.mode if cache is not None else "nvme"


def models(service: InferenceService) -> list[CachedModel]:
    """The base model and its adapters, in spec order. file:// sources are already local."""
    spec = service.spec.model
    ref = spec.credentials_secret_ref
    secret = (ref.name, ref.key) if ref is not None else None
    base = parse_source(spec.source or f"hf://{spec.name}")
    found: list[CachedModel] = []
    if base.scheme != "file":
        found.append(CachedModel("model", base, spec.revision or DEFAULT_REF, secret))
    for adapter in spec.adapters or []:
        source = parse_source(adapter.source)
        if source.scheme != "file":
            # Adapters are fetched with the model's credentials (the pre-cache mounts one Secret).
            found.append(CachedModel(f"adapter-{adapter.name}", source, DEFAULT_REF, secret))
    return found


def is_cached(service: InferenceService) -> bool:
    """Whether serving pods read weights from the pre-cache."""
    return cache_mode(service) in {"nvme", "pvc"} and any(m.role == "model" for m in models(service))


def node_path(service: InferenceService, settings: OperatorSettings) -> str:
    cache = service.spec.cache
    return (cache.node_path if cache is not None and cache.node_path else None) or settings.cache_node_path


def budget_gib(service: InferenceService, settings: OperatorSettings) -> float:
    """The eviction budget of the namespace's tree on a node (render.checks refuses a spec
    asking for more than the operator's own budget)."""
    cache = service.spec.cache
    eviction = cache.eviction if cache is not None else None
    return (eviction.budget_gib if eviction is not None else None) or settings.cache_budget_gib


def node_cache_volume(
    service: InferenceService, settings: OperatorSettings, namespace_uid: str | None = None
) -> volumes.NodeCacheVolume:
    """The namespace's claim and volume of the node cache root this service uses."""
    return volumes.NodeCacheVolume(
        namespace=service.namespace,
        namespace_uid=namespace_uid,
        node_path=node_path(service, settings),
        default_node_path=settings.cache_node_path,
        capacity_gib=settings.cache_budget_gib,
    )


def needs_node_volume(service: InferenceService) -> bool:
    """Whether the service's pods mount the namespace's node-cache claim (cache.mode nvme)."""
    return is_cached(service) and cache_mode(service) == "nvme"


def _metadata(service: InferenceService, name: str, tier: str | None, **extra: Any) -> dict[str, Any]:
    """Object metadata; the owner reference only once the InferenceService has a uid."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": service.namespace,
        "labels": _labels(service, tier),
        **extra,
    }
    owner = _owner(service)
    if owner:
        meta["ownerReferences"] = owner
    return meta


def _owner(service: InferenceService) -> list[dict[str, Any]]:
    if not service.metadata.uid:
        return []
    return [
        {
            "apiVersion": labels.API_VERSION,
            "kind": labels.KIND,
            "name": service.name,
            "uid": service.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _labels(service: InferenceService, tier: str | None) -> dict[str, str]:
    out = {
        labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.LABEL_NAME: "inferfleet-cache",
        labels.LABEL_INSTANCE: service.name,
        labels.LABEL_SERVICE: service.name,
        labels.LABEL_COMPONENT: COMPONENT_CACHE,
    }
    if tier is not None:
        out[labels.LABEL_TIER] = tier
    return out


def daemonset_name(service: str, tier: str) -> str:
    return _bounded(f"{service}-{tier}-cache")


def revision_label(service: InferenceService) -> str:
    """What pre-cache pods are labelled with: which revisions they fetch (for CacheReady)."""
    wanted = "|".join(f"{m.key}@{m.revision}" for m in models(service))
    return label_value(hashlib.sha256(wanted.encode()).hexdigest()[:16])


# --- serving pods ---------------------------------------------------------------------


def claim_of(service: InferenceService, settings: OperatorSettings) -> str | None:
    """The claim holding the cache: the namespace's node-cache claim (nvme) or the spec's
    own (pvc)."""
    if cache_mode(service) == "pvc":
        cache = service.spec.cache
        return cache.pvc_name if cache is not None else None
    return node_cache_volume(service, settings).claim


def cache_volume(
    service: InferenceService, settings: OperatorSettings, *, read_only: bool = False
) -> dict[str, Any]:
    """The claim as a pod volume: never a hostPath, which Pod Security `baseline` refuses
    and which would reach every owner's tree on the node."""
    claim: dict[str, Any] = {"claimName": claim_of(service, settings)}
    if read_only:
        claim["readOnly"] = True
    return {"name": CACHE_VOLUME, "persistentVolumeClaim": claim}


def model_mounts(cached: list[CachedModel]) -> list[dict[str, Any]]:
    """Read-only mounts of exactly these models' directories (subPath): a serving pod
    sees nothing else of the cache, not even other models of its own namespace."""
    return [
        {"name": CACHE_VOLUME, "mountPath": model.dest(), "subPath": model.key, "readOnly": True}
        for model in cached
    ]


@dataclass(frozen=True)
class ServingCache:
    """What a serving pod needs to load from the cache."""

    model_path: str
    adapter_paths: dict[str, str]
    volumes: tuple[dict[str, Any], ...]
    mounts: tuple[dict[str, Any], ...]
    env: tuple[tuple[str, str], ...]


def serving(service: InferenceService, settings: OperatorSettings) -> ServingCache | None:
    """Pinned model and adapter paths, read-only mounts and offline env; None without a cache."""
    if not is_cached(service):
        return None
    cached = models(service)
    base = next(m for m in cached if m.role == "model")
    adapters = {m.role.removeprefix("adapter-"): m.pin for m in cached if m.role != "model"}
    pins_mount = {"name": PINS_VOLUME, "mountPath": PINS_PATH, "readOnly": True}
    return ServingCache(
        model_path=base.pin,
        adapter_paths=adapters,
        volumes=(cache_volume(service, settings, read_only=True), {"name": PINS_VOLUME, "emptyDir": {}}),
        mounts=(*model_mounts(cached), pins_mount),
        # Offline: if the cache were somehow incomplete, vLLM fails instead of pulling
        # hundreds of GB from the hub behind everyone's back.
        env=(("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1")),
    )


def compile_cache_ref(
    service: InferenceService, tier: TierPlan, image: str | None
) -> compile_cache.CompileCacheRef | None:
    """The tier's compile cache on the node cache, or None where the node keeps none
    (planner.startup.compile_cache_use says why in the plan's reasons)."""
    if image is None or not tier.feasible or not needs_node_volume(service):
        return None
    if not compile_cache_use(service.spec, tier.nodes_per_replica).kept:
        return None
    base = next(m for m in models(service) if m.role == "model")
    inputs = compile_cache.key_inputs(service, tier, image, base.key)
    return compile_cache.CompileCacheRef(base.key, compile_cache.config_key(inputs))


@dataclass(frozen=True)
class EngineHome:
    """The serving pod's writable home volume and where the engine's caches are in it
    (render.pod), which the compile cache is restored into and published from."""

    volume: str
    path: str
    cache_dir: str
    port: int = ENGINE_PORT

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{ENGINE_HEALTH_PATH}"


def compile_volumes(service: InferenceService, settings: OperatorSettings) -> list[dict[str, Any]]:
    """The namespace's claim once more, writable (only the hold sidecar mounts it, at its
    key), and the sidecar's pod-local state."""
    claim = {"claimName": claim_of(service, settings)}
    return [
        {"name": compile_cache.STORE_VOLUME, "persistentVolumeClaim": claim},
        {"name": compile_cache.STATE_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}},
    ]


def _restore_container(
    ref: compile_cache.CompileCacheRef, home: EngineHome, settings: OperatorSettings, small: dict[str, Any]
) -> dict[str, Any]:
    """Copies the node's compile cache for the pinned revision into the pod's own home
    (the pod's UID; the key read-only) and says whether there was one."""
    args = ["--pinned", f"{PINS_PATH}/model", "--store", compile_cache.STORE_MOUNT_PATH, "--key", ref.key]
    args += ["--into", home.cache_dir]
    for name in compile_cache.ENGINE_DIRS:
        args += ["--dir", name]
    return {
        "name": compile_cache.RESTORE_CONTAINER,
        "image": settings.operator_image,
        "command": ["inferfleet", "cache", "compile-restore"],
        "args": args,
        "volumeMounts": [
            {
                "name": CACHE_VOLUME,
                "mountPath": compile_cache.STORE_MOUNT_PATH,
                "subPath": ref.subpath,
                "readOnly": True,
            },
            {"name": PINS_VOLUME, "mountPath": PINS_PATH, "readOnly": True},
            {"name": home.volume, "mountPath": home.path},
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": _restricted(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _publishing(
    ref: compile_cache.CompileCacheRef, home: EngineHome
) -> tuple[list[str], list[dict[str, Any]]]:
    """The hold sidecar's extra arguments and mounts for publishing a first start."""
    args = ["--compile-store", compile_cache.STORE_MOUNT_PATH, "--compile-from", home.cache_dir]
    for name in compile_cache.ENGINE_DIRS:
        args += ["--compile-dir", name]
    args += ["--engine-url", home.health_url, "--state-dir", compile_cache.STATE_PATH]
    mounts: list[dict[str, Any]] = [
        {
            "name": compile_cache.STORE_VOLUME,
            "mountPath": compile_cache.STORE_MOUNT_PATH,
            "subPath": ref.subpath,
        },
        {"name": home.volume, "mountPath": home.path, "readOnly": True},
        {"name": compile_cache.STATE_VOLUME, "mountPath": compile_cache.STATE_PATH},
    ]
    return args, mounts


def _restricted(read_only_root: bool = True) -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": read_only_root,
        "capabilities": {"drop": ["ALL"]},
    }


def init_containers(
    service: InferenceService,
    tier: str,
    settings: OperatorSettings,
    compiled: tuple[compile_cache.CompileCacheRef, EngineHome] | None = None,
) -> list[dict[str, Any]]:
    """Verify-and-wait init containers, the compile cache's restore (`compiled`: the
    tier's key and the pod's engine home), then the pin sidecar, for a serving pod."""
    if not is_cached(service):
        return []
    cached = models(service)
    if cache_mode(service) == "pvc":
        fetcher = f"Job {job_name(service)}"
    else:
        fetcher = f"DaemonSet {daemonset_name(service.name, tier)}"
    hint = (
        f"fetched by {fetcher}; kubectl -n {service.namespace} describe {fetcher.replace(' ', '/').lower()}"
    )
    small = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    out: list[dict[str, Any]] = []
    pins_writable = {"name": PINS_VOLUME, "mountPath": PINS_PATH}
    for index, model in enumerate(cached):
        out.append(
            {
                "name": _bounded(VERIFY_CONTAINER if index == 0 else f"{VERIFY_CONTAINER}-{model.role}"),
                "image": settings.operator_image,
                "command": ["inferfleet", "cache", "verify"],
                "args": [
                    "--dest",
                    model.dest(),
                    "--revision",
                    model.revision,
                    "--wait-s",
                    str(VERIFY_WAIT_S),
                    "--hint",
                    hint,
                    "--pin",
                    model.pin,
                ],
                "volumeMounts": [*model_mounts([model]), pins_writable],
                "resources": small,
                "securityContext": _restricted(),
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        )
    hold_args: list[str] = []
    for model in cached:
        hold_args += ["--pinned", model.pin]
    hold: dict[str, Any] = {
        # A native sidecar (restartPolicy Always in initContainers): starts after the
        # verification, lives as long as the pod, and its shared lock is what tells
        # the node's garbage collector this revision is in use.
        "name": compile_cache.HOLD_CONTAINER,
        "image": settings.operator_image,
        "command": ["inferfleet", "cache", "hold"],
        "args": hold_args,
        "restartPolicy": "Always",
        "volumeMounts": [*model_mounts(cached), {**pins_writable, "readOnly": True}],
        "resources": small,
        "securityContext": _restricted(),
    }
    if compiled is not None:
        ref, home = compiled
        out.append(_restore_container(ref, home, settings, small))
        more_args, more_mounts = _publishing(ref, home)
        hold["args"] = [*hold_args, *more_args]
        hold["volumeMounts"] = [*hold["volumeMounts"], *more_mounts]
        # The fetcher's UID, which owns the namespace's tree: what it publishes is sealed
        # and out of reach of the pod's own UID, whose vLLM never mounts the key at all.
        hold["securityContext"] = _fetcher_security()
        # Ready once a first start's artifacts are published (or there was nothing to
        # publish), so the pod takes no request before they are.
        hold["readinessProbe"] = {
            "exec": {"command": ["test", "-e", f"{compile_cache.STATE_PATH}/{compile_cache.READY_FILE}"]},
            "periodSeconds": 2,
            "failureThreshold": 1,
        }
        hold["terminationMessagePolicy"] = "FallbackToLogsOnError"
    out.append(hold)
    return out


# --- pre-cache pods -------------------------------------------------------------------


def _credentials(service: InferenceService, model: CachedModel) -> tuple[list[Any], list[str], list[Any]]:
    """env, extra fetch args and volumes carrying the source credentials.

    Secrets reach the fetcher as files (a mounted Secret), never as environment values:
    the hub token as `--token-file`, object-store keys as `--credentials-dir` (one file
    per AWS_* key), a GCS service-account key through GOOGLE_APPLICATION_CREDENTIALS."""
    ref = service.spec.model.credentials_secret_ref
    env: list[dict[str, Any]] = [{"name": "HF_HOME", "value": "/tmp/hf-home"}]
    args: list[str] = []
    volumes: list[dict[str, Any]] = []
    if model.source.scheme == "pvc":
        env.append({"name": "INFERFLEET_PVC_ROOT", "value": SOURCES_ROOT})
    if ref is None:
        return env, args, volumes
    volumes.append({"name": CREDENTIALS_VOLUME, "secret": {"secretName": ref.name}})
    if model.source.scheme == "hf":
        args += ["--token-file", f"{CREDENTIALS_MOUNT}/{ref.key}"]
    elif model.source.scheme == "s3":
        # The secret's keys are the AWS variable names (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
        # optionally AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3).
        args += ["--credentials-dir", CREDENTIALS_MOUNT]
    elif model.source.scheme == "gs":
        env.append({"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{CREDENTIALS_MOUNT}/{ref.key}"})
    return env, args, volumes


def _source_claims(cached: list[CachedModel]) -> list[str]:
    return sorted({m.source.location for m in cached if m.source.scheme == "pvc"})


def _fetch_container(
    service: InferenceService,
    model: CachedModel,
    settings: OperatorSettings,
    *,
    hold: bool,
    budget: float | None,
    compile_key: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    env, credential_args, volumes = _credentials(service, model)
    args = ["--source", model.source.uri, "--dest", model.dest(), "--revision", model.revision]
    args += credential_args
    if budget is not None:
        args += ["--budget-gib", f"{budget:g}", "--node-root", CACHE_MOUNT_PATH]
    if compile_key is not None:
        # The tier's compile-cache key directory, made before the weights are fetched (so
        # it exists, owned by the fetcher, before a serving pod can mount it).
        args += ["--compile-key", compile_key]
    if hold:
        args += ["--hold", "--gc-interval-s", str(GC_INTERVAL_S)]
    mounts: list[dict[str, Any]] = [
        {"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH},
        {"name": TMP_VOLUME, "mountPath": "/tmp"},
    ]
    if model.source.scheme == "pvc":
        claim = model.source.location
        mounts.append(
            {"name": _claim_volume(claim), "mountPath": f"{SOURCES_ROOT}/{claim}", "readOnly": True}
        )
    if volumes:
        mounts.append({"name": CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_MOUNT, "readOnly": True})
    container: dict[str, Any] = {
        "name": _bounded(f"fetch-{model.role}"),
        "image": settings.operator_image,
        "command": ["inferfleet", "cache", "fetch"],
        "args": args,
        "env": env,
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # Non-root; writes only the cache directory the cache-owner container gave it.
        "securityContext": _fetcher_security(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if hold:
        container["readinessProbe"] = {
            "exec": {
                "command": [
                    "inferfleet",
                    "cache",
                    "verify",
                    "--dest",
                    model.dest(),
                    "--revision",
                    model.revision,
                ]
            },
            "periodSeconds": READINESS_PERIOD_S,
            "timeoutSeconds": 15,
            "failureThreshold": 1,
        }
    return container, volumes


def _claim_volume(claim: str) -> str:
    return _bounded(f"source-{claim}")


def _pod_volumes(
    service: InferenceService, settings: OperatorSettings, extra: list[dict[str, Any]]
) -> list[Any]:
    volumes: list[dict[str, Any]] = [cache_volume(service, settings), {"name": TMP_VOLUME, "emptyDir": {}}]
    for claim in _source_claims(models(service)):
        volumes.append(
            {"name": _claim_volume(claim), "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        )
    seen = {v["name"] for v in volumes}
    for volume in extra:
        if volume["name"] not in seen:
            volumes.append(volume)
            seen.add(volume["name"])
    return volumes


def _tier_placement(tier: TierSpec, settings: OperatorSettings) -> dict[str, Any]:
    """Exactly the nodes the tier's serving pods may use (catalog.placement): the same node
    selector, required node affinity (GPU type, spot, the tier's own) and tolerations, without
    the serving pods' pod (anti-)affinity. So a DaemonSet pod never lands on a CPU node or
    another GPU type, and every node a replica can be scheduled on gets the weights."""
    gpu = placement.tier_gpu(tier, settings.catalogs())
    return placement.tier_placement(tier, gpu).node_only().pod_fields()


# The fetcher runs as the operator image's own non-root user (hack/Dockerfile) with every
# capability dropped, no privilege escalation, a read-only root filesystem and the
# runtime's seccomp profile; files it writes are 0644/0755, readable by the serving pods'
# UID. The kubelet creates the namespace's tree (a hostPath PersistentVolume, see
# caching.precache.volumes) as root:root 0755 and applies no fsGroup to it, so one init container
# hands the tree to that user: root with CAP_CHOWN alone (no DAC override: it reads
# directories through their 0755 mode), `chown -h` (never follows a symlink), nothing else.
FETCHER_UID: Final = 65532
OWNER_CONTAINER: Final = "cache-owner"
POD_SECURITY: Final = {
    "seccompProfile": {"type": "RuntimeDefault"},
    "runAsUser": FETCHER_UID,
    "runAsGroup": FETCHER_UID,
    # Owns the emptyDir /tmp and the credentials volume; on a cache.mode pvc claim that
    # supports ownership management it makes the claim writable for the fetcher.
    "fsGroup": FETCHER_UID,
    "fsGroupChangePolicy": "OnRootMismatch",
}
CHECKOV_SKIPS: Final = {
    "checkov.io/skip1": "CKV_K8S_23=only the cache-owner init container runs as root, to chown the cache",
    "checkov.io/skip2": "CKV_K8S_40=only the cache-owner init container runs as UID 0, to chown the cache",
    "checkov.io/skip3": "CKV_K8S_8=a download runs for hours; read timeouts and retries catch a stalled one",
    "checkov.io/skip4": "CKV_K8S_25=the cache-owner init container adds CAP_CHOWN and nothing else",
}


def _fetcher_security() -> dict[str, Any]:
    return {**_restricted(), "runAsNonRoot": True, "runAsUser": FETCHER_UID, "runAsGroup": FETCHER_UID}


def _owner_container(settings: OperatorSettings) -> dict[str, Any]:
    """Root with CAP_CHOWN only: gives the node's cache directory to the fetcher's UID."""
    owner = f"{FETCHER_UID}:{FETCHER_UID}"
    return {
        "name": OWNER_CONTAINER,
        "image": settings.operator_image,
        "command": ["chown", "-R", "-h", owner, CACHE_MOUNT_PATH],
        "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": False,
            "runAsUser": 0,
            "runAsGroup": 0,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def daemonset(
    service: InferenceService,
    tier: TierSpec,
    settings: OperatorSettings,
    compiled: compile_cache.CompileCacheRef | None = None,
) -> dict[str, Any]:
    cached = models(service)
    containers: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    budget = budget_gib(service, settings)
    for model in cached:
        key = compiled.key if compiled is not None and model.role == "model" else None
        container, volumes = _fetch_container(
            service, model, settings, hold=True, budget=budget, compile_key=key
        )
        containers.append(container)
        extra += volumes
    selector = {
        labels.LABEL_SERVICE: service.name,
        labels.LABEL_TIER: tier.name,
        labels.LABEL_COMPONENT: COMPONENT_CACHE,
    }
    pod_labels = {**_labels(service, tier.name), LABEL_CACHE_REVISION: revision_label(service)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _metadata(
            service,
            daemonset_name(service.name, tier.name),
            tier.name,
            annotations={
                f"{labels.GROUP}/cache-models": json.dumps(
                    [f"{m.source.uri}@{m.revision}" for m in cached], separators=(",", ":")
                ),
                **CHECKOV_SKIPS,
            },
        ),
        "spec": {
            "selector": {"matchLabels": selector},
            # Pre-cache pods serve nothing: on a revision change every node fetches at once.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    **_tier_placement(tier, settings),
                    "automountServiceAccountToken": False,
                    "securityContext": dict(POD_SECURITY),
                    "terminationGracePeriodSeconds": 30,
                    "initContainers": [_owner_container(settings)],
                    "containers": containers,
                    "volumes": _pod_volumes(service, settings, extra),
                },
            },
        },
    }


def job_name(service: InferenceService) -> str:
    return _bounded(f"{service.name}-cache-{revision_label(service)[:10]}")


def job(service: InferenceService, settings: OperatorSettings) -> dict[str, Any]:
    """cache.mode pvc: fetch once into the shared claim."""
    cached = models(service)
    containers: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    for model in cached:
        container, volumes = _fetch_container(service, model, settings, hold=False, budget=None)
        containers.append(container)
        extra += volumes
    pod_labels = {**_labels(service, None), LABEL_CACHE_REVISION: revision_label(service)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(service, job_name(service), None, annotations=dict(CHECKOV_SKIPS)),
        "spec": {
            "backoffLimit": JOB_BACKOFF_LIMIT,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "securityContext": dict(POD_SECURITY),
                    "containers": containers,
                    "volumes": _pod_volumes(service, settings, extra),
                },
            },
        },
    }


def precache_objects(
    service: InferenceService,
    plan: Plan,
    settings: OperatorSettings,
    images: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Pre-cache objects of an InferenceService: a DaemonSet per feasible tier (nvme), one
    Job (pvc), nothing when caching is off or the weights are already a local path.
    `images`: each tier's vLLM image (part of its compile-cache key)."""
    if not is_cached(service):
        return []
    if cache_mode(service) == "pvc":
        return [job(service, settings)]
    tiers = {tier.name: tier for tier in service.spec.tiers}
    found = dict(images or {})
    return [
        daemonset(service, tiers[t.name], settings, compile_cache_ref(service, t, found.get(t.name)))
        for t in plan.feasible_tiers
        if t.name in tiers
    ]
