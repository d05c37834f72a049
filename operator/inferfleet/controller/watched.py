"""Which namespaces the operator watches, and listing a kind in exactly those.

Shared by the resync loop and the autoscaler loop. With plain namespace names the
operator lists namespace by namespace: in namespaced-RBAC mode (a Role per watched
namespace) a cluster-wide list is forbidden. Glob patterns (kopf accepts them) need a
cluster-wide list filtered here, and so cluster-wide RBAC.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

from inferfleet.cluster import Cluster

_GLOB_CHARACTERS = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    return any(character in _GLOB_CHARACTERS for character in pattern)


class Watched:
    """The watched namespaces; empty means every namespace."""

    def __init__(self, namespaces: Iterable[str] = ()) -> None:
        self.namespaces = tuple(namespaces)

    def includes(self, namespace: str) -> bool:
        if not self.namespaces:
            return True
        return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces)

    def list(
        self, cluster: Cluster, api_version: str, kind: str, selector: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """Objects of a kind in the watched namespaces (one list call per namespace, or one)."""
        if self.namespaces and not any(is_glob(ns) for ns in self.namespaces):
            return [item for ns in self.namespaces for item in cluster.list(api_version, kind, ns, selector)]
        items = cluster.list(api_version, kind, None, selector)
        if not self.namespaces:
            return items
        return [item for item in items if self.includes(str(item["metadata"].get("namespace", "")))]
