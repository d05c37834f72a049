"""What the reconciler asks the executor to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from inferfleet.kubedata import ObjectRef, ref_of


@dataclass(frozen=True)
class Apply:
    """Server-side apply this object (create it, or bring it back to what we declare)."""

    obj: dict[str, Any]
    why: Literal["create", "update"]

    @property
    def ref(self) -> ObjectRef:
        return ref_of(self.obj)

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


@dataclass(frozen=True)
class Create:
    """Create this object (POST): where it already exists, whoever made it, nothing is
    written and the pass reports it, so the operator never takes an object over."""

    obj: dict[str, Any]
    why: str = "create"

    @property
    def ref(self) -> ObjectRef:
        return ref_of(self.obj)

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


@dataclass(frozen=True)
class Delete:
    """Delete an object the InferenceService no longer declares (a removed tier)."""

    ref: ObjectRef
    why: str = "prune"

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


Action = Apply | Create | Delete
