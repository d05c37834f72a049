"""One node's filesystem, and what a kubelet mounts where for the pods the operator renders.

The e2e control plane's nodes are KWOK's: nothing mounts and nothing runs. These tests
need the other half: the real `inferfleet cache ...` commands of the rendered containers,
run against a temporary directory standing for one node's disk, with every volume mount
resolved as a kubelet resolves it (hostPath -> the host path; a claim -> its bound
PersistentVolume's host path; subPath -> below it; emptyDir and Secrets -> the pod's own
directories). So a test sees exactly which host directories a tenant's pods can reach.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.fetcher.conftest import _cli


@dataclass
class Node:
    """A node's disk under `root`, and the PersistentVolumes it can mount (by claim)."""

    root: Path
    # (namespace, claim) -> the bound PersistentVolume
    volumes: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)

    def host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def bind(self, volume: Mapping[str, Any]) -> None:
        """What the PersistentVolume controller does for a pre-bound volume."""
        ref = volume["spec"]["claimRef"]
        self.volumes[(ref["namespace"], ref["name"])] = volume


@dataclass
class Pod:
    """One rendered pod on `node`: its namespace, spec, and per-pod scratch directories."""

    node: Node
    namespace: str
    spec: Mapping[str, Any]
    scratch: Path
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # Secret name -> data

    def _volume_dir(self, volume: Mapping[str, Any]) -> Path:
        if "hostPath" in volume:
            return self.node.host(volume["hostPath"]["path"])
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            bound = self.node.volumes.get((self.namespace, claim))
            if bound is None:
                raise PermissionError(f"claim {self.namespace}/{claim} is not bound: the pod cannot start")
            return self.node.host(bound["spec"]["hostPath"]["path"])
        if "emptyDir" in volume:
            return self.scratch / "emptydir" / volume["name"]
        if "secret" in volume:
            target = self.scratch / "secrets" / volume["name"]
            data = self.secrets.get(volume["secret"]["secretName"], {})
            items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] in data:
                    (target / item["path"]).parent.mkdir(parents=True, exist_ok=True)
                    (target / item["path"]).write_text(data[item["key"]])
            return target
        raise NotImplementedError(f"volume type of {volume['name']}")

    def mounts(self, container: Mapping[str, Any]) -> list[tuple[str, Path]]:
        """(mount path in the container, host directory), longest mount path first."""
        volumes = {v["name"]: v for v in self.spec["volumes"]}
        found: list[tuple[str, Path]] = []
        for mount in container.get("volumeMounts", []):
            host = self._volume_dir(volumes[mount["name"]])
            if mount.get("subPath"):
                host = host / mount["subPath"]
            # The kubelet creates a missing hostPath (DirectoryOrCreate) and subPath.
            host.mkdir(parents=True, exist_ok=True)
            found.append((mount["mountPath"], host))
        return sorted(found, key=lambda pair: -len(pair[0]))

    def translate(self, container: Mapping[str, Any], text: str) -> str:
        for mount_path, host in self.mounts(container):
            if text == mount_path or text.startswith(mount_path + "/"):
                return str(host) + text[len(mount_path) :]
        return text

    def container(self, name: str) -> Mapping[str, Any]:
        for container in [*self.spec.get("initContainers", []), *self.spec["containers"]]:
            if container["name"] == name:
                return container
        raise KeyError(name)

    def run(
        self,
        name: str,
        *,
        drop: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        timeout_s: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run one container's `inferfleet` command with its mounts resolved on the node.

        `drop`: flags to leave out (with their value, unless they take none), e.g. --hold."""
        container = self.container(name)
        command = list(container["command"])
        assert command[0] == "inferfleet", command
        args = [self.translate(container, str(arg)) for arg in container.get("args", [])]
        for flag in drop:
            while flag in args:
                index = args.index(flag)
                takes_value = index + 1 < len(args) and not args[index + 1].startswith("--")
                del args[index : index + (2 if takes_value else 1)]
        environment = {**os.environ, **(env or {})}
        for entry in container.get("env", []):
            if "value" in entry:
                environment[entry["name"]] = self.translate(container, entry["value"])
        return subprocess.run(
            [_cli(), *command[1:], *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=timeout_s,
            check=False,
        )

    def sees(self, container: str) -> list[Path]:
        """Every host directory the container has mounted."""
        return [host for _, host in self.mounts(self.container(container))]


def visible_files(directories: Sequence[Path]) -> set[Path]:
    """Every file below any of `directories` (what a process in the pod can open)."""
    found: set[Path] = set()
    for directory in directories:
        for path in directory.rglob("*"):
            if path.is_file():
                found.add(path.resolve())
    return found


def wipe(path: Path) -> None:
    """Delete a tree that may hold sealed (read-only) directories."""
    for directory, _dirs, _files in os.walk(path):
        os.chmod(directory, 0o755)
    shutil.rmtree(path, ignore_errors=True)
