"""Node labels that identify a GPU type: the shape the catalog and inline GPUs share.

`nodeLabels` maps a node label key to the value (or values) that mean "this GPU". Each
key is one way a cluster may label its GPU nodes (NVIDIA GPU feature discovery, GKE,
Karpenter, EKS Auto Mode, AMD's node labeller, ...): a node is of this GPU type when ANY
one of the keys has one of its values. `catalog.placement` turns each key into one
required node-selector term, so the same tier schedules on any of those clusters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, StringConstraints

# Kubernetes label syntax (apimachinery validation): an optional DNS-subdomain prefix and
# a name of at most 63 characters; values are at most 63 characters, alphanumeric at both
# ends. Checked here so a bad catalog or inline label never reaches a rendered pod.
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
MAX_KEYS = 16
MAX_VALUES = 32

LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=LABEL_VALUE_PATTERN)]
LabelValues = LabelValue | Annotated[list[LabelValue], Field(min_length=1, max_length=MAX_VALUES)]
NodeLabels = Annotated[dict[LabelKey, LabelValues], Field(max_length=MAX_KEYS)]

# One alternative: a label key and the values any of which identify the GPU.
Alternative = tuple[str, tuple[str, ...]]


def alternatives(labels: Mapping[str, str | list[str]] | None) -> tuple[Alternative, ...]:
    """Each key with its values as a tuple, in the order written (deterministic output)."""
    out: list[Alternative] = []
    for key, values in (labels or {}).items():
        listed = (values,) if isinstance(values, str) else tuple(values)
        out.append((key, tuple(dict.fromkeys(listed))))
    return tuple(out)
