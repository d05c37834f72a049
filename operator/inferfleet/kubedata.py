"""Kubernetes objects as plain data (pure): references, labels, owners, replicas.

`ObjectRef` names one object; it is the currency between the pure reconcile core and
the cluster port, so it lives in this neutral module below both: the port no longer
imports the core to name an object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# apiVersion/kind of the workloads whose `spec.replicas` the autoscaler owns.
DEPLOYMENT = ("apps/v1", "Deployment")
LEADER_WORKER_SET = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
WORKLOAD_KINDS: frozenset[tuple[str, str]] = frozenset({DEPLOYMENT, LEADER_WORKER_SET})

# How the operator writes times into status and events (RFC 3339, whole seconds, UTC).
KUBE_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def kube_time(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, tz=dt.UTC).strftime(KUBE_TIME_FORMAT)


def parse_kube_time(text: object) -> float | None:
    """Seconds since the epoch of a time written as `kube_time` writes it; None otherwise."""
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.strptime(text, KUBE_TIME_FORMAT).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, order=True)
class ObjectRef:
    """apiVersion, kind, namespace and name: enough to find one object."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def is_workload(self) -> bool:
        return (self.api_version, self.kind) in WORKLOAD_KINDS

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


@dataclass(frozen=True)
class Event:
    """A core/v1 Event to record about an object: Normal or Warning, reason, message."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def ref_of(obj: Mapping[str, Any]) -> ObjectRef:
    """The reference of an object dict (apiVersion, kind, metadata.namespace/name)."""
    metadata = obj.get("metadata") or {}
    return ObjectRef(
        api_version=str(obj["apiVersion"]),
        kind=str(obj["kind"]),
        namespace=metadata.get("namespace"),
        name=str(metadata["name"]),
    )


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def owner_uids(obj: Mapping[str, Any]) -> set[str]:
    return {str(owner.get("uid")) for owner in (obj.get("metadata") or {}).get("ownerReferences") or []}


def matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Equality-based label selection, the only kind the operator uses."""
    return all(labels.get(key) == value for key, value in selector.items())


def replicas_of(obj: Mapping[str, Any]) -> int | None:
    value = (obj.get("spec") or {}).get("replicas")
    return int(value) if value is not None else None


def ready_replicas_of(obj: Mapping[str, Any]) -> int:
    return int((obj.get("status") or {}).get("readyReplicas") or 0)


def _merged_fields(into: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """The union of two FieldsV1 sets (nested `f:`/`k:`/`v:`/`i:` maps, `{}` leaves)."""
    out = dict(into)
    for key, value in more.items():
        current = out.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = _merged_fields(dict(current), value)
        elif key not in out:
            out[key] = value
    return out


def claimed_managed_fields(entries: Sequence[Mapping[str, Any]], manager: str) -> list[dict[str, Any]] | None:
    """`metadata.managedFields` with what `manager` owns through Update operations (a
    POST, a merge patch) moved to its Apply entry; None when it owns nothing that way.

    An object created with POST is owned by `(manager, Update)`; a later server-side
    apply by the same manager is another entry, and a field the applier stops sending
    stays while the Update entry still owns it. Merging the two makes the applier the
    only owner, as client-go's csaupgrade does for kubectl's switch to server-side apply.
    Subresource entries (status, scale) are left alone.
    """
    updates = [
        e
        for e in entries
        if e.get("manager") == manager and e.get("operation") == "Update" and not e.get("subresource")
    ]
    if not updates:
        return None
    kept: list[dict[str, Any]] = []
    applied: dict[str, Any] | None = None
    for entry in entries:
        if any(entry is update for update in updates):
            continue
        if entry.get("manager") == manager and entry.get("operation") == "Apply" and applied is None:
            applied = dict(entry)
            kept.append(applied)
        else:
            kept.append(dict(entry))
    if applied is None:
        applied = {key: value for key, value in updates[0].items() if key != "time"}
        applied["operation"] = "Apply"
        applied["fieldsV1"] = {}
        kept.append(applied)
    fields: dict[str, Any] = dict(applied.get("fieldsV1") or {})
    for update in updates:
        fields = _merged_fields(fields, update.get("fieldsV1") or {})
    applied["fieldsV1"] = fields
    applied["fieldsType"] = "FieldsV1"
    return kept
