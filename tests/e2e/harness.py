"""What the e2e tests share: the cluster under test, operator processes, waiting, audit.

The cluster is either the local control plane (hack/controlplane, the default) or any
cluster a kubeconfig names (INFERFLEET_E2E_KUBECONFIG, e.g. kind). Every operator the
suite runs is the real `inferfleet run` as a local process, authenticated as a
ServiceAccount of its own through a TokenRequest token, so the API server's audit log
(local control plane) tells which process made which call.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import yaml

from tests.conftest import EXAMPLES_DIR
from tests.toolkit.scripts import load_script

T = TypeVar("T")
GROUP, VERSION, PLURAL = "inferfleet.dev", "v1alpha1", "inferenceservices"
NAMESPACE_LABEL = "inferfleet.dev/e2e"
OPERATOR_BIN = str(Path(sys.executable).with_name("inferfleet"))


def _load_controlplane() -> ModuleType:
    name = "inferfleet_e2e_controlplane"
    if name in sys.modules:
        return sys.modules[name]
    return load_script("hack/controlplane/controlplane.py", name)


controlplane = _load_controlplane()


# --- waiting ----------------------------------------------------------------------------


def eventually(probe: Callable[[], T], timeout_s: float = 60.0, interval_s: float = 0.5, what: str = "") -> T:
    """Call `probe` until it stops raising AssertionError (or returns); the last failure
    is re-raised with how long we waited, so a timeout says what was still wrong."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return probe()
        except AssertionError as error:
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"after {timeout_s:.0f}s{' waiting for ' + what if what else ''}: {error}"
                ) from None
            time.sleep(interval_s)


def holds(probe: Callable[[], None], duration_s: float, interval_s: float = 0.5) -> None:
    """`probe` must pass at every check for `duration_s` (a property that must never break)."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        probe()
        time.sleep(interval_s)


# --- the cluster ------------------------------------------------------------------------


@dataclass
class Cluster:
    kubeconfig: Path
    kubectl_path: str
    workdir: Path
    webhook_host: str
    plane: Any | None = None  # controlplane.ControlPlane on the local control plane
    api: Any = None  # kubernetes.client.ApiClient as the admin
    webhook_pki: Any = None

    @property
    def local(self) -> bool:
        return self.plane is not None

    @property
    def audit_log(self) -> Path | None:
        return self.plane.audit_log if self.plane is not None and self.plane.options.audit else None

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done: subprocess.CompletedProcess[str] = controlplane.run_kubectl(
            self.kubectl_path, kubeconfig or self.kubeconfig, list(args), check=check, stdin=stdin
        )
        return done

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def apply(self, objects: Sequence[Mapping[str, Any]], *, manager: str = "e2e-gitops") -> None:
        """Server-side apply, the way GitOps tools and `kubectl apply --server-side` do it."""
        text = yaml.safe_dump_all([dict(obj) for obj in objects], sort_keys=False)
        self.kubectl("apply", "--server-side", f"--field-manager={manager}", "-f", "-", stdin=text)

    # --- typed reads through the Python client ------------------------------------------

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api)

    def service(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom().get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
        return found

    def list(self, path: str, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        """Any kind, as JSON dicts: `path` is the REST collection ("apps/v1/deployments", "v1/pods")."""
        group_version, _, plural = path.rpartition("/")
        root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        scope = f"/namespaces/{namespace}" if namespace else ""
        answer = self.raw(
            "GET", f"{root}{scope}/{plural}", query={"labelSelector": selector} if selector else None
        )
        items: list[dict[str, Any]] = answer.get("items") or []
        return items

    def raw(self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None) -> Any:
        response = self.api.call_api(
            *self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=list((query or {}).items()),
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            ),
            _request_timeout=30,
        )
        response.read()
        return json.loads(response.data or b"{}")


def server_and_ca(kubeconfig: Path) -> tuple[str, dict[str, Any]]:
    """The API server URL and the cluster entry (CA) of a kubeconfig's current context."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    context_name = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
    entry = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    cluster = dict(entry)
    if "certificate-authority" in cluster:  # inline it: the new kubeconfig lives elsewhere
        ca_path = Path(cluster.pop("certificate-authority")).expanduser()
        if not ca_path.is_absolute():
            ca_path = kubeconfig.parent / ca_path
        cluster["certificate-authority-data"] = base64.b64encode(ca_path.read_bytes()).decode()
    return str(cluster["server"]), cluster


def token_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for ServiceAccount `namespace/account`, with a token from the TokenRequest API."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=2h").stdout.strip()
    _, entry = server_and_ca(cluster.kubeconfig)
    user = f"system:serviceaccount:{namespace}:{account}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user, "namespace": namespace}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)
    return path


def admin_identity(cluster: Cluster, namespace: str, account: str, workdir: Path) -> Path:
    """A ServiceAccount bound to cluster-admin: a distinct identity with every permission
    (the RBAC test uses the chart's own ServiceAccount and rules instead)."""
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"e2e-{namespace}-{account}", "labels": {NAMESPACE_LABEL: "true"}},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            },
        ],
        manager="inferfleet-e2e",
    )
    return token_kubeconfig(cluster, namespace, account, workdir / f"{namespace}-{account}.kubeconfig")


# --- operator processes -------------------------------------------------------------------


@dataclass
class Operator:
    """`inferfleet run` as a child process (stopped by its own PID)."""

    name: str
    kubeconfig: Path
    namespaces: tuple[str, ...]
    log: Path
    prometheus_url: str
    bind_address: str = "127.0.0.1"
    standalone: bool = True
    peering: str | None = None
    webhook_host: str | None = None
    webhook_cert_dir: Path | None = None
    lease_namespace: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # `inferfleet run`'s arguments as a deployment gives them (the chart's), instead of
    # the namespace and peering flags built here; the webhook flags are still ours.
    run_args: list[str] | None = None
    process: subprocess.Popen[bytes] | None = None
    liveness_port: int = 0

    def command(self) -> list[str]:
        args = [OPERATOR_BIN, "run", "--bind-address", self.bind_address]
        if self.run_args is not None:
            return [*args, *self.run_args, *self._webhook_args()]
        for namespace in self.namespaces:
            args += ["--namespace", namespace]
        if self.standalone:
            args.append("--standalone")
        elif self.peering:
            args += ["--peering", self.peering]
        return [*args, *self._webhook_args()]

    def _webhook_args(self) -> list[str]:
        args = []
        if self.webhook_host:
            args += ["--webhook-host", self.webhook_host]
        if self.webhook_cert_dir:
            args += ["--webhook-cert-dir", str(self.webhook_cert_dir)]
        return args

    def start(self, ready_timeout_s: float = 90.0) -> Operator:
        self.liveness_port = controlplane.free_port()
        inherited = {k: v for k, v in os.environ.items() if k != "INFERFLEET_NAMESPACES"}
        environment = {
            **inherited,
            "KUBECONFIG": str(self.kubeconfig),
            "NO_PROXY": "127.0.0.1,localhost",
            "INFERFLEET_LOG_FORMAT": "text",
            "INFERFLEET_LIVENESS_PORT": str(self.liveness_port),
            "INFERFLEET_METRICS_PORT": str(controlplane.free_port()),
            "INFERFLEET_WEBHOOK_PORT": str(controlplane.free_port()),
            "INFERFLEET_PROMETHEUS_URL": self.prometheus_url,
            "INFERFLEET_PROMETHEUS_TIMEOUT_S": "3",
            "INFERFLEET_SYNC_PERIOD_S": "5",
            "POD_NAME": self.name,
            "POD_NAMESPACE": self.lease_namespace or self.namespaces[0],
            **self.env,
        }
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                start_new_session=True,
            )

        def live() -> None:
            assert self.alive(), f"operator {self.name} exited ({self.returncode()}):\n{self.tail()}"
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2
                ) as answer:
                    assert answer.status == 200
            except (urllib.error.URLError, OSError) as error:
                raise AssertionError(f"operator {self.name} not live yet: {error}") from None

        eventually(live, ready_timeout_s, what=f"operator {self.name} /healthz")
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (kopf shuts down cleanly, releasing the Lease), SIGKILL after the timeout."""
        if not self.alive():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, no clean-up of any kind."""
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


# --- the audit log ------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditEvent:
    user: str
    verb: str
    resource: str  # plural, "/sub" appended for subresources
    group: str
    namespace: str
    name: str
    code: int
    user_agent: str
    at: str
    # The authorizer's verdict ("allow"/"forbid"): a 403 with "forbid" is RBAC's, other
    # 403s come from admission (a namespace being deleted, ...).
    authorization: str = ""

    @property
    def write(self) -> bool:
        return self.verb in {"create", "update", "patch", "delete", "deletecollection"}


class Audit:
    """The API server's audit log (local control plane only): every request, who made it,
    and its answer."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int = 0, users: Sequence[str] | None = None) -> list[AuditEvent]:
        if not self.path.exists():
            return []
        out = []
        with self.path.open("rb") as handle:
            handle.seek(since)
            for line in handle:
                try:
                    raw = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if raw.get("stage") != "ResponseComplete":
                    continue
                user = str((raw.get("user") or {}).get("username", ""))
                if users is not None and user not in users:
                    continue
                ref = raw.get("objectRef") or {}
                resource = str(ref.get("resource", "")) + (
                    f"/{ref['subresource']}" if ref.get("subresource") else ""
                )
                out.append(
                    AuditEvent(
                        user=user,
                        verb=str(raw.get("verb", "")),
                        resource=resource,
                        group=str(ref.get("apiGroup", "")),
                        namespace=str(ref.get("namespace", "")),
                        name=str(ref.get("name", "")),
                        code=int((raw.get("responseStatus") or {}).get("code", 0)),
                        user_agent=str(raw.get("userAgent", "")),
                        at=str(raw.get("stageTimestamp", "")),
                        authorization=str(
                            (raw.get("annotations") or {}).get("authorization.k8s.io/decision", "")
                        ),
                    )
                )
        return out


# --- objects ------------------------------------------------------------------------------


def example(name: str, namespace: str, *, prewarm: bool = False) -> dict[str, Any]:
    """A bundled example (manifests/examples/<name>.yaml), moved into `namespace`.

    Scheduled pre-warm windows are dropped unless asked for: they follow the wall clock
    (llama-8b-chat holds 3 L4 replicas on weekdays 08:00-18:00 Berlin), and a test must
    not pass or fail by the time of day it runs.
    """
    body: dict[str, Any] = yaml.safe_load((EXAMPLES_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    body["metadata"]["namespace"] = namespace
    if not prewarm:
        (body["spec"].get("scaling") or {}).pop("prewarm", None)
    return body


def conditions(body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


def owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    return any(
        ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller") is True
        for ref in obj["metadata"].get("ownerReferences") or []
    )


def ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def by_name(items: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {item["metadata"]["name"]: item for item in items}
