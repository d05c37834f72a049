"""Properties of render and diff over arbitrary valid services and hand-made plans.

- render: every object it produces validates against the schemas the render tests use
  (Kubernetes' OpenAPI, the vendored and the pinned CRD schemas, CEL rules included);
- diff is idempotent: apply the actions of diff(desired, live) to the in-memory API
  server, diff again, and nothing is left to do, whatever the live state started as
  (missing objects, drifted ones, scaled workloads, objects of a removed tier).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfleet.api import InferenceService, Plan, labels
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.controller import executor
from inferfleet.kubedata import ref_of
from inferfleet.reconcile import diff
from tests.toolkit import a_plan, a_service, a_tier_plan
from tests.toolkit.design import render
from tests.unit.render.validation import validate

SETTINGS = OperatorSettings()
# GPUs with node labels in the catalog (a tier without placement of its own needs them),
# one vendor each run so one default image per vendor applies.
NVIDIA_GPUS = ("L4", "L40S", "A100-SXM-80GB", "H100-SXM-80GB", "H200-SXM-141GB")
TIER_NAMES = ("a", "b", "c")


@st.composite
def services_and_plans(draw: st.DrawFn) -> tuple[InferenceService, Plan]:
    names = draw(st.lists(st.sampled_from(TIER_NAMES), min_size=1, max_size=3, unique=True))
    builder = a_service("svc").tiers()
    tier_plans = []
    for name in names:
        gpu = draw(st.sampled_from(NVIDIA_GPUS))
        low = draw(st.integers(1, 3))
        high = draw(st.one_of(st.none(), st.integers(max(1, low), 8)))
        spot = draw(st.booleans())
        builder = builder.tier(
            name, gpu, min_replicas=low, max_replicas=high, **({"capacityType": "spot"} if spot else {})
        )
        tp = draw(st.sampled_from((1, 2, 4, 8)))
        pp = draw(st.sampled_from((1, 1, 2)))
        gpus = tp * pp
        tier_plan = (
            a_tier_plan(name)
            .on(gpu)
            .layout(tp, pp, nodes=math.ceil(gpus / 8))
            .with_(
                maxModelLen=draw(st.integers(1024, 131_072)),
                maxNumSeqs=draw(st.integers(1, 512)),
                maxNumBatchedTokens=draw(st.integers(512, 16_384)),
                gpuMemoryUtilization=draw(st.sampled_from((0.8, 0.85, 0.9, 0.95))),
                prefixCaching=draw(st.booleans()),
                kvCacheDtype=draw(st.sampled_from(("auto", "fp8"))),
                quantization=draw(st.sampled_from(("none", "fp8", "awq"))),
            )
        )
        if draw(st.integers(0, 4)) == 0:
            tier_plan = tier_plan.infeasible("does not fit")
        tier_plans.append(tier_plan)
    cache = draw(st.sampled_from((None, {"mode": "nvme"}, {"mode": "pvc", "pvcName": "weights"})))
    if cache is not None:
        builder = builder.with_spec(cache=cache)
    return builder.service(), a_plan(*tier_plans, name="svc")


PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@PROPERTY_SETTINGS
@given(services_and_plans())
def test_every_rendered_object_validates(case: tuple[InferenceService, Plan]) -> None:
    service, plan = case
    objects = render(service, plan, SETTINGS)
    assert objects  # at least the Service and the PodMonitor
    feasible = {tier.name for tier in plan.feasible_tiers}
    rendered_tiers = {
        o["metadata"]["labels"].get(labels.LABEL_TIER)
        for o in objects
        if o["kind"] in ("Deployment", "LeaderWorkerSet") and labels.LABEL_TIER in o["metadata"]["labels"]
    }
    assert rendered_tiers == feasible  # one workload per feasible tier, none for the others
    for obj in objects:
        validate(obj)


def _owned(cluster: InMemoryCluster, service: InferenceService) -> list[dict[str, Any]]:
    return [
        cluster.objects[ref]
        for ref in cluster.objects
        if (cluster.objects[ref]["metadata"].get("labels") or {}).get(labels.LABEL_SERVICE) == service.name
    ]


def _with_uid(service: InferenceService, uid: str | None) -> InferenceService:
    return service.model_copy(update={"metadata": service.metadata.model_copy(update={"uid": uid})})


@PROPERTY_SETTINGS
@given(services_and_plans(), st.data())
def test_diff_then_apply_then_diff_is_empty(case: tuple[InferenceService, Plan], data: st.DataObject) -> None:
    service, plan = case
    cluster = InMemoryCluster()
    body = service.model_dump(by_alias=True, exclude_none=True, mode="json")
    body["metadata"].pop("uid", None)  # the API server refuses to create an object with a uid
    owner = cluster.user_apply(body)
    service = _with_uid(service, str(owner["metadata"]["uid"]))
    desired = render(service, plan, SETTINGS)
    # A live state: some desired objects exist (some drifted, workloads scaled), and the
    # objects of a tier the spec no longer has.
    for obj in desired:
        choice = data.draw(st.sampled_from(("absent", "same", "drifted", "scaled")))
        if choice == "absent":
            continue
        live = dict(obj)
        live["metadata"] = {**obj["metadata"]}
        if choice == "drifted":
            live["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), "edited-by": "human"}
            live["metadata"]["annotations"] = {"inferfleet.dev/plan-hash": "stale"}
        if choice == "scaled" and ref_of(obj).is_workload:
            live["spec"] = {**obj["spec"], "replicas": data.draw(st.integers(0, 9))}
        cluster.apply(live)
    gone = a_service("svc").tiers().tier("gone", "L4", max_replicas=2).service()
    removed = _with_uid(gone, service.metadata.uid)
    for obj in render(removed, a_plan(a_tier_plan("gone").on("L4"), name="svc"), SETTINGS):
        if ref_of(obj).is_workload:
            cluster.apply(obj)

    infeasible = frozenset(tier.name for tier in plan.tiers if not tier.feasible)
    actions = diff(desired, _owned(cluster, service), keep_tiers=infeasible)
    report = executor.execute(cluster, actions)
    assert report.failures == []
    assert diff(desired, _owned(cluster, service), keep_tiers=infeasible) == []
