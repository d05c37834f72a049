"""A tier whose workload changes kind is replaced make-before-break (pure).

A tier runs as a Deployment while one replica fits on one node and as a LeaderWorkerSet
when a replica spans several (render.service_objects.workload); a new GPU, model or
override can move it across, either way. Both kinds carry the tier's name, its labels
and the serving labels on the pods that serve HTTP (Deployment pods, LeaderWorkerSet
leaders), so the tier's Service, its PodDisruptionBudget and the front door's
InferencePool select the serving pods of either kind.

The new workload is created beside the old one, starting at the old one's replicas (the
autoscaler's last word on the load; never below the warm minimum), and the autoscaler
scales it from then on (`preferred`). The old one is left as it is, serving, until the
new one has as many Ready replicas as the old one serves with: at least one, at most what
the new one is asked to run. Fewer would drop capacity the load was scaled for; more
could wait for ever after the autoscaler scales the new one down. Only then is the old
one deleted. An old workload with no replica serves nothing and goes at once.

Each pass decides this from what it observes (both workloads and their Ready counts),
so an operator restarted halfway continues the switch where it was. On a cluster with no
room for both, the switch waits, and status says for what.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferfleet.api import labels
from inferfleet.kubedata import (
    DEPLOYMENT,
    LEADER_WORKER_SET,
    ObjectRef,
    labels_of,
    ready_replicas_of,
    ref_of,
    replicas_of,
)


@dataclass(frozen=True)
class KindSwitch:
    """One tier moving from the workload `old` to the workload `new` (another kind)."""

    tier: str
    old: ObjectRef
    new: ObjectRef
    old_ready: int  # Ready replicas of the old workload, serving meanwhile
    new_desired: int  # replicas the new workload runs (or is created with)
    new_ready: int  # Ready replicas of the new workload (0 before it exists)
    created: bool  # the new workload exists (observed before this pass)

    @property
    def needed(self) -> int:
        """Ready replicas of the new workload before the old one may go."""
        return min(self.new_desired, max(1, self.old_ready))

    @property
    def done(self) -> bool:
        """The old workload may be deleted now."""
        return self.needed == 0 or (self.created and self.new_ready >= self.needed)

    def describe(self, new_ready: int | None = None) -> str:
        """Status words: where the switch stands (`new_ready`: a newer count than observed)."""
        ready = self.new_ready if new_ready is None else new_ready
        return (
            f"moving from {self.old.kind} to {self.new.kind}: {ready}/{self.needed} "
            f"{self.new.kind} replicas Ready; the {self.old.kind} serves {self.old_ready} until then"
        )

    def started_message(self) -> str:
        return (
            f"tier {self.tier} moves from {self.old.kind} to {self.new.kind}; the {self.old.kind} keeps "
            f"serving until the {self.new.kind} has {self.needed} Ready replica(s)"
        )

    def at_once_message(self) -> str:
        return (
            f"tier {self.tier} moves from {self.old.kind} to {self.new.kind}; the {self.old.kind} "
            "served no replica and was removed at once"
        )

    def finished_message(self) -> str:
        return (
            f"tier {self.tier} moved from {self.old.kind} to {self.new.kind}: the {self.new.kind} has "
            f"{self.new_ready}/{self.needed} Ready replica(s); the {self.old.kind} was removed"
        )


def _tier(obj: Mapping[str, Any]) -> str | None:
    return labels_of(obj).get(labels.LABEL_TIER)


def _workloads_by_tier(objects: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    found: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        tier = _tier(obj)
        if tier is not None and ref_of(obj).is_workload:
            found.setdefault(tier, []).append(obj)
    return found


def start_replicas(rendered: Mapping[str, Any], old: Mapping[str, Any]) -> int:
    """Replicas a replacing workload is created with: the old one's, at least the warm
    minimum the render asked for."""
    return max(replicas_of(rendered) or 0, replicas_of(old) or 0)


def switches(
    desired: Sequence[Mapping[str, Any]], observed: Sequence[Mapping[str, Any]]
) -> tuple[KindSwitch, ...]:
    """Every tier whose rendered workload is of another kind than an owned one of it."""
    wanted = _workloads_by_tier(desired)
    running = _workloads_by_tier(observed)
    existing = {ref_of(obj): obj for obj in observed}
    found: list[KindSwitch] = []
    for tier, rendered_list in sorted(wanted.items()):
        rendered = rendered_list[0]
        new = ref_of(rendered)
        current = existing.get(new)
        for old in running.get(tier, []):
            if ref_of(old).kind == new.kind:
                continue
            found.append(
                KindSwitch(
                    tier=tier,
                    old=ref_of(old),
                    new=new,
                    old_ready=ready_replicas_of(old) if replicas_of(old) else 0,
                    new_desired=(replicas_of(current) or 0) if current else start_replicas(rendered, old),
                    new_ready=ready_replicas_of(current) if current else 0,
                    created=current is not None,
                )
            )
    return tuple(found)


def with_start_replicas(
    desired: Sequence[Mapping[str, Any]], found: Sequence[KindSwitch]
) -> list[Mapping[str, Any]]:
    """`desired` with each replacing workload not created yet starting at its switch's
    replicas (an existing one keeps the autoscaler's, as every workload does)."""
    starts = {switch.new: switch.new_desired for switch in found if not switch.created}
    out: list[Mapping[str, Any]] = []
    for obj in desired:
        replicas = starts.get(ref_of(obj))
        if replicas is None or replicas == replicas_of(obj):
            out.append(obj)
            continue
        out.append({**obj, "spec": {**obj["spec"], "replicas": replicas}})
    return out


def kept(found: Sequence[KindSwitch]) -> frozenset[ObjectRef]:
    """The old workloads that keep serving through this pass."""
    return frozenset(switch.old for switch in found if not switch.done)


def preferred(workloads: Sequence[Mapping[str, Any]], multi_node: bool | None) -> Mapping[str, Any]:
    """Of one tier's workloads (one at least), the one to scale and report: the kind the
    plan renders (a LeaderWorkerSet when `multi_node`), else the only one there is."""
    if multi_node is not None:
        api_version, kind = LEADER_WORKER_SET if multi_node else DEPLOYMENT
        for obj in workloads:
            if (obj.get("apiVersion"), obj.get("kind")) == (api_version, kind):
                return obj
    return sorted(workloads, key=ref_of)[-1]
