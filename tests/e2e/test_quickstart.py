"""The chart's NOTES, run as printed on a real API server: the commands `helm install`
prints (from the checkout, with a placeholder Hugging Face token) create the example's
namespace and Secret and apply the example, which the operator then accepts and plans."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually
from tests.integration.chart.helmchart import commands, notes

EXAMPLES_NAMESPACES = ("ml-serving", "batch")
TOKEN = "hf_e2e_placeholder_token"


@pytest.fixture
def examples_namespaces(cluster: Cluster) -> Iterator[None]:
    """The NOTES create the examples' own namespaces: removed afterwards, with the
    node-cache volume the operator made for them (cluster-scoped)."""
    yield
    for name in EXAMPLES_NAMESPACES:
        cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
    for volume in cluster.list("v1/persistentvolumes", None, "inferfleet.dev/component=node-cache"):
        if volume["metadata"]["labels"].get("inferfleet.dev/owner-namespace") in EXAMPLES_NAMESPACES:
            cluster.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)


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
