"""The engine's compile caches on the node cache (pure): keys, the serving pods' mounts and
env per release, what pods say, which nodes have a key, and garbage collection."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferfleet import render as render_module
from inferfleet.api import InferenceService
from inferfleet.caching.precache import coldstart, compile_cache
from inferfleet.caching.precache import workloads as objects
from inferfleet.caching.precache.gc import CachedRevision, plan_gc
from inferfleet.catalog.vllm_releases import release_facts
from inferfleet.planner import MeasuredColdStart
from tests.toolkit.design import designed
from tests.unit.precache.test_workloads_readiness import SETTINGS, service
from tests.unit.render.validation import validate

BASE = compile_cache.CompileKeyInputs(
    model_dir="hf--meta-llama--Llama-3.1-8B-Instruct--cred-hf-token",
    image="vllm/vllm-openai:v0.33.0",
    release="0.33.0",
    gpu="H100-SXM-80GB",
    tensor_parallel=1,
    pipeline_parallel=1,
    dtype="auto",
    quantization="none",
    kv_cache_dtype="auto",
    max_model_len=8192,
    max_num_seqs=64,
    max_num_batched_tokens=2048,
    block_size=16,
    enforce_eager=False,
    prefix_caching=True,
    chunked_prefill=True,
    gpu_memory_utilization=0.9,
    host_kv_cache_gib=0.0,
    speculative="",
    adapters=(),
    max_loras=None,
    extra_args=(),
    env=(),
)
KEY = re.compile(r"^[a-z0-9][a-z0-9.-]*-[0-9a-f]{16}$")


def _other(value: Any) -> st.SearchStrategy[Any]:
    """Any value of the field's type but the base's."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, int):
        return st.integers(0, 2**20).filter(lambda v: v != value)
    if isinstance(value, float):
        return st.floats(0, 1e4, allow_nan=False).filter(lambda v: v != value)
    if isinstance(value, str):
        return st.text(min_size=0, max_size=40).filter(lambda v: v != value)
    if value is None:
        return st.integers(1, 64)
    return st.lists(st.text(max_size=12), min_size=1, max_size=3).map(tuple)


FIELDS = [field.name for field in dataclasses.fields(compile_cache.CompileKeyInputs)]


@st.composite
def changed(draw: st.DrawFn) -> tuple[str, compile_cache.CompileKeyInputs]:
    """The base with one or more fields changed: (the first field changed, the record)."""
    names = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4, unique=True))
    updates: dict[str, Any] = {}
    for name in names:
        base = getattr(BASE, name)
        value = draw(_other(base)) if name != "adapters" else draw(st.just((("a", "hf://x/y", 8),)))
        updates[name] = value
    return names[0], dataclasses.replace(BASE, **updates)


@given(changed())
def test_a_key_is_never_shared_across_an_invalidating_change(case: tuple[str, Any]) -> None:
    """Every input the key takes changes the key: TP, the image, the GPU, each engine flag,
    extraArgs, env, the weights' directory..., one at a time or together."""
    field, inputs = case
    assert compile_cache.config_key(inputs) != compile_cache.config_key(BASE), field
    assert KEY.match(compile_cache.config_key(inputs)), compile_cache.config_key(inputs)
    assert len(compile_cache.config_key(inputs)) <= 80


def test_a_key_is_stable_and_readable() -> None:
    key = compile_cache.config_key(BASE)
    assert key == compile_cache.config_key(dataclasses.replace(BASE))
    assert key.startswith("h100-sxm-80gb-tp1pp1-v0.33.0-")


def _pod(objs: list[dict[str, Any]], tier: str) -> dict[str, Any]:
    workload = next(
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith(f"-{tier}")
    )
    pod: dict[str, Any] = workload["spec"]["template"]["spec"]
    return pod


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def _rendered(svc: InferenceService) -> list[dict[str, Any]]:
    return render_module.render(designed(svc, SETTINGS))


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.33.0"])
def test_serving_pods_mount_only_their_own_key_and_the_engine_writes_only_its_home(image: str) -> None:
    svc = service(serving={"image": image})
    objs = _rendered(svc)
    pod = _pod(objs, "l4")
    validate(next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-l4")))
    containers = _containers(pod)
    ref = objects.compile_cache_ref(svc, designed(svc, SETTINGS).plan.tier("l4"), image)  # type: ignore[union-attr]
    assert ref is not None and ref.subpath == f"compile/{ref.model_dir}/{ref.config_key}"
    # Per release: where the engine puts its caches is inside what is restored and published.
    # 0.11 points TRITON_CACHE_DIR into vLLM's compile directory itself, 0.31+ keeps ours.
    facts = release_facts(image.rsplit("v", 1)[1])
    assert facts is not None and facts.torch_compile_cache
    assert facts.keeps_caller_triton_dir is image.endswith("0.33.0")
    env = {e["name"]: e.get("value") for e in containers["vllm"]["env"]}
    assert env["VLLM_CACHE_ROOT"] == "/home/vllm/.cache/vllm"
    assert env["TRITON_CACHE_DIR"] == "/home/vllm/.cache/triton"
    assert compile_cache.ENGINE_DIRS == ("vllm", "triton")
    restore = containers[compile_cache.RESTORE_CONTAINER]
    hold = containers[compile_cache.HOLD_CONTAINER]
    assert restore["args"][restore["args"].index("--into") + 1] == "/home/vllm/.cache"
    assert hold["args"][hold["args"].index("--compile-from") + 1] == "/home/vllm/.cache"
    # Mounts of the node cache: the vLLM container sees its weights (read-only) only.
    claim = objects.claim_of(svc, SETTINGS)
    volumes = {v["name"]: v for v in pod["volumes"]}
    claimed = {
        name for name, v in volumes.items() if v.get("persistentVolumeClaim", {}).get("claimName") == claim
    }
    assert claimed == {objects.CACHE_VOLUME, compile_cache.STORE_VOLUME}
    assert volumes[objects.CACHE_VOLUME]["persistentVolumeClaim"]["readOnly"] is True
    for name, container in containers.items():
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in claimed:
                continue
            sub = mount.get("subPath", "")
            if sub.startswith("compile/"):
                assert sub == ref.subpath, (name, sub)  # its own key, nothing above it
                assert name in (compile_cache.RESTORE_CONTAINER, compile_cache.HOLD_CONTAINER), name
                writable = not mount.get("readOnly")
                assert writable == (name == compile_cache.HOLD_CONTAINER), (name, mount)
            else:
                assert mount.get("readOnly") is True and "/" not in sub and sub, (name, mount)
    # Only the hold sidecar writes the key, as the tree's owner; the restore runs as the pod.
    assert hold["securityContext"]["runAsUser"] == objects.FETCHER_UID
    assert "runAsUser" not in restore["securityContext"]
    assert hold["readinessProbe"]["exec"]["command"][-1].endswith(f"/{compile_cache.READY_FILE}")
    names = [c["name"] for c in pod["initContainers"]]
    assert names.index(compile_cache.VERIFY_CONTAINER) < names.index(compile_cache.RESTORE_CONTAINER)
    assert names.index(compile_cache.RESTORE_CONTAINER) < names.index(compile_cache.HOLD_CONTAINER)
    # The pre-cache DaemonSet makes that key's directory.
    daemonset = next(
        o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("-l4-cache")
    )
    args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--compile-key") + 1] == ref.key


def test_each_release_and_tier_has_its_own_key() -> None:
    keys = set()
    for image in ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.33.0"):
        svc = service(serving={"image": image})
        plan = designed(svc, SETTINGS).plan
        assert plan is not None
        for tier in plan.feasible_tiers:
            ref = objects.compile_cache_ref(svc, tier, image)
            assert ref is not None
            keys.add(ref.key)
    assert len(keys) == 4  # two releases × two tiers (L4, A100)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"cache": {"mode": "pvc", "pvcName": "weights"}}, "cache.mode pvc"),
        ({"cache": {"mode": "none"}}, "cache.mode none"),
        (
            {"serving": {"env": [{"name": "VLLM_CACHE_ROOT", "value": "/tmp/x"}]}},
            "serving.env sets VLLM_CACHE_ROOT",
        ),
    ],
)
def test_no_compile_cache_where_the_node_keeps_none_and_the_plan_says_why(
    changes: dict[str, Any], why: str
) -> None:
    svc = service(**changes)
    design = designed(svc, SETTINGS)
    assert design.plan is not None
    tier = design.plan.tier("l4")
    assert objects.compile_cache_ref(svc, tier, "vllm/vllm-openai:v0.33.0") is None
    assert tier.warm_start_seconds is None
    assert any(r.startswith("warm start ~n/a") and why in r for r in tier.reasons), tier.reasons
    pod = _pod(_rendered(svc), "l4")
    assert compile_cache.RESTORE_CONTAINER not in _containers(pod)


# --- what pods say -------------------------------------------------------------------------


def _restore_status(message: str, exit_code: int = 0) -> dict[str, Any]:
    return {
        "name": compile_cache.RESTORE_CONTAINER,
        "state": {
            "terminated": {"exitCode": exit_code, "message": message, "startedAt": "2026-01-01T00:00:00Z"}
        },
    }


def test_a_pods_restore_message_is_read_as_hostile_input() -> None:
    good = compile_cache.encode_restore(compile_cache.Restore(True, "m/k", "abc", 10))
    assert compile_cache.restore_of({"status": {"initContainerStatuses": [_restore_status(good)]}}) == (
        compile_cache.Restore(True, "m/k", "abc", 10)
    )
    for message, code in [
        (good, 1),
        ("not json", 0),
        ('{"compileCache": "warm", "key": 1, "revision": "a", "bytes": 1}', 0),
        ('{"compileCache": "hot", "key": "m/k", "revision": "a", "bytes": 1}', 0),
        ('{"compileCache": "warm", "key": "m/k", "revision": "a", "bytes": -1}', 0),
        ('{"compileCache": "warm", "key": "m/k", "revision": "a", "bytes": true}', 0),
        ("x" * 5000, 0),
        ("[]", 0),
    ]:
        pod = {"status": {"initContainerStatuses": [_restore_status(message, code)]}}
        assert compile_cache.restore_of(pod) is None, message[:60]
        assert not compile_cache.started_warm(pod)


def _serving(
    tier: str,
    warm: bool | None,
    *,
    restored: str,
    started: str,
    ready: str | None,
    node: str = "n1",
    key: str = "m/k",
    verify: str = "2026-01-01T00:00:00Z",
    hold_restarts: int = 0,
) -> dict[str, Any]:
    init: list[dict[str, Any]] = [
        {
            "name": compile_cache.VERIFY_CONTAINER,
            "state": {"terminated": {"exitCode": 0, "startedAt": verify}},
        },
        {
            "name": compile_cache.HOLD_CONTAINER,
            "ready": ready is not None,
            "restartCount": hold_restarts,
            "state": {"running": {"startedAt": restored}},
        },
    ]
    if warm is not None:
        message = compile_cache.encode_restore(compile_cache.Restore(warm, key, "rev", 5))
        status = _restore_status(message)
        status["state"]["terminated"]["startedAt"] = restored
        init.append(status)
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready}] if ready else []
    return {
        "metadata": {"labels": {"inferfleet.dev/tier": tier}},
        "spec": {"nodeName": node},
        "status": {
            "conditions": conditions,
            "initContainerStatuses": init,
            "containerStatuses": [
                {"name": "vllm", "restartCount": 0, "state": {"running": {"startedAt": started}}}
            ],
        },
    }


def test_measured_starts_are_classified_warm_or_first_and_a_warm_one_counts_its_restore() -> None:
    pods = [
        # First starts: 61 s (its restore, finding nothing, began 1 s before vLLM) and 70 s.
        _serving(
            "l4",
            False,
            restored="2026-01-01T00:00:59Z",
            started="2026-01-01T00:01:00Z",
            ready="2026-01-01T00:02:00Z",
        ),
        _serving(
            "l4",
            False,
            restored="2026-01-01T00:10:00Z",
            started="2026-01-01T00:10:00Z",
            ready="2026-01-01T00:11:10Z",
        ),
        # Warm: the restore began 5 s before vLLM, and vLLM was Ready 40 s later: 45 s.
        _serving(
            "l4",
            True,
            restored="2026-01-01T00:20:00Z",
            started="2026-01-01T00:20:05Z",
            ready="2026-01-01T00:20:45Z",
        ),
        # No compile-cache container at all (a tier the node keeps none for): a first start.
        _serving(
            "a100",
            None,
            restored="2026-01-01T00:00:00Z",
            started="2026-01-01T00:00:00Z",
            ready="2026-01-01T00:01:30Z",
        ),
    ]
    found = coldstart.classified_cold_starts(pods, container="vllm", tier_label="inferfleet.dev/tier")
    assert found.first == {"a100": MeasuredColdStart(90.0, 1), "l4": MeasuredColdStart(65.5, 2)}
    assert found.warm == {"l4": MeasuredColdStart(45.0, 1)}
    assert (
        coldstart.measured_cold_starts(pods, container="vllm", tier_label="inferfleet.dev/tier")
        == found.first
    )


# --- which nodes have a key ------------------------------------------------------------------


def _cache_pod(node: str, ready: str | None, created: str = "2025-12-31T00:00:00Z") -> dict[str, Any]:
    conditions = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready or created}
    ]
    return {
        "metadata": {"creationTimestamp": created},
        "spec": {"nodeName": node},
        "status": {"conditions": conditions},
    }


def test_a_node_has_the_key_once_a_pod_restored_or_published_it_after_its_precache_pod_was_ready() -> None:
    t0, later = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"
    cache = [_cache_pod("n1", t0), _cache_pod("n2", t0), _cache_pod("n3", later)]
    pods = [
        # n1: a warm restore.
        _serving("l4", True, restored=later, started=later, ready=None, node="n1", verify=later),
        # n2: a first start that published (Ready, sidecar never restarted).
        _serving("l4", False, restored=later, started=later, ready=later, node="n2", verify=later),
        # n3: its pre-cache pod turned Ready after the pod verified: the pin may be another revision.
        _serving(
            "l4", True, restored=later, started=later, ready=later, node="n3", verify="2026-01-01T00:30:00Z"
        ),
        # n4: no pre-cache pod there (the node is not eligible, or it is gone).
        _serving("l4", True, restored=later, started=later, ready=later, node="n4", verify=later),
    ]
    state = compile_cache.observe("m/k", [], cache, pods, eligible=3)
    assert [e.node for e in state.nodes] == ["n1", "n2"] and not state.warm
    # A first start whose publish failed (sidecar restarted) or that is not Ready proves nothing.
    failed = _serving(
        "l4", False, restored=later, started=later, ready=later, node="n3", verify=later, hold_restarts=1
    )
    pending = _serving("l4", False, restored=later, started=later, ready=None, node="n3", verify=later)
    assert compile_cache.observe("m/k", [], cache, [failed, pending], 3).nodes == ()
    # Another key (flags changed) is not this one.
    other = _serving(
        "l4", True, restored=later, started=later, ready=None, node="n3", verify=later, key="m/other"
    )
    assert compile_cache.observe("m/k", [], cache, [other], 3).nodes == ()
    # Evidence kept in status stands while the pre-cache pod that was Ready before it still is:
    # with n3 shown too, every eligible node has it; the pods may be gone (scaled to zero).
    kept = [{"node": e.node, "since": e.since} for e in state.nodes] + [
        {"node": "n3", "since": "2026-01-01T02:00:00Z"}
    ]
    again = compile_cache.observe("m/k", kept, cache, [], eligible=3)
    assert again.warm and len(again.nodes) == 3
    # n2's pre-cache pod restarted (a new pod, or its container: Ready again later): n2's
    # revision may have moved, so its evidence goes, and the tier is no longer warm.
    replaced = [cache[0], _cache_pod("n2", "2026-01-01T03:00:00Z", created="2026-01-01T02:59:00Z"), cache[2]]
    after = compile_cache.observe("m/k", kept, replaced, [], eligible=3)
    assert [e.node for e in after.nodes] == ["n1", "n3"] and not after.warm
    # A node joined: 4 eligible, 3 shown.
    assert not compile_cache.observe("m/k", kept, cache, [], eligible=4).warm
    assert not compile_cache.observe("m/k", [], [], [], eligible=0).warm


# --- garbage collection ------------------------------------------------------------------------


def _compiled(model: str, revision: str, size: int, used: float, in_use: bool = False) -> CachedRevision:
    return CachedRevision(f"compile/{model}/key", revision, size, used, in_use, of_revision=(model, revision))


def test_gc_takes_compile_caches_with_their_revision_and_orphans_whatever_the_budget() -> None:
    found = [
        CachedRevision("m", "old", 100, last_used_s=1),
        _compiled("m", "old", 10, used=50),
        CachedRevision("m", "new", 100, last_used_s=100),
        _compiled("m", "new", 10, used=100, in_use=True),
        _compiled("m", "gone", 7, used=500),  # its weights are no longer on the node
    ]
    roomy = plan_gc(found, budget_bytes=10_000)
    assert [v.revision_id for v in roomy.evict] == ["gone"]
    tight = plan_gc(found, budget_bytes=150)
    assert [(v.model_key, v.revision_id) for v in tight.evict] == [
        ("compile/m/key", "gone"),
        ("m", "old"),
        ("compile/m/key", "old"),
    ]
    assert tight.used_bytes_after == 110
    # A compile cache can go before its weights (least recently used first); never one in use.
    lru = plan_gc(found, budget_bytes=210, protect=frozenset({("m", "old")}))
    assert [(v.model_key, v.revision_id) for v in lru.evict] == [
        ("compile/m/key", "gone"),
        ("compile/m/key", "old"),
    ]
    assert all(not (v.in_use) for v in plan_gc(found, 0).evict)


entries = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]), st.sampled_from(["r1", "r2", "r3"]), st.integers(0, 100), st.booleans()
    ),
    max_size=8,
    unique_by=lambda e: (e[0], e[1]),
)


@given(entries, entries, st.integers(0, 500))
def test_gc_never_keeps_a_compile_cache_whose_revision_it_evicts(
    weights: list[tuple[str, str, int, bool]], compiled: list[tuple[str, str, int, bool]], budget: int
) -> None:
    found = [CachedRevision(m, r, size, last_used_s=size, in_use=use) for m, r, size, use in weights]
    found += [_compiled(m, r, size, used=size, in_use=use) for m, r, size, use in compiled]
    plan = plan_gc(found, budget)
    gone = {v.key for v in plan.evict if not v.is_compile_cache}
    live = {(m, r) for m, r, _s, _u in weights}
    for entry in found:
        if entry.of_revision is None or entry.in_use:
            continue
        if entry.of_revision in gone or entry.of_revision not in live:
            assert entry in plan.evict, entry
    assert all(not v.in_use for v in plan.evict)
    assert plan.used_bytes_after == plan.used_bytes_before - sum(v.size_bytes for v in plan.evict)


def test_status_evidence_round_trips() -> None:
    evidence = compile_cache.NodeEvidence("n1", "2026-01-01T00:00:00Z")
    assert json.loads(json.dumps(dataclasses.asdict(evidence))) == {
        "node": "n1",
        "since": "2026-01-01T00:00:00Z",
    }
