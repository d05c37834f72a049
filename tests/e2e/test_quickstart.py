"""What a newcomer runs, run as written on a real API server.

- The quickstart page (docs/getting-started/quickstart.md): its `quickstart:operator`
  block starts the operator, its `quickstart:run` blocks run in order, in bash, from the
  checkout; the InferenceService they create ends Planned and Ready.
- The chart's NOTES: the commands `helm install` prints (from the checkout, with a
  placeholder Hugging Face token) create the example's namespace and Secret and apply
  the example, which the operator then accepts and plans.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually
from tests.integration.chart.helmchart import commands, notes

EXAMPLES_NAMESPACES = ("ml-serving", "batch")
TOKEN = "hf_e2e_placeholder_token"
QUICKSTART = REPO_ROOT / "docs" / "getting-started" / "quickstart.md"
QUICKSTART_NAMESPACE = "quickstart"
BLOCK = re.compile(r"<!-- quickstart:(operator|run) -->\n```sh\n(.*?)```", re.S)


def quickstart_blocks() -> list[tuple[str, str]]:
    """(kind, script) of each marked block of the quickstart page, in order."""
    return BLOCK.findall(QUICKSTART.read_text(encoding="utf-8"))


def remove_namespaces(cluster: Cluster, names: tuple[str, ...]) -> None:
    """Delete the namespaces and the node-cache volumes the operator made for them
    (cluster-scoped)."""
    for name in names:
        cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
    for volume in cluster.list("v1/persistentvolumes", None, "inferfleet.dev/component=node-cache"):
        if volume["metadata"]["labels"].get("inferfleet.dev/owner-namespace") in names:
            cluster.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)


def shell_environment(cluster: Cluster) -> dict[str, str]:
    """A shell as the reader has it: the cluster's kubectl first on PATH, its KUBECONFIG."""
    path = os.pathsep.join([str(Path(cluster.kubectl_path).parent), str(Path(sys.executable).parent)])
    return {
        **os.environ,
        "PATH": f"{path}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }


def test_the_quickstart_page_marks_its_blocks() -> None:
    kinds = [kind for kind, _ in quickstart_blocks()]
    assert kinds.count("operator") == 1 and kinds.count("run") >= 2, kinds


@pytest.fixture
def quickstart_namespace(cluster: Cluster) -> Iterator[str]:
    assert not cluster.list("v1/namespaces", None, f"kubernetes.io/metadata.name={QUICKSTART_NAMESPACE}")
    yield QUICKSTART_NAMESPACE
    remove_namespaces(cluster, (QUICKSTART_NAMESPACE,))


def test_the_quickstart_runs_as_written(cluster: Cluster, quickstart_namespace: str, tmp_path: Path) -> None:
    blocks = quickstart_blocks()
    (operator_command,) = [script for kind, script in blocks if kind == "operator"]
    environment = shell_environment(cluster)
    environment.pop("HF_TOKEN", None)
    log = tmp_path / "operator.log"
    with log.open("w", encoding="utf-8") as output:
        operator = subprocess.Popen(
            ["bash", "-c", f"exec {operator_command.strip()}"],
            cwd=REPO_ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for kind, script in blocks:
            if kind != "run":
                continue
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=REPO_ROOT,
                env=environment,
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            assert done.returncode == 0, f"{script}\n{done.stdout}{done.stderr}\n{log.read_text()[-4000:]}"
            assert operator.poll() is None, log.read_text()[-4000:]
    finally:
        os.killpg(operator.pid, signal.SIGTERM)
        try:
            operator.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(operator.pid, signal.SIGKILL)
            operator.wait()
    body = cluster.service(quickstart_namespace, "llama-8b-chat")
    found = conditions(body)
    assert found["Planned"]["status"] == "True" and found["Ready"]["status"] == "True", found
    deployments = cluster.list(
        "apps/v1/deployments", quickstart_namespace, "inferfleet.dev/service=llama-8b-chat"
    )
    assert [d["metadata"]["name"] for d in deployments] == ["llama-8b-chat-l4"]


@pytest.fixture
def examples_namespaces(cluster: Cluster) -> Iterator[None]:
    """The NOTES create the examples' own namespaces: removed afterwards, with the
    node-cache volume the operator made for them (cluster-scoped)."""
    yield
    remove_namespaces(cluster, EXAMPLES_NAMESPACES)


def test_the_notes_commands_work_as_printed(
    cluster: Cluster, namespace: str, operators: Operators, examples_namespaces: None
) -> None:
    assert not cluster.list("v1/namespaces", None, "kubernetes.io/metadata.name=ml-serving")
    # The operator as the chart installs it (all namespaces), its identity in the test's own.
    operators.start(namespace, namespaces=("ml-serving",), lease_namespace=namespace)
    printed = commands(notes())
    assert printed and all(line.startswith("kubectl ") for line in printed)
    environment = {
        **os.environ,
        "PATH": f"{Path(cluster.kubectl_path).parent}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(cluster.kubeconfig),
        "HF_TOKEN": TOKEN,
    }
    for line in printed:
        done = subprocess.run(
            ["bash", "-c", line], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"

    labels = cluster.kubectl_json("get", "namespace", "ml-serving")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    secret = cluster.kubectl_json("get", "secret", "hf-token", "-n", "ml-serving")
    assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN

    def planned() -> dict[str, str]:
        body = cluster.service("ml-serving", "llama-8b-chat")
        assert (body.get("status") or {}).get("observedGeneration") == body["metadata"]["generation"]
        found = conditions(body)["Planned"]
        assert found["status"] == "True", found
        return found

    eventually(planned, 120, what="the example accepted and planned")
    # Its workloads exist, their pods admitted at the namespace's Pod Security level.
    deployments = cluster.list("apps/v1/deployments", "ml-serving", "inferfleet.dev/service=llama-8b-chat")
    assert {d["metadata"]["name"] for d in deployments} >= {"llama-8b-chat-l4", "llama-8b-chat-a100-burst"}
