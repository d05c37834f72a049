"""Each rendered object kind, from the InferenceService, its plan and the settings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inferfleet.api import InferenceService, TierSpec, labels
from inferfleet.design import object_names as names
from inferfleet.render import templating
from inferfleet.render.pod import (
    PodAdditions,
    TierRenderContext,
    extend_in_place,
    harden_in_place,
    pod_spec,
    progress_deadline_s,
)
from inferfleet.render.vllm_args import HTTP_PORT

SCRAPE_INTERVAL = "15s"

PodContributor = Callable[[TierRenderContext], PodAdditions]


def owner_reference(service: InferenceService) -> dict[str, str] | None:
    """The InferenceService as controller owner; None when rendering a file (no uid yet)."""
    if not service.metadata.uid:
        return None
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "name": service.name,
        "uid": service.metadata.uid,
    }


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def canonical_json(document: Any) -> str:
    """Sorted-key compact JSON: what `content_hash` hashes."""
    return _canonical(document)


def content_hash(document: Any) -> str:
    """A short stable hash of plain data (sorted-key JSON)."""
    return _hash_text(_canonical(document))


def content_hash_encoded(members: Mapping[str, str]) -> str:
    """`content_hash` of a dict whose values come already as `canonical_json` text."""
    text = "{" + ",".join(f"{_canonical(key)}:{value}" for key, value in sorted(members.items())) + "}"
    return _hash_text(text)


def _hash_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _common(service: InferenceService) -> dict[str, Any]:
    return {"namespace": service.namespace, "owner": owner_reference(service)}


def service_object(service: InferenceService) -> dict[str, Any]:
    """One Service in front of every tier."""
    return templating.render_json(
        "service.json.j2",
        name=service.name,
        labels=names.service_labels(service.name),
        selector={labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: names.COMPONENT_SERVER},
        port=HTTP_PORT,
        **_common(service),
    )


def pod_monitor(service: InferenceService) -> dict[str, Any]:
    return server_pod_monitor(service.namespace, service.name, owner_reference(service))


def server_pod_monitor(namespace: str, name: str, owner: dict[str, str] | None = None) -> dict[str, Any]:
    """The PodMonitor of one InferenceService's vLLM servers (its own namespace only).

    The autoscaler keys every series by what Prometheus attaches to the target: the
    `namespace` prometheus-operator sets from service discovery, the job set here, and the
    service and tier copied from the pod's labels. Nothing an endpoint exports counts."""
    pod_label = "__meta_kubernetes_pod_label_"
    relabel = [
        (pod_label + prometheus_name(labels.LABEL_SERVICE), labels.SERIES_LABEL_SERVICE),
        (pod_label + prometheus_name(labels.LABEL_TIER), labels.SERIES_LABEL_TIER),
        (pod_label + prometheus_name(labels.LABEL_PD_ROLE), labels.SERIES_LABEL_ROLE),
    ]
    return templating.render_json(
        "podmonitor.json.j2",
        name=name,
        labels=names.service_labels(name),
        selector={labels.LABEL_SERVICE: name, labels.LABEL_COMPONENT: names.COMPONENT_SERVER},
        interval=SCRAPE_INTERVAL,
        job=labels.SCRAPE_JOB_SERVER,
        relabel=relabel,
        namespace=namespace,
        owner=owner,
    )


def prometheus_name(label: str) -> str:
    # Prometheus service discovery replaces every character outside [a-zA-Z0-9_] with _.
    return "".join(c if c.isalnum() or c == "_" else "_" for c in label)


def tier_service(service: InferenceService, tier: str) -> dict[str, Any]:
    return templating.render_json(
        "service.json.j2",
        name=names.tier_service_name(service.name, tier),
        labels=names.tier_labels(service.name, tier),
        selector={**names.tier_selector(service.name, tier), labels.LABEL_COMPONENT: names.COMPONENT_SERVER},
        port=HTTP_PORT,
        **_common(service),
    )


def disruption_budget(service: InferenceService, tier: str) -> dict[str, Any]:
    return templating.render_json(
        "pdb.json.j2",
        name=names.workload_name(service.name, tier),
        labels=names.tier_labels(service.name, tier),
        selector=names.tier_selector(service.name, tier),
        component_label=labels.LABEL_COMPONENT,
        components=[names.COMPONENT_SERVER, names.COMPONENT_WORKER],
        **_common(service),
    )


def initial_replicas(tier: TierSpec) -> int:
    """Replicas a new workload starts with: the warm minimum (the autoscaler takes over)."""
    return tier.min_replicas if tier.max_replicas is None else min(tier.min_replicas, tier.max_replicas)


def workload(
    ctx: TierRenderContext,
    contributors: Sequence[PodContributor],
    serving_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Deployment, or a LeaderWorkerSet when one replica spans several nodes.

    `serving_labels` go on the pods that serve HTTP (Deployment pods, LeaderWorkerSet
    leaders): the front door's capacity and pool labels."""
    service, tier, plan = ctx.service, ctx.tier, ctx.plan
    additions = [contribute(ctx) for contribute in contributors]

    def build(role: str) -> dict[str, Any]:
        pod = pod_spec(ctx, role)  # freshly rendered: extended and hardened in place
        for addition in additions:
            pod = extend_in_place(pod, addition)
        # Last, so what contributors added is held to the same restrictions.
        return harden_in_place(pod, ctx.settings)

    tier_labels = names.tier_labels(service.name, tier.name)
    multi_node = plan.nodes_per_replica > 1
    # Each pod is encoded once: that text is hashed and goes into the template as it is.
    pods = {"server": templating.RawJson(canonical_json(build("server")))}
    if multi_node:
        pods["worker"] = templating.RawJson(canonical_json(build("worker")))
    extra_annotations: dict[str, str] = {}
    for addition in additions:
        extra_annotations.update(addition.annotations)
    # The hash covers exactly what shapes the pods, so it changes when (and only when)
    # a rollout is due; it is also what a human compares across tiers and revisions.
    annotations = {**extra_annotations, labels.ANNOTATION_PLAN_HASH: content_hash_encoded(pods)}
    context = {
        "name": names.workload_name(service.name, tier.name),
        "labels": tier_labels,
        "annotations": dict(sorted(annotations.items())),
        "replicas": initial_replicas(tier),
        **_common(service),
    }
    server_labels = {**(serving_labels or {}), **tier_labels, labels.LABEL_COMPONENT: names.COMPONENT_SERVER}
    if not multi_node:
        return templating.render_json(
            "deployment.json.j2",
            progress_deadline_s=progress_deadline_s(plan),
            selector=names.tier_selector(service.name, tier.name),
            pod_labels=server_labels,
            pod=pods["server"],
            **context,
        )
    return templating.render_json(
        "leaderworkerset.json.j2",
        group_size=plan.nodes_per_replica,
        leader_labels=server_labels,
        worker_labels={**tier_labels, labels.LABEL_COMPONENT: names.COMPONENT_WORKER},
        leader_pod=pods["server"],
        worker_pod=pods["worker"],
        **context,
    )
