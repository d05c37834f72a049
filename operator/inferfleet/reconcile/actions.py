"""What the reconciler asks the executor to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from inferfleet.kubedata import ObjectRef, ref_of


@dataclass(frozen=True)
class Apply:
    """Create this object (`create`: POST, which fails if an object of that name exists,
    so nothing someone else made is ever taken over), or server-side apply it over the
    one we own (`update`: `metadata.uid` carries the observed uid, so a same-named object
    made since we looked is refused, not taken over)."""

    obj: dict[str, Any]
    why: Literal["create", "update"]

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
    # The observed object's uid: a same-named object made since is not deleted.
    uid: str | None = None

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


@dataclass(frozen=True)
class Claim:
    """Make our applies the only owner of an owned object's fields: one created with POST
    whose managedFields still hold our Update entry (the claim right after the create
    did not finish), so that a field we stop declaring would stay."""

    ref: ObjectRef
    uid: str
    why: str = "claim the fields of"

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


Action = Apply | Delete | Claim
