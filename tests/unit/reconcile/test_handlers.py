"""The operator end to end on the in-memory cluster: real handlers, planner, renderer."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from inferfleet import admission_handlers, handlers
from inferfleet.api import labels
from inferfleet.cluster import Conflict, PermanentApiError, TransientApiError
from inferfleet.kubedata import ref_of
from tests.unit.reconcile.fixtures import LOGGER, NAMESPACE, Control, example

TINY_GPU = {"name": "tiny", "memoryGiB": 2}


def shrink(tier: dict[str, Any]) -> None:
    """Make a tier infeasible for an 8B model: one 2 GiB GPU per node."""
    tier["gpu"] = TINY_GPU
    tier["gpusPerNode"] = 1


def created() -> Control:
    control = Control()
    control.submit(example())
    control.reconcile()
    return control


# Not the service's own: the namespace, and its node-cache claim and volume, which every
# service of the namespace shares (test_node_cache_volume_is_the_namespaces_own).
SHARED_KINDS = {labels.KIND, "Namespace", "PersistentVolume", "PersistentVolumeClaim"}


def owned(control: Control) -> list[str]:
    return sorted(f"{ref.kind}/{ref.name}" for ref in control.cluster.objects if ref.kind not in SHARED_KINDS)


def test_create_renders_every_object_and_reports_status() -> None:
    control = created()
    assert owned(control) == [
        "DaemonSet/llama-8b-chat-a100-burst-cache",
        "DaemonSet/llama-8b-chat-l4-cache",
        "Deployment/llama-8b-chat-a100-burst",
        "Deployment/llama-8b-chat-epp",
        "Deployment/llama-8b-chat-l4",
        "HTTPRoute/llama-8b-chat",
        "InferencePool/llama-8b-chat",
        "PodDisruptionBudget/llama-8b-chat-a100-burst",
        "PodDisruptionBudget/llama-8b-chat-l4",
        "PodMonitor/llama-8b-chat",
        "PodMonitor/llama-8b-chat-epp",
        "Role/llama-8b-chat-epp",
        "RoleBinding/llama-8b-chat-epp",
        "Service/llama-8b-chat",
        "Service/llama-8b-chat-a100-burst-api",
        "Service/llama-8b-chat-epp",
        "Service/llama-8b-chat-l4-api",
        "ServiceAccount/llama-8b-chat-epp",
    ]
    status = control.status()
    assert status["observedGeneration"] == control.cr()["metadata"]["generation"]
    assert [tier["name"] for tier in status["plan"]] == ["l4", "a100-burst"]
    assert status["replicas"] == [
        {"tier": "l4", "desired": 2, "ready": 0},
        {"tier": "a100-burst", "desired": 0, "ready": 0},
    ]
    assert control.condition("Planned")["status"] == "True"
    assert control.condition("Ready")["status"] == "False"
    assert control.condition("Degraded")["status"] == "False"
    # Weight pre-cache: no DaemonSet pod has reported yet.
    assert control.condition("CacheReady")["status"] == "False"
    # the example declares SLOs its L4 tier can hold
    assert [e["reason"] for e in control.cluster.events] == ["PlanChanged"]
    # No Gateway controller has answered, no pod is Ready yet.
    front = status["frontDoor"]
    assert (front["mode"], front["gateway"], front["route"], front["endpoints"]) == (
        "gateway",
        "ml-serving/inference-gateway",
        "Pending",
        0,
    )
    assert [(p["name"], p["tiers"], p["pickerReady"]) for p in front["pools"]] == [
        ("llama-8b-chat", ["l4", "a100-burst"], False)
    ]
    assert control.condition("SloAtRisk")["status"] == "False"


def tighten_slo(body: dict[str, Any]) -> None:
    # An 80 ms ITL p99 on L4: a step carrying even a 512-token prefill chunk takes longer.
    body["spec"]["workload"]["slo"] = {"ttftP99Ms": 1500, "itlP99Ms": 80}


def test_an_slo_no_layout_meets_sets_slo_at_risk_once_and_clears_when_relaxed() -> None:
    control = created()
    relaxed = dict(control.cr()["spec"]["workload"]["slo"])
    control.edit(tighten_slo)
    control.reconcile()
    at_risk = control.condition("SloAtRisk")
    assert at_risk["status"] == "True" and at_risk["message"].startswith("l4: ITL")
    warnings = [e for e in control.cluster.events if e["reason"] == "SloUnreachable"]
    assert len(warnings) == 1
    control.reconcile()  # still at risk: no second event
    assert len([e for e in control.cluster.events if e["reason"] == "SloUnreachable"]) == 1

    def relax(body: dict[str, Any]) -> None:
        body["spec"]["workload"]["slo"] = relaxed

    control.edit(relax)
    control.reconcile()
    assert control.condition("SloAtRisk")["status"] == "False"


def test_ready_when_every_tier_has_its_replicas() -> None:
    control = created()
    control.mark_ready()
    control.reconcile()
    ready = control.condition("Ready")
    assert ready["status"] == "True"
    assert ready["reason"] == labels.REASON_AVAILABLE
    assert control.status()["tierSummary"] == "l4:2/2,a100-burst:0/0"


def test_a_second_pass_writes_nothing() -> None:
    control = created()
    # The first pass created the node-cache claim; the one after it sees it bound (what
    # CacheReady says changes once). From then on a pass writes nothing.
    control.reconcile()
    calls = len(control.cluster.calls)
    rv = control.cr()["metadata"]["resourceVersion"]
    control.reconcile()
    writes = [op for op, _ in control.cluster.calls[calls:] if op in {"apply", "delete", "patch_status"}]
    assert writes == []
    assert control.cr()["metadata"]["resourceVersion"] == rv
    assert len(control.cluster.events) == 1  # the first pass's PlanChanged


def test_scale_out_and_back_survives_reconcile() -> None:
    control = created()
    ref = control.workload_ref("l4")
    for replicas in (7, 2, 3):
        control.cluster.scale(ref, replicas)
        control.reconcile()
        assert control.workloads()["l4"]["spec"]["replicas"] == replicas
        assert control.status()["replicas"][0]["desired"] == replicas


def test_model_revision_change_rolls_the_pods_and_keeps_replicas() -> None:
    control = created()
    ref = control.workload_ref("l4")
    control.cluster.scale(ref, 5)
    before = control.workloads()["l4"]
    control.edit(lambda body: body["spec"]["model"].__setitem__("revision", "0e9e39f"))
    control.reconcile()
    after = control.workloads()["l4"]
    assert after["spec"]["replicas"] == 5
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    verify = after["spec"]["template"]["spec"]["initContainers"][0]
    # The new revision is what the pod's verify container checks and pins for vLLM.
    assert verify["args"][verify["args"].index("--revision") + 1] == "0e9e39f"
    hash_key = labels.ANNOTATION_PLAN_HASH
    assert (
        after["spec"]["template"]["metadata"]["annotations"][hash_key]
        != (before["spec"]["template"]["metadata"]["annotations"][hash_key])
    )


def test_changes_outside_the_pod_template_restart_nothing() -> None:
    control = created()
    templates = {tier: w["spec"]["template"] for tier, w in control.workloads().items()}
    start = len(control.cluster.calls)

    def retune(body: dict[str, Any]) -> None:
        body["spec"]["scaling"]["headroom"] = 0.5
        body["spec"]["tiers"][0]["maxReplicas"] = 20
        body["spec"]["workload"]["peakRequestsPerSecond"] = 20

    control.edit(retune)
    control.reconcile()
    assert [ref for op, ref in control.cluster.calls[start:] if op == "apply" and ref.is_workload] == []
    assert {tier: w["spec"]["template"] for tier, w in control.workloads().items()} == templates


def test_manual_edits_are_corrected_but_replicas_are_not() -> None:
    control = created()
    ref = control.workload_ref("l4")

    def tamper(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:latest"
        obj["spec"]["replicas"] = 4

    control.cluster.update(ref, tamper, manager="kubectl-edit")
    control.reconcile()
    workload = control.workloads()["l4"]
    assert workload["spec"]["template"]["spec"]["containers"][0]["image"] == control.settings.vllm_image
    assert workload["spec"]["replicas"] == 4


def test_removed_tier_is_pruned() -> None:
    control = created()
    control.edit(lambda body: body["spec"]["tiers"].pop(1))
    control.reconcile()
    assert not [name for name in owned(control) if "a100-burst" in name]
    assert "Deployment/llama-8b-chat-l4" in owned(control)
    assert any(e["reason"] == "TierPruned" and "a100-burst" in e["message"] for e in control.cluster.events)


def test_infeasible_tier_sets_conditions_and_leaves_its_workload_alone() -> None:
    control = created()
    old = control.workloads()["a100-burst"]
    control.edit(lambda body: shrink(body["spec"]["tiers"][1]))
    control.reconcile()
    assert control.workloads()["a100-burst"] == old
    planned, degraded = control.condition("Planned"), control.condition("Degraded")
    assert (planned["status"], planned["reason"]) == ("False", labels.REASON_INFEASIBLE_TIER)
    assert "a100-burst" in planned["message"]
    assert (degraded["status"], degraded["reason"]) == ("True", labels.REASON_INFEASIBLE_TIER)
    assert any(
        e["type"] == "Warning" and e["reason"] == labels.REASON_INFEASIBLE_TIER
        for e in control.cluster.events
    )


def test_no_feasible_tier_keeps_everything_running() -> None:
    control = created()
    before = owned(control)
    control.edit(lambda body: [shrink(tier) for tier in body["spec"]["tiers"]])
    control.reconcile()
    assert owned(control) == before
    assert control.condition("Planned")["reason"] == labels.REASON_NO_FEASIBLE_TIER


def test_invalid_spec_is_a_condition_not_a_crash_or_a_deletion() -> None:
    control = created()
    before = owned(control)
    good_plan = control.status()["plan"]
    control.edit(lambda body: body["spec"]["tiers"][0].__setitem__("minReplicas", -3))
    control.reconcile()  # no exception: a retry would fail the same way
    assert owned(control) == before
    assert control.condition("Planned")["reason"] == labels.REASON_INVALID_SPEC
    assert control.condition("Degraded")["status"] == "True"
    assert control.status()["plan"] == good_plan


def test_restart_mid_reconcile_converges_without_duplicates() -> None:
    fresh = created()
    control = Control()
    control.submit(example())
    control.cluster.inject("create", TransientApiError("connection reset"), kind="Deployment")
    with pytest.raises(kopf.TemporaryError):
        control.reconcile()
    assert len(owned(control)) < len(owned(fresh))
    control.restart()
    control.reconcile()
    assert owned(control) == owned(fresh)
    assert [w["spec"]["replicas"] for w in control.workloads().values()] == [
        w["spec"]["replicas"] for w in fresh.workloads().values()
    ]


def test_conflicts_are_retried_with_growing_backoff() -> None:
    control = Control()
    control.submit(example())
    control.cluster.inject("patch_status", Conflict("moved on", 409), times=2)
    delays = []
    for retry in range(2):
        with pytest.raises(kopf.TemporaryError) as error:
            asyncio.run(
                handlers.reconcile_on_change(
                    name="llama-8b-chat", namespace=NAMESPACE, memo=control.memo, retry=retry, logger=LOGGER
                )
            )
        delays.append(error.value.delay)
    assert delays == [handlers.backoff_s(0), handlers.backoff_s(1)]
    assert delays[1] > delays[0]
    control.reconcile()
    assert control.condition("Planned")["status"] == "True"


def test_refused_object_is_an_apply_failure_and_others_still_apply() -> None:
    control = Control()
    control.submit(example())
    control.cluster.inject("create", PermanentApiError("quota exceeded", 403), kind="PodDisruptionBudget")
    control.reconcile()
    degraded = control.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", labels.REASON_APPLY_FAILED)
    assert "quota exceeded" in degraded["message"]
    assert len(control.workloads()) == 2
    control.reconcile()  # the next pass heals it
    assert control.condition("Degraded")["status"] == "False"


def test_missing_pod_monitor_crd_degrades_but_serves() -> None:
    control = Control()
    control.cluster.served.discard(("monitoring.coreos.com/v1", "PodMonitor"))
    control.submit(example())
    control.reconcile()
    assert len(control.workloads()) == 2
    assert control.condition("Degraded")["reason"] == labels.REASON_METRICS_UNAVAILABLE


def test_delete_cascades_through_owner_references() -> None:
    control = created()
    control.cluster.user_delete(ref_of(control.cr()))
    # What is left is the namespace's: the node-cache claim and volume other services
    # of the namespace share, and whose weights outlive every service (Retain).
    assert sorted(ref.kind for ref in control.cluster.objects) == [
        "Namespace",
        "PersistentVolume",
        "PersistentVolumeClaim",
    ]
    control.reconcile()  # a late event for a deleted object is a no-op


def test_multi_node_example_becomes_a_leader_worker_set() -> None:
    control = Control()
    control.submit(example("llama-405b-multinode.yaml"))
    control.reconcile("llama-405b")
    assert [r.kind for r in control.cluster.objects if r.is_workload] == ["LeaderWorkerSet"]


def test_admission_rejects_all_infeasible_and_warns_on_one() -> None:
    control = Control()
    body = example()
    for tier in body["spec"]["tiers"]:
        shrink(tier)
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=[])
    assert "l4" in str(error.value) and "a100-burst" in str(error.value)
    body = example()
    shrink(body["spec"]["tiers"][1])
    warnings: list[str] = []
    admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=warnings)
    assert len(warnings) == 1 and "a100-burst" in warnings[0]


def test_admission_denies_an_unknown_gpu_with_its_field_path() -> None:
    control = Control()
    body = example()
    body["spec"]["tiers"][1]["gpu"] = "H1000"  # a typo; the other tier is fine
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=[])
    assert "spec.tiers[1].gpu: unknown GPU 'H1000'" in str(error.value)


def test_admission_admits_a_model_its_probe_will_read_and_says_where() -> None:
    """The webhook cannot read a tenant's source (a probe Job in the tenant's namespace
    does, once the object exists): admitted, with a warning naming the source."""
    control = Control()
    body = example()
    body["spec"]["model"] = {"name": "acme/uncatalogued-8b", "source": "s3://models/acme-8b"}
    warnings: list[str] = []
    admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=warnings)
    assert len(warnings) == 1, warnings
    assert "s3://models/acme-8b@main by a probe Job in namespace" in warnings[0]
    assert "status.modelSource" in warnings[0] and "ModelConfigRead" in warnings[0]
    # What does not depend on the model is still refused.
    body["spec"]["tiers"][1]["gpu"] = "H1000"
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=[])
    assert "spec.tiers[1].gpu: unknown GPU 'H1000'" in str(error.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda body: body["spec"]["tiers"][1].__setitem__("gpu", "H1000"),
        lambda body: body["spec"].__setitem__("model", {"name": "acme/x", "source": "pvc://weights/x"}),
    ],
    ids=["unknown-gpu", "unprobeable-model"],
)
def test_what_the_webhook_refuses_the_reconciler_refuses(change: Any) -> None:
    """One function judges both: the reconciler's Planned=False carries the webhook's words."""
    control = created()
    before = owned(control)
    body = example()
    change(body)
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=[])
    control.edit(change)
    control.reconcile()
    assert owned(control) == before  # nothing applied, nothing deleted
    planned = control.condition("Planned")
    assert (planned["status"], planned["reason"]) == ("False", labels.REASON_INVALID_SPEC)
    assert str(error.value).split(": ", 1)[0] in planned["message"], (error.value, planned)


def test_admission_denies_a_cache_path_outside_the_allowed_root() -> None:
    control = Control()
    body = example()
    body["spec"]["cache"]["nodePath"] = "/data/weights"
    with pytest.raises(kopf.AdmissionError) as error:
        admission_handlers.validate_plan(body=kopf.Body(body), memo=control.memo, warnings=[])
    assert "spec.cache.nodePath" in str(error.value)


def test_a_cache_path_outside_the_allowed_root_is_never_rendered() -> None:
    control = created()
    before = owned(control)
    control.edit(lambda body: body["spec"]["cache"].__setitem__("nodePath", "/data/weights"))
    control.reconcile()
    assert owned(control) == before  # nothing applied, nothing deleted
    planned = control.condition("Planned")
    assert planned["reason"] == labels.REASON_INVALID_SPEC and "spec.cache.nodePath" in planned["message"]
    paths = [
        volume["spec"]["hostPath"]["path"]
        for ref, volume in control.cluster.objects.items()
        if ref.kind == "PersistentVolume"
    ]
    assert paths and not any(path.startswith("/data/weights") for path in paths)
    claims = {
        volume["persistentVolumeClaim"]["claimName"]
        for obj in control.cluster.objects.values()
        for volume in _pod_spec(obj).get("volumes", [])
        if "persistentVolumeClaim" in volume
    }
    assert claims == {"inferfleet-node-cache"}


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    template = obj.get("spec", {}).get("template", {})
    return dict(template.get("spec", {})) if isinstance(template, dict) else {}


def test_a_refused_event_does_not_fail_the_pass() -> None:
    # A namespace being deleted answers every new Event with 403; the pass has already
    # applied its objects and written status, so it must end as a success, not a retry loop.
    control = Control()
    control.submit(example())
    control.cluster.inject(
        "create", PermanentApiError("namespace is being terminated", 403), kind="Event", times=5
    )
    control.reconcile()
    assert control.condition("Planned")["status"] == "True"
    assert control.status()["plan"]
    assert control.cluster.events == []
    assert "Deployment/llama-8b-chat-l4" in owned(control)


def test_a_replica_that_took_the_lease_over_leaves_resumes_to_the_resync() -> None:
    """On a takeover kopf lists every InferenceService at once; the unchanged ones (resume)
    are left to the resync loop, so an edit (update) waits behind none of them. On a first
    start (no other holder ever seen) resumes run as before."""
    from inferfleet.controller import leader

    control = Control()
    control.submit(example())
    elector = leader.LeaderElector(control.cluster, leader.LeaseConfig(NAMESPACE, "inferfleet", "b"))
    control.memo["leader"], control.memo["resync"] = elector, object()

    def run(reason: str) -> None:
        asyncio.run(
            handlers.reconcile_on_change(
                name="llama-8b-chat",
                namespace=NAMESPACE,
                memo=control.memo,
                retry=0,
                logger=LOGGER,
                reason=reason,
            )
        )

    run(kopf.Reason.RESUME)  # never saw another holder: a first start
    assert control.status().get("observedGeneration") == 1
    elector.followed_another = True
    control.edit(lambda body: body["spec"]["tiers"][0].__setitem__("maxReplicas", 7))
    run(kopf.Reason.RESUME)
    assert control.status()["observedGeneration"] == 1  # left to the resync
    run(kopf.Reason.UPDATE)
    assert control.status()["observedGeneration"] == 2
