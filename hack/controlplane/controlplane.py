#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, from the binaries build.sh builds.

etcd, kube-apiserver (secure serving with a generated CA, client certificates,
service-account signing keys, admission webhooks and an audit log), kube-controller-
manager, kube-scheduler, KWOK (fake nodes and pod lifecycles) and the LeaderWorkerSet
controller with its admission webhooks (multi-node workloads), each a child process on
127.0.0.1 with free ports, logging to `<workdir>/logs/<name>.log`, stopped by PID. Then
the fake GPU fleet (fleet.yaml) and the CRDs (the generated InferenceService CRD, kopf's
peering CRDs, and the LeaderWorkerSet and PodMonitor CRDs from their projects' Go
modules, pinned in crds/go.mod).

The e2e suite (tests/e2e/conftest.py) and the reconcile benchmark import this file; by
hand:

    python hack/controlplane/controlplane.py up     # runs until Ctrl-C, prints KUBECONFIG

Standard library plus `cryptography`, `PyYAML` and the binaries; everything it writes
stays in the work directory.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD_SCRIPT = HERE / "build.sh"
STAGES_FILE = HERE / "kwok-stages.yaml"
FLEET_FILE = HERE / "fleet.yaml"
CRD_MODULE_DIR = HERE / "crds"
INFERFLEET_CRD = REPO / "crds" / "inferenceservices.inferfleet.dev.yaml"
PEERING_CRDS = REPO / "hack" / "kopf-peering-crds.yaml"
LWS_MODULE = "sigs.k8s.io/lws"
# The LeaderWorkerSet controller's admission webhooks, as its release registers them.
LWS_WEBHOOKS = "config/webhook/manifests.yaml"
LWS_WEBHOOK_CONFIGS = ("lws-e2e-mutating", "lws-e2e-validating")
# Third-party CRDs: (module path, file inside the module).
MODULE_CRDS: tuple[tuple[str, str], ...] = (
    (LWS_MODULE, "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
    (
        "github.com/prometheus-operator/prometheus-operator",
        "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
    ),
    # The front door (render.frontdoor): InferencePool and HTTPRoute at the versions the
    # tests' schemas come from (hack/update_frontdoor_schemas.py reads the same go.mod).
    (
        "sigs.k8s.io/gateway-api-inference-extension",
        "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
    ),
    ("sigs.k8s.io/gateway-api", "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml"),
)
# Room for thousands of Services (the reconcile benchmark makes 3,000).
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
# Users whose requests the audit log leaves out: the control plane talking to itself.
QUIET_USERS = (
    "system:kube-controller-manager",
    "system:kube-scheduler",
    "system:apiserver",
    "kwok-controller",
    "lws-controller",
)
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


class ControlPlaneError(RuntimeError):
    """A component did not start, or the binaries are missing."""


# --- binaries ---------------------------------------------------------------------------


def binaries(build: bool = False) -> Path:
    """The directory holding the built binaries; builds them first when `build` is set.

    INFERFLEET_CONTROLPLANE_BIN points at a directory of prebuilt binaries instead.
    """
    override = os.environ.get("INFERFLEET_CONTROLPLANE_BIN")
    if override:
        return Path(override)
    args = [str(BUILD_SCRIPT)] if build else [str(BUILD_SCRIPT), "--print"]
    done = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(
            "control plane binaries are not built (run hack/controlplane/build.sh)"
            if not build
            else f"hack/controlplane/build.sh failed with exit code {done.returncode}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- PKI ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class Pki:
    """A throw-away CA and the certificates and keys the components need."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._x509, self._hashes, self._ec, self._oid = x509, hashes, ec, NameOID
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "inferfleet-e2e-ca")])
        now = dt.datetime.now(dt.UTC)
        self._ca_name = name
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = directory / "ca.crt"
        self.ca.write_bytes(self._pem_cert(self._ca_cert))

    @staticmethod
    def _pem_cert(cert: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _pem_key(key: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def issue(
        self, name: str, *, common_name: str, groups: Sequence[str] = (), hosts: Sequence[str] = ()
    ) -> KeyPair:
        """A leaf certificate: a client one (CN = user, O = groups) and/or a serving one (hosts)."""
        x509, oid = self._x509, self._oid
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        attributes = [x509.NameAttribute(oid.COMMON_NAME, common_name)]
        attributes += [x509.NameAttribute(oid.ORGANIZATION_NAME, group) for group in groups]
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        usages = [x509.ExtendedKeyUsageOID.CLIENT_AUTH]
        if hosts:
            usages.append(x509.ExtendedKeyUsageOID.SERVER_AUTH)
            alt: list[Any] = []
            for host in hosts:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    alt.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self._ca_key, self._hashes.SHA256())
        pair = KeyPair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(self._pem_cert(cert))
        pair.key.write_bytes(self._pem_key(key))
        pair.key.chmod(0o600)
        return pair

    def service_account_keys(self) -> KeyPair:
        """The RSA key pair the API server signs service-account tokens with."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pair = KeyPair(self.dir / "sa.pub", self.dir / "sa.key")
        pair.key.write_bytes(self._pem_key(key))
        pair.key.chmod(0o600)
        pair.cert.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return pair


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    client: KeyPair | None = None,
    token: str | None = None,
    user: str = "admin",
) -> Path:
    """A kubeconfig with everything inline (client certificate or bearer token)."""
    import base64

    def b64(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    credentials: dict[str, str] = {}
    if client is not None:
        credentials = {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}
    if token is not None:
        credentials = {"token": token}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": f"{user}@e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": f"{user}@e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path


# --- processes ------------------------------------------------------------------------


@dataclass
class Component:
    name: str
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: Mapping[str, str] | None = None) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=dict(env) if env is not None else None,
            )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM this component's own PID, SIGKILL it after `timeout_s`."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def wait_until(
    check: Callable[[], bool], what: str, timeout_s: float, *, alive: Component | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive is not None and not alive.alive():
            raise ControlPlaneError(f"{alive.name} exited while waiting for {what}:\n{alive.tail()}")
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ssl.SSLError, ValueError):
            pass
        time.sleep(0.25)
    detail = f":\n{alive.tail()}" if alive is not None else ""
    raise ControlPlaneError(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")


def http_ok(url: str, context: ssl.SSLContext | None = None, expect: str | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=3, context=context) as response:
        body = response.read().decode(errors="replace")
        return bool(response.status == 200 and (expect is None or expect in body))


# --- the control plane ------------------------------------------------------------------


@dataclass
class Options:
    controllers: bool = True  # kube-controller-manager and kube-scheduler
    kwok: bool = True  # KWOK and the fake fleet
    # The LeaderWorkerSet controller and its webhooks (with controllers and CRDs only).
    lws: bool = True
    cold_start_s: float = 3.0  # started pod -> Ready (KWOK's pod-ready delay)
    audit: bool = True
    # Resources ("group/resource/subresource", group "" for core) whose request bodies
    # the audit log keeps, e.g. to tell what a write changed.
    audit_bodies: tuple[tuple[str, str], ...] = ()
    crds: bool = True
    extra_apiserver_args: list[str] = field(default_factory=list)


class ControlPlane:
    """Start with `start()` (or as a context manager); `kubeconfig` is the admin's."""

    def __init__(self, bin_dir: Path, workdir: Path | None = None, options: Options | None = None) -> None:
        self.bin = bin_dir
        self.options = options or Options()
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="inferfleet-cp-", dir=_fast_tmp()))
        self.logs = self.workdir / "logs"
        self.components: list[Component] = []
        self.apiserver_port = free_port()
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.audit_log = self.logs / "audit.jsonl"
        self.pki: Pki | None = None

    # The binaries' paths.
    def tool(self, name: str) -> str:
        path = self.bin / name
        if not path.exists():
            raise ControlPlaneError(f"{path} is missing (run hack/controlplane/build.sh)")
        return str(path)

    def _component(self, name: str, args: list[str]) -> Component:
        component = Component(name, args, self.logs / f"{name}.log")
        component.start()
        self._track(component)
        return component

    def _track(self, component: Component) -> None:
        """Stopped with the others (also when the start fails later on)."""
        self.components.append(component)
        (self.workdir / "pids").write_text(
            "".join(f"{c.name} {c.pid}\n" for c in self.components), encoding="utf-8"
        )

    def ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        return ssl.create_default_context(cafile=str(self.pki.ca))

    # --- start ------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        started = time.monotonic()
        pki = self.pki = Pki(self.workdir / "pki")
        serving = pki.issue(
            "apiserver",
            common_name="kube-apiserver",
            hosts=[
                "127.0.0.1",
                "localhost",
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )
        sa = pki.service_account_keys()
        admin = pki.issue("admin", common_name="admin", groups=["system:masters"])
        # The controller manager runs every controller with its own credentials (no
        # per-controller service accounts), so it is a cluster admin under its own name.
        kcm = pki.issue("kcm", common_name="system:kube-controller-manager", groups=["system:masters"])
        scheduler = pki.issue("scheduler", common_name="system:kube-scheduler")
        kwok = pki.issue("kwok", common_name="kwok-controller", groups=["system:masters"])
        lws = pki.issue("lws", common_name="lws-controller", groups=["system:masters"])
        write_kubeconfig(self.kubeconfig, self.server, pki.ca, client=admin)
        kcm_config = write_kubeconfig(
            self.workdir / "kcm.kubeconfig", self.server, pki.ca, client=kcm, user="kcm"
        )
        sched_config = write_kubeconfig(
            self.workdir / "scheduler.kubeconfig", self.server, pki.ca, client=scheduler, user="scheduler"
        )
        kwok_config = write_kubeconfig(
            self.workdir / "kwok.kubeconfig", self.server, pki.ca, client=kwok, user="kwok"
        )
        lws_config = write_kubeconfig(
            self.workdir / "lws.kubeconfig", self.server, pki.ca, client=lws, user="lws"
        )

        etcd_port, etcd_peer = free_port(), free_port()
        etcd = self._component(
            "etcd",
            [
                self.tool("etcd"),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync=true",
                "--auto-compaction-retention=1",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )
        wait_until(
            lambda: http_ok(f"http://127.0.0.1:{etcd_port}/health", expect='"true"'),
            "etcd /health",
            START_TIMEOUT_S,
            alive=etcd,
        )

        args = [
            self.tool("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.workdir / 'apiserver'}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={pki.ca}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa.cert}",
            f"--service-account-signing-key-file={sa.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            # Webhooks are on by default; named so a default change cannot drop them.
            "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            # 127.0.0.1 is not a valid endpoint for the `kubernetes` Service.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ]
        if not self.options.controllers:
            # Nobody would create the `default` ServiceAccount pods need.
            args.append("--disable-admission-plugins=ServiceAccount")
        if self.options.audit:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(_audit_policy(self.options.audit_bodies)), encoding="utf-8")
            args += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
            ]
        args += self.options.extra_apiserver_args
        apiserver = self._component("kube-apiserver", args)
        context = self.ssl_context()
        wait_until(
            lambda: http_ok(f"{self.server}/readyz", context, expect="ok"),
            "kube-apiserver /readyz",
            START_TIMEOUT_S,
            alive=apiserver,
        )

        if self.options.controllers:
            kcm_port, sched_port = free_port(), free_port()
            always = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"
            manager = self._component(
                "kube-controller-manager",
                [
                    self.tool("kube-controller-manager"),
                    f"--kubeconfig={kcm_config}",
                    f"--authentication-kubeconfig={kcm_config}",
                    f"--authorization-kubeconfig={kcm_config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={kcm_port}",
                    always,
                    "--leader-elect=false",
                    "--use-service-account-credentials=false",
                    f"--service-account-private-key-file={sa.key}",
                    f"--root-ca-file={pki.ca}",
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                    "--concurrent-gc-syncs=20",
                    "--concurrent-deployment-syncs=10",
                ],
            )
            scheduler_component = self._component(
                "kube-scheduler",
                [
                    self.tool("kube-scheduler"),
                    f"--kubeconfig={sched_config}",
                    f"--authentication-kubeconfig={sched_config}",
                    f"--authorization-kubeconfig={sched_config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={sched_port}",
                    always,
                    "--leader-elect=false",
                ],
            )
            insecure = ssl.create_default_context()
            insecure.check_hostname = False
            insecure.verify_mode = ssl.CERT_NONE
            wait_until(
                lambda: http_ok(f"https://127.0.0.1:{kcm_port}/healthz", insecure),
                "kube-controller-manager /healthz",
                START_TIMEOUT_S,
                alive=manager,
            )
            wait_until(
                lambda: http_ok(f"https://127.0.0.1:{sched_port}/healthz", insecure),
                "kube-scheduler /healthz",
                START_TIMEOUT_S,
                alive=scheduler_component,
            )
            # The serviceaccount controller working is the sign KCM's informers are up.
            wait_until(
                lambda: (
                    self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode
                    == 0
                ),
                "the default ServiceAccount",
                START_TIMEOUT_S,
                alive=manager,
            )

        if self.options.kwok:
            # Nodes first: KWOK v0.7 may miss a node that starts to match its selector
            # while it watches, but always takes the ones it lists at startup.
            register_fleet(self.kubectl, self.kubectl_json)
            start_kwok(self, kwok_config)
            wait_until(lambda: fleet_ready(self.kubectl_json), "every fake node Ready", START_TIMEOUT_S)
        if self.options.crds:
            install_crds(self.kubectl)
        if self.options.lws and self.options.controllers and self.options.crds:
            start_lws(self.tool("lws"), lws_config, pki, self.workdir, self.kubectl, track=self._track)
        (self.workdir / "startup_seconds").write_text(f"{time.monotonic() - started:.1f}\n")

    # --- kubectl --------------------------------------------------------------------------

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_kubectl(self.tool("kubectl"), self.kubeconfig, list(args), check=check, stdin=stdin)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    # --- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()

    def close(self) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def dump_logs(self, lines: int = 40) -> str:
        return "\n".join(f"--- {c.name} (pid {c.pid}) ---\n{c.tail(lines)}" for c in self.components)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fast_tmp() -> str | None:
    """tmpfs when there is one: etcd's writes then cost no disk I/O."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _audit_policy(bodies: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"level": "None", "users": list(QUIET_USERS)},
        {"level": "None", "nonResourceURLs": ["/healthz*", "/readyz*", "/livez*", "/version"]},
    ]
    rules += [
        {"level": "Request", "resources": [{"group": group, "resources": [resource]}]}
        for group, resource in bodies
    ]
    rules.append({"level": "Metadata"})
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": rules,
    }


def run_kubectl(
    binary: str, kubeconfig: Path, args: list[str], *, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [binary, f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and done.returncode != 0:
        raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


# --- KWOK and the fleet -------------------------------------------------------------------


def stages_config(cold_start_s: float) -> str:
    return STAGES_FILE.read_text(encoding="utf-8").replace(
        "{{COLD_START_MS}}", str(round(cold_start_s * 1000))
    )


def kwok_args(binary: str, kubeconfig: Path, config: Path) -> list[str]:
    return [
        binary,
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-lease-duration-seconds=40",
        "-v=WARN",
    ]


def start_kwok(plane: ControlPlane, kubeconfig: Path) -> Component:
    config = plane.workdir / "kwok.yaml"
    config.write_text(stages_config(plane.options.cold_start_s), encoding="utf-8")
    return plane._component("kwok", kwok_args(plane.tool("kwok"), kubeconfig, config))


def fleet_nodes() -> list[dict[str, Any]]:
    """The Node objects of fleet.yaml, status (capacity, allocatable) included."""
    fleet = yaml.safe_load(FLEET_FILE.read_text(encoding="utf-8"))
    common = fleet["common"]
    nodes = []
    for pool in fleet["nodes"]:
        for name in pool["names"]:
            labels = {**common["labels"], **pool["labels"], "kubernetes.io/hostname": name}
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": dict(common["annotations"])},
                    "spec": {"taints": list(pool.get("taints") or [])},
                    "status": {"capacity": dict(pool["resources"]), "allocatable": dict(pool["resources"])},
                }
            )
    return nodes


def fleet_gpus() -> dict[str, str | None]:
    """Node name -> the catalog GPU its pool carries (None: CPU only): the suite's truth."""
    fleet = yaml.safe_load(FLEET_FILE.read_text(encoding="utf-8"))
    return {name: pool.get("gpu") for pool in fleet["nodes"] for name in pool["names"]}


def register_fleet(kubectl: Callable[..., Any], kubectl_json: Callable[..., Any]) -> None:
    """Create the fake nodes. The status (GPUs) goes in before KWOK's annotation, so KWOK
    never initializes a node without its allocatable resources."""
    for node in fleet_nodes():
        name = node["metadata"]["name"]
        annotations = node["metadata"].pop("annotations")
        status = node.pop("status")
        kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=inferfleet-e2e",
            "-f",
            "-",
            stdin=json.dumps(node),
        )
        kubectl(
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )
        kubectl("annotate", "node", name, "--overwrite", *(f"{k}={v}" for k, v in annotations.items()))


def fleet_ready(kubectl_json: Callable[..., Any]) -> bool:
    names = {node["metadata"]["name"] for node in fleet_nodes()}
    listed = kubectl_json("get", "nodes")["items"]
    ready = {
        node["metadata"]["name"]
        for node in listed
        for condition in (node.get("status") or {}).get("conditions") or []
        if condition["type"] == "Ready" and condition["status"] == "True"
    }
    return names <= ready


def unregister_fleet(kubectl: Callable[..., Any]) -> None:
    names = [node["metadata"]["name"] for node in fleet_nodes()]
    kubectl("delete", "node", "--ignore-not-found", "--wait=false", *names, check=False)


# --- the LeaderWorkerSet controller ----------------------------------------------------------


def lws_configuration(
    webhook_host: str, webhook_port: int, cert_dir: Path, health_port: int
) -> dict[str, Any]:
    """The controller's own configuration file (config.lws.x-k8s.io/v1alpha1): one
    replica (no leader election), webhooks served with the certificate given here (its
    internal certificate manager writes a Secret for an in-cluster Service, which a
    controller outside the cluster cannot be reached through), no metrics endpoint."""
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": webhook_host, "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }


def lws_webhook_configurations(manifests: Path, base_url: str, ca: Path) -> list[dict[str, Any]]:
    """The release's webhook registrations, pointed at `base_url` (the controller runs
    outside the cluster) and, for pods, only at pods of a LeaderWorkerSet, as its Helm
    chart and kustomize patches register them: no other pod waits on this process."""
    import base64

    ca_bundle = base64.b64encode(ca.read_bytes()).decode()
    found = []
    for doc, name in zip(
        yaml.safe_load_all(manifests.read_text(encoding="utf-8")), LWS_WEBHOOK_CONFIGS, strict=True
    ):
        doc["metadata"] = {"name": name}
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": ca_bundle}
            if any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
                }
        found.append(doc)
    return found


def start_lws(
    binary: str,
    kubeconfig: Path,
    pki: Pki,
    workdir: Path,
    kubectl: Callable[..., Any],
    *,
    track: Callable[[Component], None],
    webhook_host: str = "127.0.0.1",
) -> Component:
    """The LeaderWorkerSet controller, its webhooks served on `webhook_host` and registered.

    It cannot do without them: its LeaderWorkerSet webhook sets defaults the controller
    dereferences (without it v0.8.0 panics on a nil pointer and creates nothing), and its
    pod webhook gives every leader pod the group-index label it counts groups by."""
    cert_dir = workdir / "lws-webhook"
    cert_dir.mkdir(parents=True, exist_ok=True)
    serving = pki.issue("lws-webhook", common_name="lws-webhook", hosts=[webhook_host])
    shutil.copy(serving.cert, cert_dir / "tls.crt")
    shutil.copy(serving.key, cert_dir / "tls.key")
    webhook_port, health_port = free_port(), free_port()
    config = workdir / "lws-config.yaml"
    config.write_text(
        yaml.safe_dump(lws_configuration(webhook_host, webhook_port, cert_dir, health_port)), encoding="utf-8"
    )
    component = Component(
        "lws-controller",
        [binary, f"--config={config}", f"--kubeconfig={kubeconfig}", "--zap-log-level=info"],
        workdir / "logs" / "lws-controller.log",
    )
    component.start()
    track(component)
    wait_until(
        lambda: http_ok(f"http://127.0.0.1:{health_port}/readyz"),
        "the LeaderWorkerSet controller /readyz",
        START_TIMEOUT_S,
        alive=component,
    )
    context = ssl.create_default_context(cafile=str(pki.ca))
    wait_until(
        lambda: _tls_answers(webhook_host, webhook_port, context),
        "the LeaderWorkerSet webhooks",
        START_TIMEOUT_S,
        alive=component,
    )
    manifests = module_dir(LWS_MODULE) / LWS_WEBHOOKS
    for registration in lws_webhook_configurations(
        manifests, f"https://{webhook_host}:{webhook_port}", pki.ca
    ):
        kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=inferfleet-e2e",
            "-f",
            "-",
            stdin=json.dumps(registration),
        )
    return component


def remove_lws_webhooks(kubectl: Callable[..., Any]) -> None:
    """Their failure policy is Fail: left behind, no LeaderWorkerSet pod could start."""
    for name in LWS_WEBHOOK_CONFIGS:
        kind = "mutatingwebhookconfiguration" if "mutating" in name else "validatingwebhookconfiguration"
        kubectl("delete", kind, name, "--ignore-not-found", check=False)


def _tls_answers(host: str, port: int, context: ssl.SSLContext) -> bool:
    with (
        socket.create_connection((host, port), timeout=3) as raw,
        context.wrap_socket(raw, server_hostname=host),
    ):
        return True


# --- CRDs ---------------------------------------------------------------------------------


def module_dir(module: str) -> Path:
    """The module's directory in the Go module cache, downloaded and checked against go.sum."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    done = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=CRD_MODULE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise ControlPlaneError(
            f"go mod download {module} failed: {done.stdout.strip()} {done.stderr.strip()}"
        )
    info = json.loads(done.stdout)
    if info.get("Error"):
        raise ControlPlaneError(f"go mod download {module}: {info['Error']}")
    return Path(info["Dir"])


def crd_files() -> list[Path]:
    return [INFERFLEET_CRD, PEERING_CRDS] + [module_dir(module) / path for module, path in MODULE_CRDS]


def crd_names(paths: Iterable[Path]) -> list[str]:
    return [
        doc["metadata"]["name"]
        for path in paths
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]


def install_crds(kubectl: Callable[..., Any], paths: Sequence[Path] | None = None) -> list[str]:
    """Server-side apply every CRD and wait for Established; the names installed."""
    files = list(paths) if paths is not None else crd_files()
    for path in files:
        kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=inferfleet-e2e", "-f", str(path)
        )
    names = crd_names(files)
    kubectl("wait", "--for=condition=Established", "--timeout=120s", *(f"crd/{name}" for name in names))
    return names


# --- command line -------------------------------------------------------------------------


@contextlib.contextmanager
def running(options: Options, *, build: bool = False) -> Iterator[ControlPlane]:
    with ControlPlane(binaries(build=build), options=options) as plane:
        yield plane


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane and keep it running until Ctrl-C")
    up.add_argument("--build", action="store_true", help="build the binaries first when missing")
    up.add_argument("--no-controllers", action="store_true", help="API server only: no KCM, scheduler, KWOK")
    up.add_argument(
        "--bare",
        action="store_true",
        help="no KWOK, fleet or CRDs: a plain cluster, as tests/e2e meets one via INFERFLEET_E2E_KUBECONFIG",
    )
    up.add_argument("--cold-start-s", type=float, default=3.0, help="started pod -> Ready delay")
    args = parser.parse_args(argv)
    options = Options(
        controllers=not args.no_controllers,
        kwok=not (args.no_controllers or args.bare),
        crds=not args.bare,
        cold_start_s=args.cold_start_s,
    )
    stop = False

    def interrupted(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    with running(options, build=args.build) as plane:
        print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
        print(f"# logs: {plane.logs}; kubectl: {plane.bin / 'kubectl'}; Ctrl-C stops everything", flush=True)
        while not stop:
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
