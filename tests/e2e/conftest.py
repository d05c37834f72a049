"""The e2e tier: the real operator against a real Kubernetes API server.

Which cluster:
- default: the local control plane from hack/controlplane (etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler, KWOK with the fake GPU fleet), built first
  when the binaries are missing (hack/controlplane/build.sh, ~30-40 min cold);
- INFERFLEET_E2E_KUBECONFIG=path: any cluster (kind: hack/kind-e2e.sh). The suite then
  starts KWOK locally against it for the fake GPU fleet (named e2e-*, removed at the
  end), installs the CRDs, and runs the LeaderWorkerSet controller locally unless the
  cluster has its own; set INFERFLEET_E2E_WEBHOOK_HOST to an address of this machine
  the API server can reach (the operator's and the LeaderWorkerSet webhooks).

INFERFLEET_E2E=0 skips the tier. A missing Go toolchain or a failed build is a failure,
not a skip (INFERFLEET_E2E_BUILD=0 refuses to build, which then also fails).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.harness import NAMESPACE_LABEL, Cluster, Operator, admin_identity, controlplane
from tests.e2e.observability import PodMonitorPrometheus, StandinBridge

E2E_DIR = Path(__file__).resolve().parent
KEEP_LOGS_DIR = Path(tempfile.gettempdir()) / "inferfleet-e2e-logs"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = os.environ.get("INFERFLEET_E2E", "1") == "0"
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)
            if skip:
                item.add_marker(pytest.mark.skip(reason="INFERFLEET_E2E=0 turns the e2e tier off"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"report_{report.when}", report)


def failed(request: pytest.FixtureRequest) -> bool:
    return any(
        getattr(getattr(request.node, f"report_{when}", None), "failed", False) for when in ("setup", "call")
    )


# --- the cluster --------------------------------------------------------------------------


def _local_cluster(workdir: Path) -> Iterator[Cluster]:
    build = os.environ.get("INFERFLEET_E2E_BUILD", "1") != "0"
    try:
        bin_dir = controlplane.binaries(build=build)
    except controlplane.ControlPlaneError as error:
        pytest.fail(f"e2e control plane unavailable: {error}", pytrace=False)
    cold_start_s = float(os.environ.get("INFERFLEET_E2E_COLD_START_S", "3"))
    plane = controlplane.ControlPlane(bin_dir, options=controlplane.Options(cold_start_s=cold_start_s))
    try:
        plane.start()
    except controlplane.ControlPlaneError as error:
        logs = plane.logs
        plane.close()
        pytest.fail(f"the e2e control plane did not start: {error} (logs: {logs})", pytrace=False)
    yield Cluster(
        kubeconfig=plane.kubeconfig,
        kubectl_path=plane.tool("kubectl"),
        workdir=workdir,
        webhook_host="127.0.0.1",
        plane=plane,
    )
    plane.stop()
    _keep_logs(plane.logs, "controlplane")
    plane.close()


def _external_cluster(kubeconfig: Path, workdir: Path) -> Iterator[Cluster]:
    """Any cluster: the fleet is registered and driven by a local KWOK."""
    kubectl = shutil.which("kubectl")
    try:
        bin_dir = controlplane.binaries(build=os.environ.get("INFERFLEET_E2E_BUILD", "1") != "0")
        kubectl = str(bin_dir / "kubectl")
    except controlplane.ControlPlaneError as error:
        pytest.fail(f"KWOK, the LeaderWorkerSet controller and kubectl: {error}", pytrace=False)
    kwok_bin = bin_dir / "kwok"
    assert kubectl is not None
    cluster = Cluster(
        kubeconfig=kubeconfig,
        kubectl_path=kubectl,
        workdir=workdir,
        webhook_host=os.environ.get("INFERFLEET_E2E_WEBHOOK_HOST", "127.0.0.1"),
    )
    config = workdir / "kwok.yaml"
    config.write_text(controlplane.stages_config(float(os.environ.get("INFERFLEET_E2E_COLD_START_S", "3"))))
    kwok = controlplane.Component(
        "kwok", controlplane.kwok_args(str(kwok_bin), kubeconfig, config), workdir / "logs" / "kwok.log"
    )
    lws: list[controlplane.Component] = []
    try:
        controlplane.register_fleet(cluster.kubectl, cluster.kubectl_json)
        kwok.start()
        controlplane.wait_until(
            lambda: controlplane.fleet_ready(cluster.kubectl_json),
            "the fake fleet Ready",
            controlplane.START_TIMEOUT_S,
            alive=kwok,
        )
        controlplane.install_crds(cluster.kubectl)
        if not _runs_lws(cluster):
            controlplane.start_lws(
                str(bin_dir / "lws"),
                kubeconfig,
                controlplane.Pki(workdir / "lws-pki"),
                workdir,
                cluster.kubectl,
                track=lws.append,
                webhook_host=cluster.webhook_host,
            )
        yield cluster
    finally:
        if lws:
            controlplane.remove_lws_webhooks(cluster.kubectl)
        for component in lws:
            component.stop()
        controlplane.unregister_fleet(cluster.kubectl)
        kwok.stop()


def _runs_lws(cluster: Cluster) -> bool:
    """Whether the cluster has a LeaderWorkerSet controller of its own (its release's
    webhook registered): a second one would fight it."""
    found = cluster.kubectl_json("get", "mutatingwebhookconfigurations")["items"]
    return any(
        hook.get("name") == "mleaderworkerset.kb.io"
        for config in found
        if config["metadata"]["name"] not in controlplane.LWS_WEBHOOK_CONFIGS
        for hook in config.get("webhooks") or []
    )


def _keep_logs(logs: Path, what: str) -> None:
    if logs.exists():
        target = KEEP_LOGS_DIR / f"{what}-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.copytree(logs, target, dirs_exist_ok=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from kubernetes import config

    workdir = tmp_path_factory.mktemp("e2e")
    external = os.environ.get("INFERFLEET_E2E_KUBECONFIG")
    source = _external_cluster(Path(external), workdir) if external else _local_cluster(workdir)
    found = next(source)
    found.api = config.new_client_from_config(config_file=str(found.kubeconfig))
    found.webhook_pki = controlplane.Pki(workdir / "webhook-pki")
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    try:
        yield found
    finally:
        found.kubectl(
            "delete", "clusterrolebinding", "-l", f"{NAMESPACE_LABEL}=true", "--wait=false", check=False
        )
        found.kubectl("delete", "namespace", "-l", f"{NAMESPACE_LABEL}=true", "--wait=false", check=False)
        _delete_node_cache_volumes(found)
        found.api.close()
        next(source, None)


def _delete_node_cache_volumes(cluster: Cluster) -> None:
    """The node-cache PersistentVolumes the suite's namespaces got (cluster-scoped, so the
    namespaces' deletion leaves them): only those of e2e namespaces, on any cluster."""
    volumes = cluster.list("v1/persistentvolumes", None, "inferfleet.dev/component=node-cache")
    for volume in volumes:
        if volume["metadata"]["labels"].get("inferfleet.dev/owner-namespace", "").startswith("e2e-"):
            cluster.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)


@dataclass
class Observability:
    bridge: StandinBridge
    prometheus: PodMonitorPrometheus


@pytest.fixture(scope="session")
def observability(cluster: Cluster) -> Iterator[Observability]:
    """Stand-ins for every Ready vLLM pod, and one Prometheus following every PodMonitor."""
    bridge = StandinBridge(cluster, cluster.workdir).start()
    prometheus = PodMonitorPrometheus(cluster, cluster.workdir / "prometheus").start()
    try:
        yield Observability(bridge, prometheus)
    finally:
        prometheus.close()
        bridge.stop()


# --- per test ---------------------------------------------------------------------------------


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    short = request.node.name.removeprefix("test_").replace("_", "-")[:30].strip("-")
    name = f"e2e-{short}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, f"{NAMESPACE_LABEL}=true")
    yield name
    # Nothing of ours carries a finalizer: the namespace goes whether an operator runs or not.
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@dataclass
class Operators:
    """Starts `inferfleet run` processes for one test; all stopped (by PID) at its end."""

    cluster: Cluster
    observability: Observability
    workdir: Path
    started: list[Operator] = field(default_factory=list)
    webhooks: bool = False

    def start(
        self,
        namespace: str,
        *,
        name: str = "operator",
        kubeconfig: Path | None = None,
        webhook: bool = False,
        webhook_certificate: bool = True,
        standalone: bool = True,
        peering: str | None = None,
        prometheus_url: str | None = None,
        namespaces: tuple[str, ...] | None = None,
        lease_namespace: str | None = None,
        env: dict[str, str] | None = None,
        run_args: list[str] | None = None,
    ) -> Operator:
        if kubeconfig is None:
            kubeconfig = admin_identity(self.cluster, namespace, f"inferfleet-{name}", self.workdir)
        cert_dir = None
        if webhook:
            self.webhooks = True
        if webhook and webhook_certificate:
            # The suite's CA (as cert-manager's would be); without it each replica makes its own.
            cert_dir = self.workdir / f"{name}-webhook"
            cert_dir.mkdir(parents=True, exist_ok=True)
            pair = self.cluster.webhook_pki.issue(
                f"{name}-webhook", common_name="inferfleet-webhook", hosts=[self.cluster.webhook_host]
            )
            shutil.copy(pair.cert, cert_dir / "tls.crt")
            shutil.copy(pair.key, cert_dir / "tls.key")
            shutil.copy(self.cluster.webhook_pki.ca, cert_dir / "ca.crt")
        operator = Operator(
            name=name,
            kubeconfig=kubeconfig,
            namespaces=namespaces or (namespace,),
            log=self.workdir / f"{name}-{len(self.started)}.log",
            prometheus_url=prometheus_url or self.observability.prometheus.url,
            bind_address="127.0.0.1" if webhook is False else self.cluster.webhook_host,
            standalone=standalone,
            peering=peering,
            webhook_host=self.cluster.webhook_host if webhook else None,
            webhook_cert_dir=cert_dir,
            lease_namespace=lease_namespace,
            env=env or {},
            run_args=run_args,
        )
        self.started.append(operator)
        return operator.start()

    def stop_all(self) -> None:
        for operator in reversed(self.started):
            operator.stop()
        if self.webhooks:
            # The last replica out removes its webhook; a killed one leaves it behind, and
            # the next test's operator must not find another test's entry.
            self.cluster.kubectl(
                "delete",
                "validatingwebhookconfiguration",
                "validate.inferfleet.dev",
                "--ignore-not-found",
                check=False,
            )


@pytest.fixture
def operators(
    cluster: Cluster,
    observability: Observability,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Iterator[Operators]:
    found = Operators(cluster, observability, tmp_path)
    yield found
    found.stop_all()
    if failed(request):
        for operator in found.started:
            print(f"\n--- operator {operator.name} (exit {operator.returncode()}) ---\n{operator.tail(80)}")
        if cluster.plane is not None:
            print(cluster.plane.dump_logs(lines=8))
        _keep_logs(tmp_path, request.node.name)
