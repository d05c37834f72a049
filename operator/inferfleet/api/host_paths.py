"""Which node paths a pre-cache may write: the rule the spec, the settings and the CRD share.

The weight cache is a hostPath that pre-cache pods write and serving pods mount. A path
under the node's system directories would let a spec overwrite kubelet state, device
nodes or configuration, so those are refused everywhere (spec validation, CEL, operator
settings); the operator's `cache_allowed_root` then narrows what remains to one root
(`render.checks`).

No component may start with '.': every owner's tree lives under `<root>/.tenants/`
(caching.precache.volumes), so a node path with no dot component can never lie inside another
owner's tree, whichever root each of them uses.
"""

from __future__ import annotations

import re

# Node directories no cache may live in or under: the root itself, configuration, the
# kernel's virtual filesystems, devices, boot files, the kubelet's and the container
# runtimes' state, system binaries and libraries, runtime sockets.
SYSTEM_PREFIXES: tuple[str, ...] = (
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/root",
    "/run",
    "/var/run",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/docker",
    "/var/lib/cri-o",
    "/var/log",
)
# An absolute path of plain components: no `.`/`..`, no empty components, no trailing slash.
NORMALIZED_PATTERN = r"^(/[^/\x00]+)+$"
_DOT_COMPONENT = re.compile(r"(^|/)\.")

# The same rules as CEL (the CRD checks them at `kubectl apply`; api.spec mirrors them).
CEL_NORMALIZED = "^(/[^/]+)+$"
CEL_SYSTEM_PATHS = "^/(etc|proc|sys|dev|boot|root|run|usr|bin|sbin|lib|lib32|lib64)(/|$)"
CEL_SYSTEM_VAR_PATHS = "^/var/(run|log|lib/(kubelet|containerd|docker|cri-o))(/|$)"
CEL_DOT_COMPONENT = "(^|/)[.]"


def is_under(path: str, root: str) -> bool:
    """`path` is `root` or inside it, component-wise (`/mnt/nvme2` is not under `/mnt/nvme`)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def unsafe_reason(path: str) -> str | None:
    """Why `path` cannot hold a node-local cache, or None when it can."""
    if re.fullmatch(NORMALIZED_PATTERN, path) is None:
        if path == "/":
            return "the node's root directory cannot hold the cache"
        return "must be an absolute path without empty components or a trailing '/'"
    if _DOT_COMPONENT.search(path):
        return "must not contain a component starting with '.' ('.', '..', .tenants, ...)"
    for prefix in SYSTEM_PREFIXES:
        if is_under(path, prefix):
            return f"{prefix} is a system directory of the node; the cache cannot live in or under it"
    return None
