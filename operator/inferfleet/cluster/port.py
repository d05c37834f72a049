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
        operator is the declared owner of what it renders. A `metadata.resourceVersion`
        in `obj` makes the write conditional (409 Conflict when the object moved on).
        """
        ...

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` (POST); 409 Conflict when it already exists. Returns the stored object."""
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

    def delete(self, ref: ObjectRef) -> bool:
        """Delete with background propagation (dependents follow); False if already gone."""
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
