"""Which kinds the operator touches, and how: the single table RBAC is derived from.

Both adapters refuse an operation this table does not declare (`NotPermitted`), so a
test run against the in-memory adapter proves the table covers every call the code
makes, and `API_CALLS` (what the Helm chart's RBAC must grant) is computed from it
rather than written by hand.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from inferfleet.api import labels
from inferfleet.cluster.errors import NotPermitted


class Operation(enum.Enum):
    """The port's operations; each maps to API verbs on a resource or subresource."""

    APPLY = "apply"
    GET = "get"
    LIST = "list"
    WATCH = "watch"
    DELETE = "delete"
    SCALE = "scale"
    PATCH_STATUS = "patch_status"
    ANNOTATE = "annotate"
    CREATE = "create"
    UPDATE = "update"


# (subresource suffix, verbs) per operation. Server-side apply is a PATCH, and one
# that creates the object is also authorised as a create.
_OPERATION_VERBS: dict[Operation, tuple[str, tuple[str, ...]]] = {
    Operation.APPLY: ("", ("create", "patch")),
    Operation.GET: ("", ("get",)),
    Operation.LIST: ("", ("list",)),
    Operation.WATCH: ("", ("watch",)),
    Operation.DELETE: ("", ("delete",)),
    Operation.SCALE: ("/scale", ("get", "patch")),
    Operation.PATCH_STATUS: ("/status", ("patch",)),
    Operation.ANNOTATE: ("", ("patch",)),
    Operation.CREATE: ("", ("create",)),
    # A whole-object PUT, conditional on the resourceVersion it carries.
    Operation.UPDATE: ("", ("update",)),
}


@dataclass(frozen=True)
class Resource:
    """One kind as the REST API names it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


DEPLOYMENT = Resource("apps/v1", "Deployment", "deployments")
LEADER_WORKER_SET = Resource("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets")
SERVICE = Resource("v1", "Service", "services")
POD_DISRUPTION_BUDGET = Resource("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
POD_MONITOR = Resource("monitoring.coreos.com/v1", "PodMonitor", "podmonitors")
POD = Resource("v1", "Pod", "pods")
# Weight pre-cache (issue 5): a DaemonSet per tier (cache.mode nvme), a Job (mode pvc).
DAEMON_SET = Resource("apps/v1", "DaemonSet", "daemonsets")
JOB = Resource("batch/v1", "Job", "jobs")
EVENT = Resource("v1", "Event", "events")
# The front door (render.frontdoor): the pool, its route, and the pickers' identity.
INFERENCE_POOL = Resource("inference.networking.k8s.io/v1", "InferencePool", "inferencepools")
HTTP_ROUTE = Resource("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes")
SERVICE_ACCOUNT = Resource("v1", "ServiceAccount", "serviceaccounts")
ROLE = Resource("rbac.authorization.k8s.io/v1", "Role", "roles")
ROLE_BINDING = Resource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings")
INFERENCE_SERVICE = Resource(labels.API_VERSION, labels.KIND, labels.PLURAL)
# Leader election among the operator's replicas (controller.leader), in its own namespace.
LEASE = Resource("coordination.k8s.io/v1", "Lease", "leases")
# The admission webhook's configuration (controller.webhook_config): every replica adds its
# certificate to the caBundle with a conditional PUT.
VALIDATING_WEBHOOK_CONFIGURATION = Resource(
    "admissionregistration.k8s.io/v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    namespaced=False,
)
# No Secret appears here: a tenant's credentials reach only the pods that use them, the
# config.json probe's among them (caching.precache.probe); the operator never reads one.

# The node cache (caching.precache.volumes): one hostPath PersistentVolume per namespace, created
# (never patched: an existing one is never taken over), read, and deleted only when an
# earlier namespace of the same name left it; its claim in the namespace; the namespace's
# uid names the volume's tree so a re-created namespace never inherits it.
PERSISTENT_VOLUME = Resource("v1", "PersistentVolume", "persistentvolumes", namespaced=False)
PERSISTENT_VOLUME_CLAIM = Resource("v1", "PersistentVolumeClaim", "persistentvolumeclaims")
NAMESPACE = Resource("v1", "Namespace", "namespaces", namespaced=False)

# Objects the operator owns: created with POST (never an apply, which would take over a
# same-named object someone else made), then applied, read, listed and pruned.
_OWNED = frozenset({Operation.APPLY, Operation.CREATE, Operation.GET, Operation.LIST, Operation.DELETE})
_WORKLOAD = _OWNED | {Operation.SCALE, Operation.WATCH}

# What the port may do to each kind. Extend this table, never bypass it.
PERMISSIONS: dict[Resource, frozenset[Operation]] = {
    INFERENCE_SERVICE: frozenset({Operation.GET, Operation.LIST, Operation.PATCH_STATUS, Operation.ANNOTATE}),
    DEPLOYMENT: _WORKLOAD,
    LEADER_WORKER_SET: _WORKLOAD,
    SERVICE: _OWNED,
    POD_DISRUPTION_BUDGET: _OWNED,
    POD_MONITOR: _OWNED,
    # Pre-cache and the config.json probe: watched (handlers.reconcile_parent) so CacheReady
    # and the probe's verdict follow their status.
    DAEMON_SET: _OWNED | {Operation.WATCH},
    JOB: _OWNED | {Operation.WATCH},
    # The autoscaler marks the pods it wants removed first (pod-deletion-cost).
    POD: frozenset({Operation.LIST, Operation.ANNOTATE}),
    EVENT: frozenset({Operation.CREATE}),
    INFERENCE_POOL: _OWNED,
    HTTP_ROUTE: _OWNED,
    SERVICE_ACCOUNT: _OWNED,
    ROLE: _OWNED,
    ROLE_BINDING: _OWNED,
    LEASE: frozenset({Operation.GET, Operation.CREATE, Operation.UPDATE}),
    VALIDATING_WEBHOOK_CONFIGURATION: frozenset({Operation.GET, Operation.CREATE, Operation.UPDATE}),
    PERSISTENT_VOLUME: frozenset({Operation.GET, Operation.CREATE, Operation.DELETE}),
    PERSISTENT_VOLUME_CLAIM: frozenset({Operation.GET, Operation.CREATE}),
    NAMESPACE: frozenset({Operation.GET}),
}

_BY_KIND: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in PERMISSIONS}


def resource_for(api_version: str, kind: str) -> Resource:
    try:
        return _BY_KIND[(api_version, kind)]
    except KeyError:
        raise NotPermitted(f"{kind} ({api_version}) is not in cluster.access.PERMISSIONS") from None


def check(api_version: str, kind: str, operation: Operation) -> Resource:
    """The kind's Resource, or NotPermitted when the table does not allow `operation`."""
    resource = resource_for(api_version, kind)
    if operation not in PERMISSIONS[resource]:
        raise NotPermitted(f"{operation.value} on {kind} is not in cluster.access.PERMISSIONS")
    return resource


class ApiCall(NamedTuple):
    """One RBAC rule's worth: API group ("" is core), resource (with subresource), verbs."""

    api_group: str
    resource: str
    verbs: frozenset[str]


# Calls kopf itself makes on the operator's behalf (watching, progress annotations,
# events); they go through kopf's own client, not this port, so they are declared here by
# hand from kopf's documented RBAC needs. kopf runs standalone (no peering: the Lease is
# the one election, controller.kopf_gate) and manages no webhook configuration (the
# operator does, controller.webhook_config).
_FRAMEWORK_CALLS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (labels.GROUP, labels.PLURAL, ("get", "list", "watch", "patch")),
    ("apiextensions.k8s.io", "customresourcedefinitions", ("list", "watch")),
    ("", "namespaces", ("list", "watch")),
    ("", "events", ("create",)),
)


# What the Role the operator renders for its endpoint pickers grants them
# (render.frontdoor): the API server lets a subject create a Role only with permissions it
# holds itself, so the operator must hold these too. It calls none of them.
_DELEGATED_CALLS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("", "pods", ("get", "list", "watch")),
    ("inference.networking.k8s.io", "inferencepools", ("get", "list", "watch")),
    ("inference.networking.x-k8s.io", "inferenceobjectives", ("get", "list", "watch")),
    ("inference.networking.x-k8s.io", "inferencemodelrewrites", ("get", "list", "watch")),
)
# The ValidatingWebhookConfiguration the replicas register in (controller.webhook_config).
WEBHOOK_CONFIGURATION = f"validate.{labels.GROUP}"
# Calls the chart narrows to one object by name (RBAC resourceNames), and whose name:
# the webhook configuration above, and the leader-election Lease, which is named like
# the peering object (`--peering`; "<peering>" here). A create cannot be narrowed so: the
# API server authorises it before the object, and so its name, exists.
NAMED_CALLS: dict[tuple[str, str, str], str] = {
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get"): WEBHOOK_CONFIGURATION,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "update"): WEBHOOK_CONFIGURATION,
    (LEASE.group, LEASE.plural, "get"): "<peering>",
    (LEASE.group, LEASE.plural, "update"): "<peering>",
}


def derive_api_calls(
    permissions: dict[Resource, frozenset[Operation]] = PERMISSIONS,
    framework: Iterable[tuple[str, str, tuple[str, ...]]] = _FRAMEWORK_CALLS + _DELEGATED_CALLS,
) -> frozenset[ApiCall]:
    """Merge the port's table, kopf's needs and what the operator delegates into one rule
    per (group, resource)."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for resource, operations in permissions.items():
        for operation in operations:
            suffix, op_verbs = _OPERATION_VERBS[operation]
            verbs.setdefault((resource.group, resource.plural + suffix), set()).update(op_verbs)
    for group, plural, op_verbs in framework:
        verbs.setdefault((group, plural), set()).update(op_verbs)
    return frozenset(ApiCall(group, plural, frozenset(v)) for (group, plural), v in verbs.items())


API_CALLS: frozenset[ApiCall] = derive_api_calls()
