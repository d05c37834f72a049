"""What `helm install` prints after installing: commands that work as printed, from the
checkout the chart came from (tests/e2e/test_quickstart.py runs them on a real cluster)."""

from __future__ import annotations

import shlex

import pytest
import yaml

from inferfleet.api import load_all
from tests.conftest import REPO_ROOT
from tests.integration.chart.helmchart import commands, notes

pytestmark = pytest.mark.integration


def applied_files(lines: list[str]) -> list[str]:
    return [shlex.split(line)[-1] for line in lines if line.startswith("kubectl apply -f ")]


def test_the_notes_create_what_the_example_needs_before_applying_it() -> None:
    printed = commands(notes())
    files = applied_files(printed)
    assert files == ["manifests/examples/setup/namespaces.yaml", "manifests/examples/llama-8b-chat.yaml"]
    assert all((REPO_ROOT / path).is_file() for path in files)  # relative to the checkout, as printed
    (service,) = load_all((REPO_ROOT / files[-1]).read_text())
    namespaces = {
        doc["metadata"]["name"]: doc["metadata"]["labels"]
        for doc in yaml.safe_load_all((REPO_ROOT / files[0]).read_text())
    }
    assert namespaces[service.namespace]["pod-security.kubernetes.io/enforce"] == "baseline"
    secret = service.spec.model.credentials_secret_ref
    assert secret is not None
    created = next(line for line in printed if line.startswith("kubectl create secret"))
    assert shlex.split(created)[4:] == [
        secret.name, "-n", service.namespace, f"--from-literal={secret.key}=$HF_TOKEN"
    ]  # fmt: skip
    # The namespace and the Secret come before the service that needs them.
    assert printed.index(created) < printed.index(f"kubectl apply -f {files[-1]}")
    assert printed[-1] == f"kubectl get inferenceservices -n {service.namespace}"
    assert not [line for line in notes().splitlines() if "https://" in line]  # nothing to fetch


def test_a_release_that_does_not_watch_the_examples_namespace_says_how_to_add_it() -> None:
    assert not [
        line for line in commands(notes({"watchNamespaces": ["ml-serving"]})) if line.startswith("helm")
    ]
    printed = commands(notes({"watchNamespaces": ["team-a", "team-b"]}, release="fleet"))
    upgrade = next(line for line in printed if line.startswith("helm upgrade"))
    assert shlex.split(upgrade) == [
        "helm", "upgrade", "fleet", "charts/inferfleet", "-n", "inferfleet-system", "--reuse-values",
        "--set", "watchNamespaces={team-a,team-b,ml-serving}",
    ]  # fmt: skip
    assert (REPO_ROOT / "charts" / "inferfleet" / "Chart.yaml").is_file()
    # Watched namespaces must exist before the upgrade grants the Roles in them.
    assert printed.index("kubectl apply -f manifests/examples/setup/namespaces.yaml") < printed.index(upgrade)


def test_the_notes_name_the_image_the_release_runs() -> None:
    assert "(image ghcr.io/inferfleet/inferfleet:0.1.0)" in notes()
    digest = "sha256:" + "a" * 64
    own = notes({"image": {"repository": "registry.example/team/inferfleet", "tag": "dev", "digest": digest}})
    assert f"(image registry.example/team/inferfleet:dev@{digest})" in own


def test_the_install_guide_is_what_the_notes_print() -> None:
    text = (REPO_ROOT / "docs" / "getting-started" / "install.md").read_text()
    section = text[text.index("## The first InferenceService") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("\n```", start)]
    readme = [line.split("  #")[0].strip() for line in block.splitlines()]
    assert readme == commands(notes())
