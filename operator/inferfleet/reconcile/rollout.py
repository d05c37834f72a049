"""A model revision change fetches the new weights before the serving pods roll. Pure.

With cache.mode nvme, a new `spec.model.revision` changes two kinds of object at once:
the tier's pre-cache DaemonSet (its pods fetch the new revision on every node) and the
serving workload's pod template (its init container waits for the new revision, vLLM
loads it). Applied together, the rolling update would start new pods that sit in their
init container for as long as the download takes, while the old pods are taken down
around them. So the decision here keeps a tier's workload on the revision its pods serve
now until `cache.readiness.may_roll_out` says every eligible node holds the new one (as
docs/concepts/precaching.md promises); the DaemonSet goes out at once. "Enough nodes for the replicas" is not
enough: the scheduler does not know which nodes hold the weights, so a new pod lands on
any eligible node, and so does every later scale-up. A node that cannot fetch holds the
rollout; CacheReady names its reason while the old revision keeps serving.
`render(..., workload_revisions=...)` renders a held tier's workload at the revision it
serves, in the same single render.

What the workload serves is read back from what it runs: the revision argument of its
`cache-verify` init container (the contract `caching.precache.workloads.init_containers` writes). The
old revision stays on the nodes meanwhile: the serving pods' `cache hold` sidecars pin
it, and the node's garbage collector never evicts a pinned revision, so it becomes
collectable only once the rolled pods are gone.

No hold, so the tier rolls at once, when there is nothing to protect: the workload has
no replicas, or no node is eligible for the tier yet (a pod of the old template would
wait for a revision nobody fetches any more).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferfleet.api import InferenceService, Plan, labels
from inferfleet.caching.precache import readiness
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.caching.precache.layout import DEFAULT_REF
from inferfleet.kubedata import DEPLOYMENT, LEADER_WORKER_SET


@dataclass(frozen=True)
class RolloutHold:
    """One tier whose workload stays on `serving_revision` for now."""

    tier: str
    serving_revision: str
    wanted_revision: str
    nodes_ready: int
    nodes_eligible: int

    def describe(self) -> str:
        return (
            f"{self.tier} keeps serving revision {self.serving_revision} until {self.wanted_revision} "
            f"is cached on every eligible node ({self.nodes_ready}/{self.nodes_eligible} have it)"
        )


def _pod_templates(workload: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    spec = workload.get("spec") or {}
    if "template" in spec:
        yield spec["template"] or {}
    group = spec.get("leaderWorkerTemplate") or {}
    for key in ("leaderTemplate", "workerTemplate"):
        if group.get(key):
            yield group[key]


def serving_revision(workload: Mapping[str, Any]) -> str | None:
    """The model revision a workload's pods verify before vLLM starts; None when its pods
    do not load from the pre-cache."""
    for template in _pod_templates(workload):
        for container in (template.get("spec") or {}).get("initContainers") or []:
            if container.get("name") != cache_objects.VERIFY_CONTAINER:
                continue
            args = list(container.get("args") or [])
            if "--revision" in args[:-1]:
                return str(args[args.index("--revision") + 1])
    return None


def _tier_of(obj: Mapping[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(labels.LABEL_TIER)
    return str(value) if value is not None else None


def holds(
    service: InferenceService,
    plan: Plan,
    observed: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    nodes: Collection[str] | None = None,
) -> tuple[RolloutHold, ...]:
    """The tiers whose serving workload must not move to the spec's revision yet.

    `observed` is what the reconcile pass listed (workloads and DaemonSets, as they are
    before this pass applies anything); `pods` the pre-cache pods, listed by label."""
    if cache_objects.cache_mode(service) != "nvme" or not cache_objects.is_cached(service):
        return ()
    wanted = service.spec.model.revision or DEFAULT_REF
    label = cache_objects.revision_label(service)
    by_kind_name = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in observed}
    found: list[RolloutHold] = []
    for tier_plan in plan.feasible_tiers:
        kind = LEADER_WORKER_SET if tier_plan.nodes_per_replica > 1 else DEPLOYMENT
        workload = next(
            (
                o
                for o in observed
                if (o.get("apiVersion"), o.get("kind")) == kind and _tier_of(o) == tier_plan.name
            ),
            None,
        )
        if workload is None:
            # A new tier, or a new kind of workload for it (the old one serves meanwhile,
            # reconcile.kindswitch): its pods wait in their init container like any first start.
            continue
        current = serving_revision(workload)
        if current is None or current == wanted:
            continue
        replicas = int((workload.get("spec") or {}).get("replicas") or 0)
        ds_name = cache_objects.daemonset_name(service.name, tier_plan.name)
        daemonset = by_kind_name.get(("DaemonSet", ds_name))
        tier_pods = [p for p in pods if _tier_of(p) == tier_plan.name]
        report = readiness.tier_report(tier_plan.name, label, daemonset, tier_pods, nodes)
        if replicas == 0 or report.nodes_eligible == 0:
            continue
        if readiness.may_roll_out(report):
            continue
        found.append(
            RolloutHold(
                tier=tier_plan.name,
                serving_revision=current,
                wanted_revision=wanted,
                nodes_ready=report.nodes_ready,
                nodes_eligible=report.nodes_eligible,
            )
        )
    return tuple(found)
