"""The one module that writes the objects an InferenceService owns, and only those.

Creates, claims and applies run in render's order (Services before workloads), then
deletes. A transient error stops the pass and propagates: the whole pass is retried with
backoff, and since every write is idempotent and names are deterministic, a retry (or a
restarted operator) converges without duplicates. A permanent error on one object is
recorded and the pass goes on, so one bad tier does not block the others.

An object the InferenceService does not own is never written. A missing object is
created with POST, which fails when an object of that name exists (an apply would take
it over: its labels, its owner references, every field whose value agrees); the
executor then looks at what is there and, unless it is ours, records a conflict
(`Report.conflicts`: status says Degraded/ObjectConflict) and goes on with the others.
Every write to an owned object carries its observed uid, so one deleted and made again
by someone else since is not taken over either, nor pruned. The first apply to an object
made with POST is preceded by a claim of its fields (diff's `Claim`), so a field the
applies stop sending goes as it would from an object made by an apply.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import safe_text
from inferfleet.cluster import (
    AlreadyExists,
    Cluster,
    KindNotServed,
    NotFound,
    PermanentApiError,
    Replaced,
    TransientApiError,
)
from inferfleet.kubedata import ObjectRef, owner_uids, ref_of, replicas_of
from inferfleet.reconcile.actions import Action, Apply, Claim, Create, Delete
from inferfleet.reconcile.diff import carry_replicas

logger = logging.getLogger(__name__)

# Kinds whose absence (CRD not installed) degrades the service instead of failing it.
OPTIONAL_KINDS = frozenset(
    {
        ("monitoring.coreos.com/v1", "PodMonitor"),
        # Without the Gateway API and Inference Extension CRDs the service is still served
        # through its Services; Degraded says the front door is missing.
        ("inference.networking.k8s.io/v1", "InferencePool"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    }
)


@dataclass
class Report:
    """What an execution did."""

    applied: dict[ObjectRef, dict[str, Any]] = field(default_factory=dict)
    deleted: list[ObjectRef] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # Objects of a name we render that someone else made: left alone, in words.
    conflicts: list[str] = field(default_factory=list)


def execute(cluster: Cluster, actions: Sequence[Action]) -> Report:
    report = Report()
    for action in actions:
        ref = action.ref
        try:
            if isinstance(action, Apply):
                if action.why == "create":
                    stored = _create(cluster, action.obj, report)
                else:
                    stored = _update(cluster, _after_claim(action.obj, report), report)
                if stored is not None:
                    report.applied[ref] = stored
            elif isinstance(action, Claim):
                _claim(cluster, action, report)
            elif isinstance(action, Create):
                try:
                    report.applied[ref] = cluster.create(action.obj)
                except AlreadyExists:
                    # Made since we looked (a pass of another service of the namespace):
                    # the next pass reads it and judges it, never taking it over.
                    logger.info("%s already exists; left for the next pass to judge", ref)
            else:
                assert isinstance(action, Delete)
                _delete(cluster, action, report)
            logger.info("%s", action, extra={"object": str(ref)})
        except KindNotServed as error:
            if (ref.api_version, ref.kind) in OPTIONAL_KINDS:
                report.skipped.append(f"{ref.kind} ({ref.api_version}) is not served by this cluster")
            else:
                line = f"{action}: {ref.kind} ({ref.api_version}) is not served: {error}"
                report.failures.append(safe_text.failure_line(line))
        except PermanentApiError as error:
            report.failures.append(safe_text.failure_line(f"{action}: {error}"))
        except NotFound as error:  # gone between two calls of one write: look again
            raise TransientApiError(f"{action}: {error}", error.status) from error
    return report


def _create(cluster: Cluster, obj: Mapping[str, Any], report: Report) -> dict[str, Any] | None:
    ref = ref_of(obj)
    try:
        created = cluster.create(obj)
    except AlreadyExists:
        existing = cluster.get(ref)
        if existing is None:
            raise TransientApiError(f"{ref} was deleted while it was being created; retrying") from None
        return _found(cluster, obj, existing, report)
    # Its fields stay in the POST's Update entry until its first update claims them
    # (diff's Claim): an object never changed again costs no second write.
    return created


def _update(cluster: Cluster, obj: Mapping[str, Any], report: Report) -> dict[str, Any] | None:
    try:
        return cluster.apply(obj)
    except Replaced:
        ref = ref_of(obj)
        existing = cluster.get(ref)
        if existing is None:
            raise TransientApiError(f"{ref} is gone since it was read; retrying") from None
        unconditional = {k: v for k, v in obj["metadata"].items() if k not in {"uid", "resourceVersion"}}
        return _found(cluster, {**obj, "metadata": unconditional}, existing, report)


def _claim(cluster: Cluster, action: Claim, report: Report) -> None:
    try:
        report.applied[action.ref] = cluster.claim_fields(action.ref, uid=action.uid, current=action.observed)
    except Replaced:
        # Another object now; the update that follows finds it and reports it.
        logger.info("%s: not claimed: the object at that name is not the one observed", action.ref)


def _after_claim(obj: Mapping[str, Any], report: Report) -> Mapping[str, Any]:
    """A workload's update after its claim in this pass: the claim moved its
    resourceVersion on, so the update carries the claimed one, as long as the claimed
    object still has the replicas the update carries back (the resourceVersion guards the
    autoscaler's value; a scale in between still makes the update a 409)."""
    claimed = report.applied.get(ref_of(obj))
    version = obj["metadata"].get("resourceVersion")
    if claimed is None or version is None:
        return obj
    if replicas_of(claimed) != replicas_of(obj):
        return obj
    metadata = {**obj["metadata"], "resourceVersion": claimed["metadata"]["resourceVersion"]}
    return {**obj, "metadata": metadata}


def _delete(cluster: Cluster, action: Delete, report: Report) -> None:
    try:
        if cluster.delete(action.ref, uid=action.uid):
            report.deleted.append(action.ref)
    except Replaced:
        # Not the object we observed (and owned): someone else's now, and nothing we want.
        logger.info("%s: not pruned: the object at that name is not the one observed", action.ref)


def _controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference render put on `obj`: the InferenceService."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            found: Mapping[str, Any] = owner
            return found
    return None


def _found(
    cluster: Cluster, obj: Mapping[str, Any], existing: Mapping[str, Any], report: Report
) -> dict[str, Any] | None:
    """An object with `obj`'s name exists and was not observed as ours: ours after all
    (its label was taken off), one on its way out, or someone else's."""
    ref = ref_of(obj)
    metadata = existing.get("metadata") or {}
    ours = _controller_ref(obj)
    if ours is not None and str(ours.get("uid")) in owner_uids(existing):
        # Ours, but someone took its service label off: apply over it like any owned object.
        if ref.is_workload:
            body = carry_replicas(obj, existing)  # the autoscaler's replicas stay
        else:
            body = {**obj, "metadata": dict(obj["metadata"])}
        body["metadata"]["uid"] = metadata.get("uid")
        return cluster.apply(body)
    if metadata.get("deletionTimestamp") or (ours is not None and _earlier_incarnation(existing, ours)):
        # An InferenceService of this name deleted a moment ago: its objects go with it.
        raise TransientApiError(f"{ref} is still being deleted with an earlier InferenceService of this name")
    report.conflicts.append(safe_text.failure_line(conflict_message(ref, existing)))
    logger.warning("%s exists and is not ours: left alone", ref)
    return None


def _earlier_incarnation(existing: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Owned by an InferenceService of our name with another uid: the garbage collector
    removes it (an owner that no longer exists), so waiting is all it takes."""
    identity = (ours.get("apiVersion"), ours.get("kind"), ours.get("name"))
    return any(
        (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) == identity
        and owner.get("uid") != ours.get("uid")
        for owner in (existing.get("metadata") or {}).get("ownerReferences") or []
    )


def conflict_message(ref: ObjectRef, existing: Mapping[str, Any]) -> str:
    """Which object is in the way, whose it looks like, and what to do about it."""
    metadata = existing.get("metadata") or {}
    owners = [f"{o.get('kind')} {o.get('name')}" for o in metadata.get("ownerReferences") or []]
    entries = metadata.get("managedFields") or []
    managers = sorted({str(e.get("manager")) for e in entries if e.get("manager")})
    whose = f"owned by {', '.join(owners)}" if owners else "no owner reference"
    if managers:
        whose += f"; written by {', '.join(managers[:3])}"
    return (
        f"{ref.kind} {ref.namespace}/{ref.name} exists and is not this InferenceService's ({whose}): "
        "the operator leaves it as it is. Delete or rename it, or rename this InferenceService "
        "(its objects are named after it)"
    )
