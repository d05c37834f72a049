"""Base model and helpers shared by every API type."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

CEL_KEY = "x-kubernetes-validations"


def wire_name(field_name: str) -> str:
    """snake_case → camelCase, keeping unit suffixes readable (`budget_gib` → `budgetGiB`)."""
    return to_camel(field_name).replace("Gib", "GiB")


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are an error.

    Rejecting unknown fields turns a typo (`minReplica`) into a message naming the field
    instead of a setting that is silently ignored.
    """

    model_config = ConfigDict(
        alias_generator=wire_name,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
        use_enum_values=True,
        # NaN and infinity pass numeric bounds in surprising ways (every comparison with
        # NaN is false) and break JSON on the way out: refused everywhere, with the path.
        allow_inf_nan=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as it appears in Kubernetes: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One CEL `x-kubernetes-validations` entry; the pydantic validator beside it mirrors it."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    return entry


def schema_extra(*rules: dict[str, str], **extra: Any) -> dict[str, Any]:
    """`json_schema_extra` carrying CEL rules and other Kubernetes extensions."""
    out: dict[str, Any] = dict(extra)
    if rules:
        out[CEL_KEY] = list(rules)
    return out
