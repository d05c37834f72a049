"""Pre-cache DaemonSet/Job, serving-pod pieces and CacheReady (pure builders)."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import InferenceService, load_all
from inferfleet.caching.precache import readiness
from inferfleet.caching.precache import workloads as objects
from inferfleet.config import OperatorSettings
from inferfleet.planner import plan_service
from tests.conftest import EXAMPLES_DIR
from tests.unit.render.validation import validate

SETTINGS = OperatorSettings()


def service(**changes: Any) -> InferenceService:
    text = (EXAMPLES_DIR / "llama-8b-chat.yaml").read_text()
    base = load_all(text, source="example")[0]
    body = base.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["metadata"]["uid"] = "uid-1"
    for path, value in changes.items():
        node = body["spec"]
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return load_all(__import__("yaml").safe_dump(body), source="test")[0]


def test_one_daemonset_per_feasible_tier_restricted_to_the_tier() -> None:
    svc = service()
    plan = plan_service(svc)
    found = objects.precache_objects(svc, plan, SETTINGS)
    assert [o["kind"] for o in found] == ["DaemonSet"] * len(plan.feasible_tiers)
    for obj in found:
        validate(obj)
    l4 = next(o for o in found if o["metadata"]["name"] == "llama-8b-chat-l4-cache")
    pod = l4["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    args = container["args"]
    # The model's directory carries the Secret it is read with (hf-token).
    dest = "/var/cache/inferfleet/hf--meta-llama--Llama-3.1-8B-Instruct--cred-hf-token"
    assert args[:6] == [
        "--source",
        "hf://meta-llama/Llama-3.1-8B-Instruct",
        "--dest",
        dest,
        "--revision",
        "main",
    ]
    assert (
        "--hold" in args and args[args.index("--budget-gib") + 1] == f"{objects.budget_gib(svc, SETTINGS):g}"
    )
    # The token is a mounted file of the user's Secret, never a literal or an env value.
    assert args[args.index("--token-file") + 1] == "/var/run/secrets/inferfleet/source/token"
    assert {"name": "source-credentials", "secret": {"secretName": "hf-token"}} in pod["volumes"]
    assert all("valueFrom" not in e for e in container["env"])
    assert container["readinessProbe"]["exec"]["command"][:3] == ["inferfleet", "cache", "verify"]
    # The node cache only through the namespace's claim: no hostPath in a tenant's pod.
    assert pod["volumes"][0] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "inferfleet-node-cache"},
    }
    assert not any("hostPath" in volume for volume in pod["volumes"])
    assert args[args.index("--node-root") + 1] == "/var/cache/inferfleet"  # eviction within the tree
    assert l4["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert l4["spec"]["template"]["metadata"]["labels"][
        objects.LABEL_CACHE_REVISION
    ] == objects.revision_label(svc)


def test_daemonset_tolerates_the_gpu_taint_named_in_the_operators_catalog_file(tmp_path: Any) -> None:
    catalog_file = tmp_path / "gpus.yaml"
    catalog_file.write_text(
        "gpus:\n"
        "  - {name: MI300X, family: cdna3, memoryGiB: 192, bandwidthTBs: 5.3, bf16Tflops: 1307,\n"
        "     fp8Tflops: 2615, interconnect: infinity-fabric, gpusPerNode: 8, resourceName: amd.com/gpu}\n"
    )
    settings = SETTINGS.model_copy(update={"catalog_file": str(catalog_file)})
    svc = service(tiers=[{"name": "mi300", "gpu": "MI300X", "gpusPerNode": 8}], scaling={})
    plan = plan_service(svc, settings.catalogs())
    (daemonset,) = objects.precache_objects(svc, plan, settings)
    tolerations = daemonset["spec"]["template"]["spec"]["tolerations"]
    # The vendor's taint from the catalog file, not the built-in catalog's nvidia default.
    assert tolerations == [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_revision_change_changes_the_pod_template_label() -> None:
    assert objects.revision_label(service()) != objects.revision_label(service(model__revision="v2"))


def test_adapters_get_their_own_fetch_containers_and_serving_paths() -> None:
    svc = service(model__adapters=[{"name": "sql", "source": "s3://loras/sql", "rank": 16}])
    plan = plan_service(svc)
    ds = objects.precache_objects(svc, plan, SETTINGS)[0]
    names = [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]]
    assert names == ["fetch-model", "fetch-adapter-sql"]
    adapter = ds["spec"]["template"]["spec"]["containers"][1]
    assert "--credentials-dir" in adapter["args"]  # s3 keys as files of the secret
    validate(ds)
    cache = objects.serving(svc, SETTINGS)
    assert cache is not None
    # vLLM loads the links the verify containers made, never a ref that can move.
    assert cache.model_path == "/run/inferfleet/pinned/model"
    assert cache.adapter_paths == {"sql": "/run/inferfleet/pinned/adapter-sql"}
    # Only the two models' own directories, read-only: nothing else of the cache.
    model_key = "hf--meta-llama--Llama-3.1-8B-Instruct--cred-hf-token"
    assert [
        (m["subPath"], m["mountPath"], m["readOnly"]) for m in cache.mounts if m["name"] == "model-cache"
    ] == [
        (model_key, f"/var/cache/inferfleet/{model_key}", True),
        ("s3--loras--sql--cred-hf-token", "/var/cache/inferfleet/s3--loras--sql--cred-hf-token", True),
    ]
    assert all(m["readOnly"] for m in cache.mounts)
    assert cache.volumes[0]["persistentVolumeClaim"] == {
        "claimName": "inferfleet-node-cache",
        "readOnly": True,
    }
    assert ("HF_HUB_OFFLINE", "1") in cache.env


def test_serving_pod_init_containers_wait_then_pin() -> None:
    svc = service()
    init = objects.init_containers(svc, "l4", SETTINGS)
    assert [c["name"] for c in init] == ["cache-verify", "cache-hold"]
    verify, hold = init
    dest = "/var/cache/inferfleet/hf--meta-llama--Llama-3.1-8B-Instruct--cred-hf-token"
    assert verify["args"][:4] == ["--dest", dest, "--revision", "main"]
    assert "DaemonSet llama-8b-chat-l4-cache" in verify["args"][verify["args"].index("--hint") + 1]
    # The verify container pins the revision it checked; the sidecar holds that pin.
    assert verify["args"][verify["args"].index("--pin") + 1] == "/run/inferfleet/pinned/model"
    assert hold["args"] == ["--pinned", "/run/inferfleet/pinned/model"]
    assert hold["restartPolicy"] == "Always"  # native sidecar: lives as long as the pod
    cache_mounts = [m for c in init for m in c["volumeMounts"] if m["name"] == "model-cache"]
    assert cache_mounts and all(
        m["readOnly"] and m["subPath"] == dest.rsplit("/", 1)[1] for m in cache_mounts
    )
    # Only the verify container writes its pin, to a pod-local emptyDir.
    assert {"name": "pinned-revisions", "mountPath": "/run/inferfleet/pinned"} in verify["volumeMounts"]
    assert {"name": "pinned-revisions", "mountPath": "/run/inferfleet/pinned", "readOnly": True} in hold[
        "volumeMounts"
    ]


def test_pvc_mode_is_one_job_and_none_mode_is_nothing() -> None:
    svc = service(cache={"mode": "pvc", "pvcName": "shared-weights"})
    found = objects.precache_objects(svc, plan_service(svc), SETTINGS)
    assert [o["kind"] for o in found] == ["Job"]
    validate(found[0])
    assert found[0]["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "shared-weights"
    }
    assert objects.job_name(svc) != objects.job_name(
        service(cache={"mode": "pvc", "pvcName": "shared-weights"}, model__revision="v2")
    )
    off = service(cache={"mode": "none"})
    assert objects.precache_objects(off, plan_service(off), SETTINGS) == []
    assert objects.serving(off, SETTINGS) is None and objects.init_containers(off, "l4", SETTINGS) == []
    local = service(model__source="file:///models/llama")
    assert objects.precache_objects(local, plan_service(local), SETTINGS) == []


def test_pvc_source_mounts_the_claim_read_only() -> None:
    svc = service(model__source="pvc://weights/llama-8b")
    ds = objects.precache_objects(svc, plan_service(svc), SETTINGS)[0]
    validate(ds)
    pod = ds["spec"]["template"]["spec"]
    assert {
        "name": "source-weights",
        "persistentVolumeClaim": {"claimName": "weights", "readOnly": True},
    } in pod["volumes"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["INFERFLEET_PVC_ROOT"] == objects.SOURCES_ROOT


# --- CacheReady -------------------------------------------------------------------------

REV = "r1"


def _ds(desired: int, *, counted: bool = True) -> dict[str, Any]:
    """A DaemonSet whose controller has (or has not yet) counted its eligible nodes."""
    status: dict[str, Any] = {"desiredNumberScheduled": desired, "numberReady": 0}
    if counted:
        status["observedGeneration"] = 2
    return {"metadata": {"generation": 2}, "spec": {"template": {"spec": _H100_PLACEMENT}}, "status": status}


_H100_PLACEMENT: dict[str, Any] = {
    "nodeSelector": {"pool": "gpu"},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.product",
                                "operator": "In",
                                "values": ["NVIDIA-H100-80GB-HBM3"],
                            },
                            {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
                        ]
                    },
                    {
                        "matchExpressions": [
                            {
                                "key": "cloud.google.com/gke-accelerator",
                                "operator": "In",
                                "values": ["nvidia-h100-80gb"],
                            },
                            {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
                        ]
                    },
                ]
            }
        }
    },
}


def _pod(node: str, ready: bool, revision: str = REV, failed: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"labels": {objects.LABEL_CACHE_REVISION: revision}},
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    if failed is not None:
        pod["status"]["containerStatuses"] = [
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "message": failed}}}
        ]  # fmt: skip
    return pod


def test_ready_counts_only_ready_pods_of_the_wanted_revision_on_live_nodes() -> None:
    pods = [_pod("n1", True), _pod("n2", True, revision="old"), _pod("n3", False), _pod("gone", True)]
    report = readiness.tier_report("l4", REV, _ds(3), pods, nodes={"n1", "n2", "n3"})
    assert (report.nodes_ready, report.nodes_eligible, report.nodes_gone) == (1, 3, 1)
    assert not report.ready and report.status().nodes_ready == 1
    cond = readiness.condition([report])
    assert (cond.status, cond.reason) == ("False", readiness.REASON_FETCHING)
    assert "l4: 1/3 nodes" in cond.message


def test_failures_surface_the_fetcher_reason() -> None:
    pods = [_pod("n1", False, failed="BadCredentials: hf://a/b@main: HTTP 401: the credentials were refused")]
    cond = readiness.condition([readiness.tier_report("l4", REV, _ds(1), pods)])
    assert (cond.status, cond.reason) == ("False", "BadCredentials")
    assert "HTTP 401" in cond.message
    odd = [_pod("n1", False, failed="Traceback ...")]
    assert (
        readiness.condition([readiness.tier_report("l4", REV, _ds(1), odd)]).reason == readiness.REASON_FAILED
    )


def test_all_ready_no_nodes_and_disabled() -> None:
    ready = readiness.tier_report("l4", REV, _ds(2), [_pod("a", True), _pod("b", True)])
    cond = readiness.condition([ready])
    assert (cond.status, cond.reason) == ("True", readiness.REASON_READY)
    assert cond.tiers[0].nodes_ready == cond.tiers[0].nodes_eligible == 2
    empty = readiness.condition([readiness.tier_report("l4", REV, _ds(0), [])])
    assert (empty.status, empty.reason) == ("False", readiness.REASON_NO_NODES)
    assert readiness.condition([], enabled=False).status == "True"


def test_a_tier_with_no_node_left_says_so_and_names_the_labels_it_looks_for() -> None:
    """One tier's nodes gone while another tier fetches: not "Fetching h100: 0/0 nodes"."""
    l4 = readiness.tier_report("l4", REV, _ds(3), [_pod("n1", True)])
    h100 = readiness.tier_report("h100", REV, _ds(0), [])
    cond = readiness.condition([l4, h100])
    assert (cond.status, cond.reason) == ("False", readiness.REASON_NO_NODES)
    assert "no node for tier(s) h100" in cond.message and "0/0" not in cond.message
    wanted = (
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 OR cloud.google.com/gke-accelerator=nvidia-h100-80gb; "
        "each with pool=gpu,karpenter.sh/capacity-type notin (spot)"
    )
    assert f"h100: no node matches its placement (nodes with {wanted})" in cond.message
    assert "l4: 1/3 nodes" in cond.message
    by_tier = {tier.tier: tier for tier in cond.tiers}
    assert by_tier["h100"].nodes_wanted == wanted and by_tier["l4"].nodes_wanted is None
    # A DaemonSet the controller has not counted yet is not "no node": it is just new.
    fresh = readiness.condition([l4, readiness.tier_report("h100", REV, _ds(0, counted=False), [])])
    assert fresh.reason == readiness.REASON_FETCHING and all(t.nodes_wanted is None for t in fresh.tiers)
    # A failing fetcher still says what to fix first; the missing tier stays in the words.
    failing = readiness.tier_report("l4", REV, _ds(1), [_pod("n1", False, failed="DiskFull: no space")])
    assert readiness.condition([failing, h100]).reason == "DiskFull"
    assert "h100: no node matches" in readiness.condition([failing, h100]).message


@pytest.mark.parametrize(
    ("ready", "eligible", "ok"), [(0, 3, False), (1, 4, False), (3, 4, False), (4, 4, True)]
)
def test_may_roll_out_only_once_every_eligible_node_has_the_revision(
    ready: int, eligible: int, ok: bool
) -> None:
    report = readiness.TierCacheReport("l4", ready, eligible, REV)
    assert readiness.may_roll_out(report) is ok


def test_pvc_job_report() -> None:
    assert readiness.job_report("l4", REV, {"status": {"succeeded": 1}}, []).ready
    failing = readiness.job_report("l4", REV, {"status": {}}, [_pod("n", False, failed="DiskFull: no space")])
    assert failing.failures == {"DiskFull": 1}
