"""The port: everything the operator asks of the API server, and nothing more.

Reads return plain dicts (the objects as the API server serves them); writes take plain
dicts. Every write goes through the one field manager `labels.FIELD_MANAGER`, except
`scale`, which is the autoscaler's and uses `SCALE_FIELD_MANAGER` so `managedFields`
tells who last set the replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from inferfleet.api import labels
from inferfleet.kubedata import ObjectRef

SCALE_FIELD_MANAGER = f"{labels.FIELD_MANAGER}-scale"

EventType = Literal["Normal", "Warning"]


class Cluster(Protocol):
    """What the reconciler, the handlers and the autoscaler may do to a cluster."""

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        """Server-side apply `obj` as `labels.FIELD_MANAGER`; returns the stored object.

        `force` takes fields over from other managers (a human's `kubectl edit`): the
        operator is the declared owner of what it renders. An apply also creates, and it
        takes over an object someone else made (its labels, owner references, every field
        whose value agrees): use it only on objects the operator owns, with their
        `metadata.uid`, which makes the write fail with `Replaced` when the object at that
        name is another one. A `metadata.resourceVersion` in `obj` makes the write
        conditional (409 Conflict when the object moved on).
        """
        ...

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` (POST); `AlreadyExists` when an object of that name exists, whoever
        made it: the one way to write an object the operator does not own yet that can
        never take another's over. Returns the stored object."""
        ...

    def claim_fields(
        self, ref: ObjectRef, *, uid: str, current: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Before the first apply to an object made with `create`: hand the fields the POST
        gave `labels.FIELD_MANAGER` (an Update entry of managedFields) to its Apply entry,
        so that applies own them alone and a field they stop sending goes
        (`kubedata.claimed_managed_fields`). Conditional on `uid` (`Replaced` otherwise)
        and on the resourceVersion it read (`current`, the object as observed, when given;
        read again after a 409). Returns the stored object."""
        ...

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the whole object (PUT), conditional on its `metadata.resourceVersion`.

        For objects several writers race on (the leader-election Lease): a stale
        resourceVersion answers 409 Conflict, so exactly one of two writers wins.
        """
        ...

    def list(
        self, api_version: str, kind: str, namespace: str | None, selector: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """Objects of a kind whose labels equal every selector entry (namespace None: all)."""
        ...

    def delete(self, ref: ObjectRef, *, uid: str | None = None) -> bool:
        """Delete with background propagation (dependents follow); False if already gone.
        With `uid`, only that object: `Replaced` when the one at that name is another."""
        ...

    def scale(self, ref: ObjectRef, replicas: int) -> None:
        """Set a workload's replicas through its scale subresource."""
        ...

    def patch_status(
        self, ref: ObjectRef, status: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """JSON merge-patch the status subresource, conditional on `resource_version` if given."""
        ...

    def annotate(self, ref: ObjectRef, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        """Merge-patch annotations (None removes one)."""
        ...

    def create_event(
        self, regarding: Mapping[str, Any], *, type_: EventType, reason: str, message: str
    ) -> None:
        """Record a core/v1 Event about `regarding` (an object dict with uid)."""
        ...
