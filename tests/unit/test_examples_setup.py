"""Every example's prerequisites are named: its namespace is in
manifests/examples/setup/namespaces.yaml (Pod Security baseline at most), and every Secret
it reads is in the install guide's table of what to create (docs/getting-started/install.md),
with its key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES_DIR, REPO_ROOT, example_paths

SETUP = EXAMPLES_DIR / "setup" / "namespaces.yaml"
# Pod Security levels from the most to the least permissive.
LEVELS = ("privileged", "baseline", "restricted")


def secret_refs(node: Any) -> Iterator[tuple[str, str]]:
    """(name, key) of every Secret a manifest reads: `credentialsSecretRef` (key `token`
    unless given) and every `secretKeyRef`."""
    if isinstance(node, dict):
        for field, value in node.items():
            if field in ("credentialsSecretRef", "secretKeyRef") and isinstance(value, dict):
                yield value["name"], value.get("key", "token")
            else:
                yield from secret_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from secret_refs(item)


def setup_table() -> dict[str, tuple[str, str]]:
    """Example stem -> (namespace cell, Secrets cell) of the install guide's table."""
    text = (REPO_ROOT / "docs" / "getting-started" / "install.md").read_text()
    start = text.index("| example | namespace | Secrets (key) |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        examples, namespace, secrets = (cell.strip() for cell in line.strip("|").split("|", 2))
        for stem in re.findall(r"`([^`]+)`", examples):
            rows[stem] = (namespace.strip("`"), secrets)
    return rows


def namespaces() -> dict[str, dict[str, str]]:
    return {
        doc["metadata"]["name"]: doc["metadata"].get("labels", {})
        for doc in yaml.safe_load_all(SETUP.read_text())
    }


@pytest.mark.parametrize("example", example_paths(), ids=lambda p: p.stem)
def test_the_examples_namespace_and_secrets_are_named(example: Path) -> None:
    body = yaml.safe_load(example.read_text())
    namespace = body["metadata"]["namespace"]
    labels = namespaces()[namespace]
    enforced = labels["pod-security.kubernetes.io/enforce"]
    assert LEVELS.index(enforced) <= LEVELS.index("baseline"), f"{namespace}: {enforced}"
    row_namespace, row_secrets = setup_table()[example.stem]
    assert row_namespace == namespace
    refs = set(secret_refs(body))
    for name, key in refs:
        assert f"`{name}` (`{key}`)" in row_secrets, f"{example.name} reads {name}/{key}"
    if not refs:
        assert row_secrets.startswith("none")


def test_the_setup_creates_only_namespaces_the_examples_use() -> None:
    used = {yaml.safe_load(path.read_text())["metadata"]["namespace"] for path in example_paths()}
    assert set(namespaces()) == used
    assert set(setup_table()) == {path.stem for path in example_paths()}
