"""Whether a namespace's node-cache claim and volume are there, and what to create. Pure.

The objects themselves, and why the node cache is a volume per namespace, are in
`caching.precache.volumes`. Rules: create what is missing; replace a volume an earlier
namespace of the same name left (another uid, so another tree: it can never bind the
new claim); never modify a claim or volume inferfleet did not make (a conflict the
status names). Claims and volumes are never pruned with a service: other services of
the namespace use them, and the weights outlive them all (`Retain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from inferfleet.api import labels
from inferfleet.caching.precache.volumes import COMPONENT_NODE_CACHE, NodeCacheVolume
from inferfleet.reconcile.actions import Action, Create, Delete

REASON_VOLUME_PENDING: Final = "NodeCacheVolumePending"
REASON_VOLUME_MISSING: Final = "NodeCacheVolumeMissing"
REASON_VOLUME_CONFLICT: Final = "NodeCacheVolumeConflict"


@dataclass(frozen=True)
class ObservedVolume:
    """What a pass read of one namespace's node-cache claim and volume.

    `volume` and `namespace_uid` are only read while the claim is not bound (a bound
    claim needs nothing more); `namespace_uid` is None where the operator does not
    provision volumes."""

    claim: Mapping[str, Any] | None
    volume: Mapping[str, Any] | None = None
    namespace_uid: str | None = None


@dataclass(frozen=True)
class VolumeVerdict:
    """What to do about the volume, and what CacheReady says while it is not usable."""

    actions: tuple[Action, ...]
    ready: bool
    reason: str | None = None
    message: str | None = None


def _phase(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return None
    return str((obj.get("status") or {}).get("phase") or "") or None


def _ours(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    found = meta.get("labels") or {}
    return bool(
        found.get(labels.LABEL_MANAGED_BY) == labels.MANAGED_BY_VALUE
        and found.get(labels.LABEL_COMPONENT) == COMPONENT_NODE_CACHE
    )


def _host_path(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("spec") or {}).get("hostPath") or {}).get("path")


def _claimed_by(obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
    ref = (obj.get("spec") or {}).get("claimRef") or {}
    return ref.get("namespace"), ref.get("name")


def ensure(wanted: NodeCacheVolume, observed: ObservedVolume, *, provision: bool) -> VolumeVerdict:
    """Create what is missing, replace a volume left by an earlier namespace of the same
    name, and never touch a claim or volume inferfleet did not make (a conflict)."""
    claim = observed.claim
    where = f"PersistentVolumeClaim {wanted.namespace}/{wanted.claim}"
    if claim is not None and not _ours(claim):
        return VolumeVerdict(
            (),
            False,
            REASON_VOLUME_CONFLICT,
            f"{where} exists and was not made by inferfleet: the node cache is mounted only through "
            "the claim inferfleet makes. Rename or delete that claim",
        )
    if claim is not None and _phase(claim) == "Bound":
        return VolumeVerdict((), True)
    if not provision:
        if claim is None:
            return VolumeVerdict(
                (),
                False,
                REASON_VOLUME_MISSING,
                f"{where} does not exist; this operator does not create node-cache volumes (namespace-only "
                f"install): a cluster admin creates them with `inferfleet cache volumes --namespace "
                f"{wanted.namespace} --node-path {wanted.node_path} | kubectl apply -f -`",
            )
        return VolumeVerdict((), False, REASON_VOLUME_PENDING, f"waiting for {where} to bind")
    if observed.namespace_uid is None:
        return VolumeVerdict(
            (),
            False,
            REASON_VOLUME_PENDING,
            f"{where}: the namespace {wanted.namespace} could not be read (its uid names the volume's tree)",
        )
    actions: list[Action] = []
    volume = observed.volume
    if volume is not None and not _ours(volume):
        return VolumeVerdict(
            (),
            False,
            REASON_VOLUME_CONFLICT,
            f"PersistentVolume {wanted.volume} exists and was not made by inferfleet; "
            "a cluster admin must rename or delete it",
        )
    stale = volume is not None and (
        _host_path(volume) != wanted.host_path or _claimed_by(volume) != (wanted.namespace, wanted.claim)
    )
    if stale and _phase(volume) != "Bound":
        # Left by an earlier namespace of this name (another uid, so another tree): it can
        # never bind the new claim. The host directory stays on the nodes (Retain).
        uid = str(((volume or {}).get("metadata") or {}).get("uid") or "") or None
        actions.append(Delete(wanted.volume_ref, "replace the stale", uid=uid))
        volume = None
    elif stale:
        return VolumeVerdict(
            (),
            False,
            REASON_VOLUME_CONFLICT,
            f"PersistentVolume {wanted.volume} is bound but points at {_host_path(volume or {})!r}, "
            f"not {wanted.host_path!r}",
        )
    if volume is None:
        actions.append(Create(wanted.persistent_volume()))
    if claim is None:
        actions.append(Create(wanted.persistent_volume_claim()))
    return VolumeVerdict(
        tuple(actions),
        False,
        REASON_VOLUME_PENDING,
        f"waiting for {where} to bind PersistentVolume {wanted.volume} (the namespace's tree of the node "
        f"cache, {wanted.host_path} on every node)",
    )
