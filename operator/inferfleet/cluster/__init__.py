"""The narrow port to the Kubernetes API server: real and in-memory adapters.

`Cluster` is the protocol; `KubernetesCluster` talks to a live API server and
`InMemoryCluster` is the test double that enforces resourceVersion conflicts, owner
references, label selection and server-side-apply field ownership. `API_CALLS` is the
exact set of (apiGroup, resource, verbs) the operator needs; the Helm chart's RBAC is
checked against it.
"""

from inferfleet.cluster.access import API_CALLS, PERMISSIONS, ApiCall, Operation, Resource
from inferfleet.cluster.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    KindNotServed,
    NotFound,
    NotPermitted,
    PermanentApiError,
    Replaced,
    TransientApiError,
)
from inferfleet.cluster.in_memory import InMemoryCluster
from inferfleet.cluster.kube import KubernetesCluster
from inferfleet.cluster.port import SCALE_FIELD_MANAGER, Cluster, EventType

__all__ = [
    "API_CALLS",
    "PERMISSIONS",
    "SCALE_FIELD_MANAGER",
    "AlreadyExists",
    "ApiCall",
    "ApiError",
    "Cluster",
    "Conflict",
    "EventType",
    "InMemoryCluster",
    "KindNotServed",
    "KubernetesCluster",
    "NotFound",
    "NotPermitted",
    "Operation",
    "PermanentApiError",
    "Replaced",
    "Resource",
    "TransientApiError",
]
