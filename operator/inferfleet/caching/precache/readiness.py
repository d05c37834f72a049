"""CacheReady: per tier, how many eligible nodes hold the wanted revision. Pure.

Input is what the operator observes: the tier's pre-cache DaemonSet (its status counts
the eligible nodes), its pods (label `inferfleet.dev/cache-revision` says which revision
set they fetch, readiness says they have it, termination messages say why not), and
optionally the names of the nodes that exist (a pod bound to a node that is gone does
not count). For cache.mode pvc the one Job stands for "one node".

The condition's reason is the fetchers' own failure reason when one is failing
(BadCredentials, SourceUnreachable, DiskFull, ChecksumMismatch, ...), so the message a
person reads in `kubectl describe ifs` already says what to fix. A tier whose DaemonSet
the controller has counted at zero nodes has no node of its GPU (and capacity) type at
all: NoEligibleNodes names the tier and the node labels its pods look for, read from the
DaemonSet's own pod template, and `status.cache[].nodesWanted` carries them for the
autoscaler (Scaling) and the Ready condition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from inferfleet.api import InferenceService, Plan, TierCache, labels
from inferfleet.caching.precache import workloads as objects
from inferfleet.caching.precache.fetch_errors import REASONS
from inferfleet.caching.precache.workloads import LABEL_CACHE_REVISION
from inferfleet.catalog import placement

REASON_READY: Final = "CacheReady"
REASON_FETCHING: Final = "Fetching"
# A new revision is being fetched and at least one tier's rollout waits for it.
REASON_FETCHING_REVISION: Final = "FetchingRevision"
REASON_NO_NODES: Final = "NoEligibleNodes"
REASON_DISABLED: Final = "CacheDisabled"
REASON_PENDING: Final = "PreCachePending"
REASON_FAILED: Final = "FetchFailed"
REASON_UNSCHEDULABLE: Final = "Unschedulable"


@dataclass(frozen=True)
class TierCacheReport:
    tier: str
    nodes_ready: int
    nodes_eligible: int
    revision: str
    failures: Mapping[str, int] = field(default_factory=dict)  # reason → pods
    example: str | None = None  # one failure message, verbatim
    nodes_gone: int = 0
    # The DaemonSet controller has counted the eligible nodes of the current template (a
    # DaemonSet just created or changed reports 0 until it has).
    counted: bool = False
    # The node labels the tier's pods look for (catalog.placement.selector_text).
    wanted: str = ""

    @property
    def ready(self) -> bool:
        return self.nodes_eligible > 0 and self.nodes_ready >= self.nodes_eligible

    @property
    def no_nodes(self) -> bool:
        """No node in the cluster matches the tier's placement (counted, not assumed)."""
        return self.counted and self.nodes_eligible == 0

    def status(self) -> TierCache:
        return TierCache(
            tier=self.tier,
            nodes_ready=self.nodes_ready,
            nodes_eligible=self.nodes_eligible,
            revision=self.revision,
            nodes_wanted=self.wanted if self.no_nodes else None,
        )

    def describe(self) -> str:
        if self.no_nodes:
            return f"{self.tier}: no node matches its placement (nodes with {self.wanted})"
        text = f"{self.tier}: {self.nodes_ready}/{self.nodes_eligible} nodes"
        if self.failures:
            text += " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(self.failures.items())) + ")"
        if self.nodes_gone:
            text += f" ({self.nodes_gone} pod(s) on nodes that are gone)"
        return text


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _failure(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a failing pre-cache pod, from its containers' last exit."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return REASON_UNSCHEDULABLE, str(condition.get("message") or "")
    for container in status.get("containerStatuses") or []:
        for state_key in ("state", "lastState"):
            terminated = (container.get(state_key) or {}).get("terminated")
            if terminated and terminated.get("exitCode", 0) != 0:
                message = str(terminated.get("message") or "").strip()
                reason = message.split(":", 1)[0] if message else ""
                if reason not in REASONS:
                    reason = REASON_FAILED
                return reason, message or str(terminated.get("reason") or "container failed")
    return None


def tier_report(
    tier: str,
    revision: str,
    daemonset: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    nodes: Collection[str] | None = None,
) -> TierCacheReport:
    """One tier's cache state from its DaemonSet and pre-cache pods."""
    if daemonset is None:
        return TierCacheReport(tier=tier, nodes_ready=0, nodes_eligible=0, revision=revision)
    ds_status = daemonset.get("status") or {}
    eligible = int(ds_status.get("desiredNumberScheduled") or 0)
    generation = (daemonset.get("metadata") or {}).get("generation")
    observed = ds_status.get("observedGeneration")
    counted = observed is not None and (generation is None or int(observed) >= int(generation))
    pod_spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    wanted = placement.selector_text(pod_spec.get("nodeSelector"), pod_spec.get("affinity"))
    ready = 0
    gone = 0
    failures: Counter[str] = Counter()
    example = None
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if nodes is not None and node is not None and node not in nodes:
            gone += 1
            continue
        current = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_CACHE_REVISION) == revision
        if current and _pod_ready(pod):
            ready += 1
            continue
        failed = _failure(pod)
        if failed is not None and not _pod_ready(pod):
            failures[failed[0]] += 1
            example = example or failed[1]
    return TierCacheReport(
        tier=tier,
        nodes_ready=min(ready, eligible) if eligible else ready,
        nodes_eligible=eligible,
        revision=revision,
        failures=dict(failures),
        example=example,
        nodes_gone=gone,
        counted=counted,
        wanted=wanted,
    )


def job_report(
    tier: str, revision: str, job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> TierCacheReport:
    """cache.mode pvc: the shared claim is "one node", ready once the Job succeeded."""
    if job is None:
        return TierCacheReport(tier=tier, nodes_ready=0, nodes_eligible=1, revision=revision)
    succeeded = int((job.get("status") or {}).get("succeeded") or 0) > 0
    failures: Counter[str] = Counter()
    example = None
    if not succeeded:
        for pod in pods:
            failed = _failure(pod)
            if failed is not None:
                failures[failed[0]] += 1
                example = example or failed[1]
    return TierCacheReport(
        tier=tier,
        nodes_ready=1 if succeeded else 0,
        nodes_eligible=1,
        revision=revision,
        failures=dict(failures),
        example=example,
    )


@dataclass(frozen=True)
class CacheCondition:
    status: str  # "True" | "False"
    reason: str
    message: str
    tiers: tuple[TierCache, ...]


def condition(
    reports: Sequence[TierCacheReport], enabled: bool = True, held: Sequence[str] = ()
) -> CacheCondition:
    """The service-wide CacheReady condition and `status.cache` from per-tier reports.

    `held` describes the tiers whose rollout waits for a new revision (reconcile.rollout):
    the condition is then False with FetchingRevision, unless a fetcher is failing, whose
    reason says better what to fix."""
    if not enabled:
        return CacheCondition(
            "True", REASON_DISABLED, "weight pre-caching is off (cache.mode none or a local path)", ()
        )
    tiers = tuple(report.status() for report in reports)
    if not reports:
        return CacheCondition("False", REASON_PENDING, "no tier to cache for yet", tiers)
    summary = "; ".join(report.describe() for report in reports)
    waiting = f"; rollout held: {'; '.join(held)}" if held else ""
    if all(report.ready for report in reports) and not held:
        return CacheCondition(
            "True", REASON_READY, f"weights cached on every eligible node: {summary}", tiers
        )
    failures: Counter[str] = Counter()
    for report in reports:
        failures.update(report.failures)
    if failures:
        reason = failures.most_common(1)[0][0]
        example = next(r.example for r in reports if r.failures and r.example)
        return CacheCondition("False", reason, f"{summary}. {example}{waiting}", tiers)
    missing = [report.tier for report in reports if report.no_nodes]
    if missing:
        # Nothing will fetch (or serve) there until a node of that type joins: saying
        # "Fetching 0/0" would send a person looking at the fetchers.
        return CacheCondition(
            "False",
            REASON_NO_NODES,
            f"no node for tier(s) {', '.join(missing)}: {summary}; pre-cache pods follow nodes as "
            f"they join{waiting}",
            tiers,
        )
    if held:
        return CacheCondition(
            "False", REASON_FETCHING_REVISION, f"fetching a new revision: {summary}{waiting}", tiers
        )
    return CacheCondition("False", REASON_FETCHING, f"fetching: {summary}", tiers)


def may_roll_out(report: TierCacheReport) -> bool:
    """Whether a tier's workload may move to the report's revision: every eligible node
    holds it. The scheduler does not know which nodes do, so a replica of the new template
    (the rollout's, or any later scale-up's) may land on any eligible node; only then does
    each one start from local NVMe instead of waiting in its init container for a fetch."""
    return report.ready


def for_service(
    service: InferenceService,
    plan: Plan | None,
    observed: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    nodes: Collection[str] | None = None,
    *,
    held: Sequence[str] = (),
) -> CacheCondition:
    """CacheReady for a whole InferenceService from the objects a reconcile pass observed
    (its DaemonSets or Job) and the pre-cache pods listed by label; `held` as in `condition`."""
    if not objects.is_cached(service):
        return condition([], enabled=False)
    revision = objects.revision_label(service)
    feasible = (
        [t.name for t in plan.feasible_tiers] if plan is not None else [t.name for t in service.spec.tiers]
    )
    by_name = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in observed}
    reports: list[TierCacheReport] = []
    if objects.cache_mode(service) == "pvc":
        job = by_name.get(("Job", objects.job_name(service)))
        reports = [job_report(tier, revision, job, pods) for tier in feasible]
    else:
        for tier in feasible:
            daemonset = by_name.get(("DaemonSet", objects.daemonset_name(service.name, tier)))
            tier_pods = [
                p
                for p in pods
                if ((p.get("metadata") or {}).get("labels") or {}).get(labels.LABEL_TIER) == tier
            ]
            reports.append(tier_report(tier, revision, daemonset, tier_pods, nodes))
    return condition(reports, held=held)


def eligible_nodes(service: InferenceService, observed: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per tier, the eligible nodes its pre-cache DaemonSet counted for its current
    template (a tier whose DaemonSet has not counted them yet is left out)."""
    if not objects.needs_node_volume(service):
        return {}
    by_name = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in observed}
    found: dict[str, int] = {}
    for tier in service.spec.tiers:
        daemonset = by_name.get(("DaemonSet", objects.daemonset_name(service.name, tier.name)))
        if daemonset is not None and tier_report(tier.name, "", daemonset, []).counted:
            found[tier.name] = int((daemonset.get("status") or {}).get("desiredNumberScheduled") or 0)
    return found
