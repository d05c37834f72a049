"""Pre-cache on the in-memory cluster: CacheReady follows the DaemonSets' events, and a
revision change rolls the serving pods only once the new revision is on the nodes."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import kopf

from inferfleet import handlers
from inferfleet.api import labels
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.kubedata import ObjectRef
from inferfleet.reconcile import rollout
from tests.unit.reconcile.fixtures import LOGGER, NAME, NAMESPACE, Control, example

NODES_PER_TIER = 2


def daemonset(control: Control, tier: str) -> dict[str, Any]:
    ref = ObjectRef("apps/v1", "DaemonSet", NAMESPACE, cache_objects.daemonset_name(NAME, tier))
    return control.cluster.objects[ref]


def fetch_done(
    control: Control, tier: str, nodes: int = NODES_PER_TIER, eligible: int = NODES_PER_TIER
) -> None:
    """What the DaemonSet controller and kubelets report once `nodes` pre-cache pods of the
    DaemonSet's current template are Ready (its readiness probe is `cache verify`)."""
    ds = daemonset(control, tier)
    revision = ds["spec"]["template"]["metadata"]["labels"][cache_objects.LABEL_CACHE_REVISION]
    for index in range(nodes):
        pod_name = f"{ds['metadata']['name']}-{revision[:6]}-{index}"
        control.cluster.user_apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": NAMESPACE,
                    "labels": ds["spec"]["template"]["metadata"]["labels"],
                },
                "spec": {"nodeName": f"{tier}-node-{index}"},
            }
        )
        pod_ref = ObjectRef("v1", "Pod", NAMESPACE, pod_name)
        control.cluster.set_status(pod_ref, {"conditions": [{"type": "Ready", "status": "True"}]})
    ds_ref = ObjectRef("apps/v1", "DaemonSet", NAMESPACE, ds["metadata"]["name"])
    ds_status = {
        "desiredNumberScheduled": eligible,
        "numberReady": nodes,
        "observedGeneration": ds["metadata"].get("generation", 1),
    }
    control.cluster.set_status(ds_ref, ds_status)


def daemonset_event(control: Control, tier: str) -> None:
    """The watch event kopf delivers for the DaemonSet's status change."""
    body = kopf.Body(daemonset(control, tier))
    asyncio.run(handlers.reconcile_parent(type="MODIFIED", body=body, memo=control.memo, logger=LOGGER))


def verified_revision(control: Control, tier: str) -> str | None:
    return rollout.serving_revision(control.workloads()[tier])


def set_revision(revision: str) -> Any:
    def change(body: dict[str, Any]) -> None:
        body["spec"]["model"]["revision"] = revision

    return change


def test_kopf_watches_the_pre_cache_daemonsets_and_jobs() -> None:
    selectors = [
        h.selector
        for h in kopf.get_default_registry()._watching.get_all_handlers()
        if h.fn is handlers.reconcile_parent and h.selector is not None
    ]
    for group, plural, kind in (("apps", "daemonsets", "DaemonSet"), ("batch", "jobs", "Job")):
        resource = kopf.Resource(group, "v1", plural, kind=kind, namespaced=True)
        assert any(selector.check(resource) for selector in selectors), plural


def test_a_daemonset_event_updates_cache_ready_at_once() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    assert control.condition("CacheReady")["status"] == "False"
    fetch_done(control, "l4")
    fetch_done(control, "a100-burst")
    # No InferenceService change and no resync: only the DaemonSet's event.
    daemonset_event(control, "l4")
    ready = control.condition("CacheReady")
    assert (ready["status"], ready["reason"]) == ("True", "CacheReady")
    assert {t["tier"]: t["nodesReady"] for t in control.status()["cache"]} == {"l4": 2, "a100-burst": 2}


def test_a_revision_change_fetches_first_then_rolls() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    fetch_done(control, "l4")
    fetch_done(control, "a100-burst")
    control.reconcile()
    old_template = control.workloads()["l4"]["spec"]["template"]
    old_label = daemonset(control, "l4")["spec"]["template"]["metadata"]["labels"][
        cache_objects.LABEL_CACHE_REVISION
    ]

    control.edit(set_revision("v2"))
    control.reconcile()
    # The DaemonSet moved to the new revision at once ...
    ds = daemonset(control, "l4")
    assert ds["spec"]["template"]["metadata"]["labels"][cache_objects.LABEL_CACHE_REVISION] != old_label
    assert "v2" in ds["spec"]["template"]["spec"]["containers"][0]["args"]
    # ... the l4 serving pods (2 replicas) stay on the revision they serve ...
    assert control.workloads()["l4"]["spec"]["template"] == old_template
    assert verified_revision(control, "l4") == "main"
    # ... while a tier with no replicas has nothing to protect and rolls now.
    assert verified_revision(control, "a100-burst") == "v2"
    waiting = control.condition("CacheReady")
    assert (waiting["status"], waiting["reason"]) == ("False", "FetchingRevision")
    assert "l4 keeps serving revision main until v2" in waiting["message"]

    # One of the two nodes the replicas need has it: still held.
    fetch_done(control, "l4", nodes=1)
    daemonset_event(control, "l4")
    assert verified_revision(control, "l4") == "main"

    fetch_done(control, "l4")
    daemonset_event(control, "l4")
    deployment = control.workloads()["l4"]
    assert verified_revision(control, "l4") == "v2"
    verify = deployment["spec"]["template"]["spec"]["initContainers"][0]
    assert verify["args"][verify["args"].index("--revision") + 1] == "v2"  # pinned and loaded by vLLM
    fetch_done(control, "a100-burst")
    control.reconcile()
    assert control.condition("CacheReady")["status"] == "True"


def test_the_rollout_waits_for_every_eligible_node_not_only_as_many_as_the_replicas() -> None:
    """Two replicas, four eligible nodes: a new pod may land on any of the four (the
    scheduler does not know which hold the weights), so two cached nodes are not enough."""
    control = Control()
    control.submit(example())
    control.reconcile()
    fetch_done(control, "l4", nodes=4, eligible=4)
    fetch_done(control, "a100-burst")
    control.reconcile()
    control.edit(set_revision("v2"))
    control.reconcile()
    for cached in (1, 2, 3):
        fetch_done(control, "l4", nodes=cached, eligible=4)
        daemonset_event(control, "l4")
        assert verified_revision(control, "l4") == "main", f"rolled with {cached}/4 nodes cached"
        held = control.condition("CacheReady")
        assert held["reason"] == "FetchingRevision", held
        assert f"until v2 is cached on every eligible node ({cached}/4 have it)" in held["message"]
    fetch_done(control, "l4", nodes=4, eligible=4)
    daemonset_event(control, "l4")
    assert verified_revision(control, "l4") == "v2"


def test_a_tier_whose_nodes_are_gone_says_so_in_cache_ready_and_ready() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    fetch_done(control, "l4", nodes=0, eligible=0)  # counted: no node matches
    fetch_done(control, "a100-burst", nodes=1)
    daemonset_event(control, "l4")
    cache = control.condition("CacheReady")
    assert (cache["status"], cache["reason"]) == ("False", "NoEligibleNodes")
    assert "no node for tier(s) l4" in cache["message"] and "l4: 0/0" not in cache["message"]
    assert "cloud.google.com/gke-accelerator=nvidia-l4" in cache["message"]
    ready = control.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NoEligibleNodes")
    assert (
        "l4: no node matches its placement (nodes with nvidia.com/gpu.product=NVIDIA-L4 OR"
        in ready["message"]
    )
    entry = next(t for t in control.status()["cache"] if t["tier"] == "l4")
    assert "karpenter.sh/capacity-type notin (spot)" in entry["nodesWanted"]


def test_no_hold_when_the_tier_has_no_eligible_nodes() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    control.edit(set_revision("v2"))
    control.reconcile()
    # No DaemonSet status yet (no GPU node exists): an old-revision pod could never start
    # anywhere either, so the workload moves to the revision the nodes will be given.
    assert verified_revision(control, "l4") == "v2"
    assert control.condition("CacheReady")["reason"] != "FetchingRevision"


def test_serving_revision_reads_leader_worker_sets_too() -> None:
    lws = {
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "x", "labels": {labels.LABEL_TIER: "h100"}},
        "spec": {
            "leaderWorkerTemplate": {
                "workerTemplate": {
                    "spec": {"initContainers": [{"name": "cache-verify", "args": ["--revision", "abc"]}]}
                }
            }
        },
    }
    assert rollout.serving_revision(lws) == "abc"
    assert rollout.serving_revision({"kind": "Deployment", "spec": {"template": {"spec": {}}}}) is None


def test_status_plan_uses_the_measured_cold_start_without_rolling_the_pods() -> None:
    control = Control()
    control.submit(example())
    control.reconcile()
    estimate = next(t for t in control.status()["plan"] if t["name"] == "l4")["coldStartSeconds"]
    template = control.workloads()["l4"]["spec"]["template"]
    started = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for index, seconds in enumerate((30, 34, 90)):
        name = f"{NAME}-l4-pod{index}"
        metadata = {"name": name, "namespace": NAMESPACE, "labels": template["metadata"]["labels"]}
        control.cluster.user_apply({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {}})
        ready_at = started + dt.timedelta(seconds=seconds)
        control.cluster.set_status(
            ObjectRef("v1", "Pod", NAMESPACE, name),
            {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": ready_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                ],
                "containerStatuses": [
                    {
                        "name": "vllm",
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            },
        )
    control.reconcile()
    l4 = next(t for t in control.status()["plan"] if t["name"] == "l4")
    assert l4["coldStartSeconds"] == 34.0 != estimate
    assert any("measured" in reason for reason in l4["reasons"])
    # The autoscaler's lead time comes from here; the pods' startup probe did not move.
    assert control.workloads()["l4"]["spec"]["template"] == template
