"""The engine's compile caches on the node cache: keys, layout, and what pods say. Pure.

Once the weights are local a start waits mostly for the engine: torch.compile, Triton's
kernels, CUDA graphs. vLLM keeps what it compiles under `VLLM_CACHE_ROOT`
(`torch_compile_cache/<hash>/rank_<r>_<dp>/`, Inductor's and, before 0.31, Triton's
caches inside it) and `TRITON_CACHE_DIR` (kept where the caller sets it from 0.31 on);
the release table (`compileCache`) records both per release. The serving pod points both
at its own emptyDir (render.pod: `$HOME/.cache/vllm`, `$HOME/.cache/triton`), and the
node cache keeps a copy per key:

    <namespace's tree>/compile/<model-dir>/<config-key>/
        .lock                       flock: one publisher (or garbage collector) at a time
        <revision-id>/              complete and sealed read-only, published once
            .inferfleet/compile.json  the marker: every file with its size
            vllm/..., triton/...
        .partial/<revision-id>.<n>  a copy being published (never looks complete)
        .trash/                     entries being deleted

- `<model-dir>` is the weights' own directory name (source and credentials Secret), so a
  compile cache is only ever next to, and collected with, the weights it was built from.
- `<config-key>` is a digest of everything that changes what the engine compiles: the
  image (and the release it runs), the GPU type, TP/PP, dtype, quantization, KV-cache
  dtype, max model len, max num seqs and batched tokens, block size, enforce-eager,
  prefix caching, chunked prefill, the host KV tier, speculative decoding, the LoRA
  adapters, serving.extraArgs and serving.env (values, or the Secret/ConfigMap
  reference, never a secret's value), with a readable prefix (`h100-sxm-80gb-tp4pp1-
  v0.33.0-<digest>`). vLLM hashes its own factors under it too, but its hash covers the
  model *path*, which is the pod's pin link (`/run/inferfleet/pinned/model`), the same
  for every revision; hence the next level.
- `<revision-id>` is the weights revision the pod's verify container pinned (a hub
  commit, or a label plus listing digest): a new revision never reuses an old one's
  artifacts.

Who touches it: the pre-cache DaemonSet creates the tier's key directory (its fetcher
owns the tree); a serving pod's `compile-cache` init container (the pod's own UID, the
key mounted read-only) copies `<revision-id>/` into the pod's emptyDir before vLLM
starts and says in its termination message whether it found one (warm) or not (first);
after a first start the pod's `cache-hold` sidecar (the fetcher's UID, the only mount of
the key that can write) waits for vLLM's /health, copies what vLLM wrote into
`.partial/`, seals it and renames it in, and only then reports ready, so the pod takes no
traffic before the artifacts are published. The vLLM container never mounts the key. A
failed publish leaves the key cold: the sidecar exits once saying why (its restart count
is the operator's signal), then holds as before.

A node "has" a tier's compile cache when a serving pod of the tier's current key either
restored it there or published it there (a first start that turned Ready with its
sidecar never restarted), after the node's pre-cache pod became Ready (so the revision
it pinned is the one that node serves) and while that same pre-cache pod stays Ready.
Only when every eligible node has it do the front door's hold and the autoscaler's lead
time count on the warm start (design.derive); status keeps the evidence
(`status.cache[].compileNodes`), so a tier scaled to zero remembers it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Final

from inferfleet.api import InferenceService, TierPlan

COMPILE_DIR: Final = "compile"
COMPILE_MARKER: Final = ".inferfleet/compile.json"
# The serving pod's containers and mounts.
RESTORE_CONTAINER: Final = "compile-cache"
HOLD_CONTAINER: Final = "cache-hold"
VERIFY_CONTAINER: Final = "cache-verify"
STORE_MOUNT_PATH: Final = "/var/cache/inferfleet-compile"
STORE_VOLUME: Final = "compile-cache"
STATE_VOLUME: Final = "compile-state"
STATE_PATH: Final = "/run/inferfleet/compile-state"
READY_FILE: Final = "done"
# The subdirectories of the engine's cache home the node keeps (render.pod points
# VLLM_CACHE_ROOT and TRITON_CACHE_DIR at them).
ENGINE_DIRS: Final = ("vllm", "triton")
# At most this many nodes' evidence is kept in status; a tier with more eligible nodes is
# never counted warm (the safe side), and status stays far below its size bound.
MAX_EVIDENCE_NODES: Final = 100
_KEY_PREFIX_CHARS: Final = 60
_UNSAFE = re.compile(r"[^a-z0-9.]+")


@dataclass(frozen=True)
class CompileKeyInputs:
    """Everything that changes what the engine compiles (see the module docstring)."""

    model_dir: str
    image: str
    release: str
    gpu: str
    tensor_parallel: int
    pipeline_parallel: int
    dtype: str
    quantization: str
    kv_cache_dtype: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    enforce_eager: bool
    prefix_caching: bool
    chunked_prefill: bool
    gpu_memory_utilization: float
    host_kv_cache_gib: float
    speculative: str
    adapters: tuple[tuple[str, str, int], ...]
    max_loras: int | None
    extra_args: tuple[str, ...]
    env: tuple[str, ...]


def key_inputs(service: InferenceService, tier: TierPlan, image: str, model_dir: str) -> CompileKeyInputs:
    """The key's inputs for one tier of a service, from its plan, image and spec."""
    spec = service.spec
    serving = spec.serving
    speculative = serving.speculative_decoding if serving is not None else None
    return CompileKeyInputs(
        model_dir=model_dir,
        image=image,
        release=tier.vllm_release,
        gpu=tier.gpu,
        tensor_parallel=tier.tensor_parallel_size,
        pipeline_parallel=tier.pipeline_parallel_size,
        dtype=tier.dtype,
        quantization=tier.quantization,
        kv_cache_dtype=tier.kv_cache_dtype,
        max_model_len=tier.max_model_len,
        max_num_seqs=tier.max_num_seqs,
        max_num_batched_tokens=tier.max_num_batched_tokens,
        block_size=tier.block_size,
        enforce_eager=tier.enforce_eager,
        prefix_caching=tier.prefix_caching and (serving is None or serving.prefix_caching),
        chunked_prefill=tier.chunked_prefill and (serving is None or serving.chunked_prefill),
        gpu_memory_utilization=tier.gpu_memory_utilization,
        host_kv_cache_gib=tier.host_kv_cache_gi_b,
        speculative=json.dumps(speculative.to_wire(), sort_keys=True) if speculative is not None else "",
        adapters=tuple((a.name, a.source, a.rank) for a in spec.model.adapters or []),
        max_loras=spec.model.max_simultaneous_adapters,
        extra_args=tuple((serving.extra_args if serving is not None else None) or []),
        env=tuple(
            json.dumps(entry.to_wire(), sort_keys=True)
            for entry in (serving.env if serving is not None else None) or []
        ),
    )


def config_key(inputs: CompileKeyInputs) -> str:
    """One directory name per distinct input record: a readable prefix (GPU, layout,
    release) and 16 hex digits of SHA-256 over all of them."""
    digest = hashlib.sha256(json.dumps(asdict(inputs), sort_keys=True).encode()).hexdigest()[:16]
    gpu = _UNSAFE.sub("-", inputs.gpu.lower()).strip("-.") or "gpu"
    release = _UNSAFE.sub("-", inputs.release.lower()).strip("-.") or "unknown"
    prefix = f"{gpu}-tp{inputs.tensor_parallel}pp{inputs.pipeline_parallel}-v{release}"
    return f"{prefix[:_KEY_PREFIX_CHARS].rstrip('-.')}-{digest}"


@dataclass(frozen=True)
class CompileCacheRef:
    """One tier's compile cache in the namespace's tree: the weights' directory and the key."""

    model_dir: str
    config_key: str

    @property
    def key(self) -> str:
        """`<model-dir>/<config-key>`, what a pod's restore reports and status records."""
        return f"{self.model_dir}/{self.config_key}"

    @property
    def subpath(self) -> str:
        """Below the namespace's tree: what a serving pod mounts (subPath)."""
        return f"{COMPILE_DIR}/{self.key}"


# --- what pods say --------------------------------------------------------------------


@dataclass(frozen=True)
class Restore:
    """A serving pod's compile-cache container's one-line JSON result."""

    warm: bool
    key: str
    revision: str
    size_bytes: int


def encode_restore(restore: Restore) -> str:
    return json.dumps(
        {
            "compileCache": "warm" if restore.warm else "first",
            "key": restore.key,
            "revision": restore.revision,
            "bytes": restore.size_bytes,
        },
        separators=(",", ":"),
    )


def _terminated(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for entry in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            terminated = (entry.get("state") or {}).get("terminated")
            return terminated if isinstance(terminated, Mapping) else None
    return None


def restore_of(pod: Mapping[str, Any]) -> Restore | None:
    """What the pod's compile-cache container said, or None (no such container, not done,
    failed, or a message that is not one: a pod's own message is hostile input that can
    only mislabel its own service's measurements)."""
    terminated = _terminated(pod, RESTORE_CONTAINER)
    if terminated is None or terminated.get("exitCode") != 0:
        return None
    message = terminated.get("message")
    if not isinstance(message, str) or len(message) > 4096:
        return None
    try:
        parsed = json.loads(message.strip().splitlines()[-1]) if message.strip() else None
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    state, key, revision, size = (parsed.get(k) for k in ("compileCache", "key", "revision", "bytes"))
    if state not in ("warm", "first") or not isinstance(key, str) or not isinstance(revision, str):
        return None
    if (
        not isinstance(size, int)
        or isinstance(size, bool)
        or size < 0
        or len(key) > 400
        or len(revision) > 200
    ):
        return None
    return Restore(state == "warm", key, revision, size)


def started_warm(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's engine started from its node's compile cache."""
    found = restore_of(pod)
    return found is not None and found.warm


def restore_started_at(pod: Mapping[str, Any]) -> str | None:
    """When the pod's compile-cache container started (the start of a warm start's work)."""
    terminated = _terminated(pod, RESTORE_CONTAINER)
    value = terminated.get("startedAt") if terminated is not None else None
    return value if isinstance(value, str) else None


# --- which nodes have a tier's compile cache --------------------------------------------


@dataclass(frozen=True)
class NodeEvidence:
    """A node showed the key's compile cache: a serving pod whose verify container started
    at `since` restored or published it there."""

    node: str
    since: str


@dataclass(frozen=True)
class TierCompileState:
    """One tier's compile cache across its nodes."""

    key: str
    nodes: tuple[NodeEvidence, ...]
    eligible: int

    @property
    def warm(self) -> bool:
        """Every eligible node has shown it (and there are some, and not too many to track)."""
        return 0 < self.eligible <= MAX_EVIDENCE_NODES and len(self.nodes) >= self.eligible


def rfc3339_s(value: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as Kubernetes and the restore step
    write it (fractions and offsets allowed); None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _ready_since(pod: Mapping[str, Any]) -> float | None:
    """When a pod last turned Ready, if it is Ready now."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return (
                rfc3339_s(condition.get("lastTransitionTime")) if condition.get("status") == "True" else None
            )
    return None


def _holds_since(cache_pod: Mapping[str, Any] | None, since: float | None) -> bool:
    """Whether the node's pre-cache pod existed and was Ready before `since` and still is:
    the revision a serving pod pinned then is the one this node serves now."""
    if cache_pod is None or since is None:
        return False
    ready = _ready_since(cache_pod)
    created = rfc3339_s((cache_pod.get("metadata") or {}).get("creationTimestamp"))
    return ready is not None and ready <= since and (created is None or created <= since)


def _verify_started(pod: Mapping[str, Any]) -> str | None:
    terminated = _terminated(pod, VERIFY_CONTAINER)
    value = terminated.get("startedAt") if terminated is not None else None
    return value if isinstance(value, str) else None


def _published(pod: Mapping[str, Any]) -> bool:
    """A first start that published: the pod turned Ready (its hold sidecar reports ready
    only after publishing) and the sidecar never restarted (it exits once on a failure)."""
    if _ready_since(pod) is None:
        return False
    for entry in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if isinstance(entry, Mapping) and entry.get("name") == HOLD_CONTAINER:
            return int(entry.get("restartCount") or 0) == 0 and bool(entry.get("ready"))
    return False


def _node(pod: Mapping[str, Any]) -> str | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return node if isinstance(node, str) and node else None


def observe(
    key: str,
    previous: Sequence[Mapping[str, Any]],
    cache_pods: Sequence[Mapping[str, Any]],
    serving_pods: Sequence[Mapping[str, Any]],
    eligible: int,
) -> TierCompileState:
    """The nodes that have shown `key`'s compile cache: evidence status kept (`previous`,
    `status.cache[].compileNodes` for this key) and what the tier's serving pods say now,
    each still standing only while the node's pre-cache pod (of the current revision) that
    was Ready before it stays Ready."""
    by_node = {node: pod for pod in cache_pods if (node := _node(pod)) is not None}
    found: dict[str, NodeEvidence] = {}

    def admit(node: str | None, since: str | None) -> None:
        if node is None or since is None or not _holds_since(by_node.get(node), rfc3339_s(since)):
            return
        kept = found.get(node)
        if kept is None or (rfc3339_s(kept.since) or 0.0) < (rfc3339_s(since) or 0.0):
            found[node] = NodeEvidence(node, since)

    for entry in previous:
        node, since = entry.get("node"), entry.get("since")
        admit(node if isinstance(node, str) else None, since if isinstance(since, str) else None)
    for pod in serving_pods:
        restore = restore_of(pod)
        if restore is None or restore.key != key or not (restore.warm or _published(pod)):
            continue
        admit(_node(pod), _verify_started(pod))
    nodes = tuple(sorted(found.values(), key=lambda e: e.node))
    if len(nodes) > MAX_EVIDENCE_NODES:
        nodes = ()
    return TierCompileState(key, nodes, eligible)
