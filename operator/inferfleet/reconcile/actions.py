"""What the reconciler asks the executor to do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    # The observed object's uid: a same-named object made since is not deleted.
    uid: str | None = None

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


@dataclass(frozen=True)
class Claim:
    """Before the first apply to an object we created with POST: make our applies the only
    owner of its fields. The POST left them in an Update entry of managedFields, and a
    field an apply stops sending would stay while that entry owns it too."""

    ref: ObjectRef
    uid: str
    why: str = "claim the fields of"
    # The object as observed: the claim is conditional on its resourceVersion.
    observed: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.why} {self.ref}"


Action = Apply | Create | Delete | Claim
