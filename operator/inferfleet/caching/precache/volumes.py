"""The node cache as one volume per namespace: a PersistentVolume and its claim. Pure.

Why not a hostPath in the tenant's pods: Pod Security `baseline` forbids hostPath
volumes, and a pod that may mount the node's cache root may read (or overwrite) every
other team's weights on that node. So the node cache is the platform's: for each
namespace (owner) that pre-caches on NVMe, the operator creates

- a cluster-scoped hostPath PersistentVolume whose path is that owner's own tree,
  `<nodePath>/.tenants/<namespace>-<namespace uid>`, with no node affinity (every node
  has the directory, created on first mount), `Retain` (the weights outlive the claim)
  and a `claimRef` naming exactly one claim, so no other namespace's claim can bind it;
- a PersistentVolumeClaim in the namespace, pre-bound to that volume by `volumeName`.

Tenant pods (pre-cache and serving) mount the claim, which Pod Security `baseline` and
`restricted` admit; tenants cannot create PersistentVolumes, so the claim is the only
way into the node's cache, and it leads only to their own tree. The namespace's uid is
part of the path: a namespace deleted and re-created under the same name (perhaps for
another team) gets a new, empty tree, never the old team's weights. KServe's
`LocalModelCache` keeps its node cache an administrator's object in the same way.

No tenant-chosen `nodePath` can reach into another owner's tree: owner trees live under
a `.tenants` component, and a node path may contain no component starting with '.'
(api.host_paths), so one owner's tree is never inside another's.

Where the operator may not create cluster-scoped objects (a namespace-only install),
the platform creates the same two objects from `inferfleet cache volumes` and the
operator only uses the claim (settings `cache_volumes: preProvisioned`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from inferfleet.api import labels
from inferfleet.kubedata import ObjectRef

COMPONENT_NODE_CACHE: Final = "node-cache"
# The directory under every node cache root that holds one tree per owner. It starts
# with '.', which no node path may contain (api.host_paths), so no owner's tree (and
# no other node path) can ever lie inside another owner's tree.
TENANTS_DIR: Final = ".tenants"
CLAIM_NAME: Final = "inferfleet-node-cache"
LABEL_OWNER_NAMESPACE: Final = f"{labels.GROUP}/owner-namespace"
ANNOTATION_NODE_PATH: Final = f"{labels.GROUP}/node-path"
ANNOTATION_NAMESPACE_UID: Final = f"{labels.GROUP}/namespace-uid"
# Static binding: no StorageClass, so no provisioner ever makes a volume for the claim.
STORAGE_CLASS: Final = ""
ACCESS_MODES: Final = ("ReadWriteMany",)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def claim_name(node_path: str, default_node_path: str) -> str:
    """The namespace's claim for one node cache root (one per root a namespace uses)."""
    if node_path == default_node_path:
        return CLAIM_NAME
    return f"{CLAIM_NAME}-{_digest(node_path)}"


def volume_name(namespace: str, node_path: str) -> str:
    """The PersistentVolume of one namespace and root: readable in `kubectl get pv`."""
    return f"{CLAIM_NAME}-{namespace}-{_digest(node_path)}"


def owner_tree(node_path: str, namespace: str, namespace_uid: str | None) -> str:
    """The host directory of one owner: `<root>/.tenants/<namespace>-<uid>`.

    Without a uid (volumes a platform team pre-provisions by name) the namespace alone;
    then re-creating a namespace under an old name reuses its tree, which the docs say."""
    suffix = f"-{namespace_uid}" if namespace_uid else ""
    return f"{node_path.rstrip('/')}/{TENANTS_DIR}/{namespace}{suffix}"


def _labels(namespace: str) -> dict[str, str]:
    return {
        labels.LABEL_MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.LABEL_COMPONENT: COMPONENT_NODE_CACHE,
        LABEL_OWNER_NAMESPACE: namespace,
    }


@dataclass(frozen=True)
class NodeCacheVolume:
    """The claim and volume that give one namespace its tree of one node cache root."""

    namespace: str
    namespace_uid: str | None
    node_path: str
    default_node_path: str
    capacity_gib: float

    @property
    def claim(self) -> str:
        return claim_name(self.node_path, self.default_node_path)

    @property
    def volume(self) -> str:
        return volume_name(self.namespace, self.node_path)

    @property
    def host_path(self) -> str:
        return owner_tree(self.node_path, self.namespace, self.namespace_uid)

    def _annotations(self) -> dict[str, str]:
        out = {ANNOTATION_NODE_PATH: self.node_path}
        if self.namespace_uid:
            out[ANNOTATION_NAMESPACE_UID] = self.namespace_uid
        return out

    def _storage(self) -> str:
        return f"{max(1, int(self.capacity_gib))}Gi"

    def persistent_volume(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": self.volume,
                "labels": _labels(self.namespace),
                "annotations": self._annotations(),
            },
            "spec": {
                # Informational for a hostPath (nothing enforces it); the fetchers' own
                # eviction budget is what keeps a tree in bounds.
                "capacity": {"storage": self._storage()},
                "accessModes": list(ACCESS_MODES),
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "volumeMode": "Filesystem",
                # Only this claim, in this namespace, can ever bind the volume.
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": self.namespace,
                    "name": self.claim,
                },
                # The kubelet creates the owner's directory (root 0755) on first mount; the
                # pre-cache pod's cache-owner container hands it to the fetcher's UID.
                "hostPath": {"path": self.host_path, "type": "DirectoryOrCreate"},
            },
        }

    def persistent_volume_claim(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": self.claim,
                "namespace": self.namespace,
                "labels": _labels(self.namespace),
                "annotations": {ANNOTATION_NODE_PATH: self.node_path},
            },
            "spec": {
                "accessModes": list(ACCESS_MODES),
                "storageClassName": STORAGE_CLASS,
                "volumeName": self.volume,
                "resources": {"requests": {"storage": self._storage()}},
            },
        }

    def objects(self) -> list[dict[str, Any]]:
        """The volume first (the claim names it), then the claim."""
        return [self.persistent_volume(), self.persistent_volume_claim()]

    @property
    def claim_ref(self) -> ObjectRef:
        return ObjectRef("v1", "PersistentVolumeClaim", self.namespace, self.claim)

    @property
    def volume_ref(self) -> ObjectRef:
        return ObjectRef("v1", "PersistentVolume", None, self.volume)
