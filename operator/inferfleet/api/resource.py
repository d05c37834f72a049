"""The whole `InferenceService` object and the one way to read it from user input."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from inferfleet.api import labels
from inferfleet.api.base import cel
from inferfleet.api.document_bounds import document_problem
from inferfleet.api.spec import InferenceServiceSpec
from inferfleet.api.status import InferenceServiceStatus
from inferfleet.api.yaml_input import load_documents

# Every object the operator creates is named after the InferenceService, so its name must
# be valid wherever it goes: Services need a DNS-1035 label (a letter first, not a digit),
# and `<name>-<tier>` names the workload, whose LeaderWorkerSet controller appends pod
# suffixes and whose `-api`/`-cache` siblings must still fit 63 characters.
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
WORKLOAD_NAME_MAX_CHARS = 52
NAME_MAX_CHARS = WORKLOAD_NAME_MAX_CHARS - 2  # room for "-" and a one-character tier
NAME_MESSAGE = (
    "metadata.name must start with a lowercase letter and hold only lowercase letters, "
    "digits and '-' (the operator names Services after it: DNS-1035)"
)
NAME_LENGTH_MESSAGE = f"metadata.name must be at most {NAME_MAX_CHARS} characters"
DERIVED_LENGTH_MESSAGE = (
    f"metadata.name plus each tier name must be at most {WORKLOAD_NAME_MAX_CHARS - 1} characters, "
    f"so the workload `<name>-<tier>` fits {WORKLOAD_NAME_MAX_CHARS}"
)

# Root-level CRD rules mirroring the validators below (api.crd puts them on the schema).
NAME_RULES = (
    cel(f"self.metadata.name.matches('{NAME_PATTERN}')", NAME_MESSAGE),
    cel(f"size(self.metadata.name) <= {NAME_MAX_CHARS}", NAME_LENGTH_MESSAGE),
    cel(
        f"self.spec.tiers.all(t, size(self.metadata.name) + size(t.name) <= {WORKLOAD_NAME_MAX_CHARS - 1})",
        DERIVED_LENGTH_MESSAGE,
    ),
)


class ObjectMeta(BaseModel):
    """The metadata fields the operator reads; the rest is kept as is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(min_length=1)
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    @field_validator("name")
    @classmethod
    def _name_fits_every_derived_object(cls, name: str) -> str:
        if re.fullmatch(NAME_PATTERN, name) is None:
            raise ValueError(NAME_MESSAGE)
        if len(name) > NAME_MAX_CHARS:
            raise ValueError(NAME_LENGTH_MESSAGE)
        return name


class InferenceService(BaseModel):
    """apiVersion inferfleet.dev/v1alpha1, kind InferenceService."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    api_version: Literal["inferfleet.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["InferenceService"]
    metadata: ObjectMeta
    spec: InferenceServiceSpec
    status: InferenceServiceStatus | None = None

    @model_validator(mode="after")
    def _workload_names_fit(self) -> InferenceService:
        limit = WORKLOAD_NAME_MAX_CHARS - 1
        if any(len(self.metadata.name) + len(tier.name) > limit for tier in self.spec.tiers):
            raise ValueError(DERIVED_LENGTH_MESSAGE)
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"


@dataclass(frozen=True)
class Problem:
    """One reason a document is invalid: where, and which rule it broke."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecInvalid(ValueError):
    """A user-supplied InferenceService is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem], source: str = "") -> None:
        self.problems = problems
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(prefix + "; ".join(str(problem) for problem in problems))


def _path(location: tuple[int | str, ...]) -> str:
    # pydantic reports union branches by type name (`str`, `InlineGpu`); users know fields.
    parts: list[str] = []
    for item in location:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in {"str", "InlineGpu", "function-after[_bounds(), TierSpec]"} or item.startswith(
            ("function-", "constrained-str")
        ):
            continue
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts)


def problems_from(error: ValidationError) -> list[Problem]:
    """Turn pydantic's errors into field paths in camelCase and a readable rule."""
    found: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for detail in error.errors(include_url=False):
        path = _path(tuple(detail["loc"]))
        message = str(detail["msg"]).removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; fields are camelCase)"
        key = (path, message)
        if key not in seen:
            seen.add(key)
            found.append(Problem(path=path, message=message))
    return found


def parse(document: Any, source: str = "") -> InferenceService:
    """Validate one decoded document; raise SpecInvalid with every problem and its path."""
    if not isinstance(document, dict):
        raise SpecInvalid(
            [Problem("", f"expected a mapping (an InferenceService), got {type(document).__name__}")], source
        )
    kind = document.get("kind")
    api_version = document.get("apiVersion")
    if kind != labels.KIND or api_version != labels.API_VERSION:
        raise SpecInvalid(
            [
                Problem(
                    "kind" if kind != labels.KIND else "apiVersion",
                    f"expected apiVersion {labels.API_VERSION} kind {labels.KIND}, "
                    f"got apiVersion {api_version!r} kind {kind!r}",
                )
            ],
            source,
        )
    too_large = document_problem(document)
    if too_large is not None:
        raise SpecInvalid([Problem(*too_large)], source)
    try:
        return InferenceService.model_validate(document)
    except ValidationError as error:
        raise SpecInvalid(problems_from(error), source) from None


def load_all(text: str, source: str = "") -> list[InferenceService]:
    """Every InferenceService in a (multi-document) YAML or JSON text.

    Aliases, nesting depth and duplicate keys are checked before anything is expanded
    (`api.yaml_input`); a text that breaks a limit is invalid like any other."""
    try:
        documents = [document for document in load_documents(text) if document is not None]
    except yaml.YAMLError as error:
        raise SpecInvalid([Problem("", f"not valid YAML: {error}")], source) from None
    if not documents:
        raise SpecInvalid([Problem("", "no document found")], source)
    return [parse(document, source) for document in documents]
