"""Golden files: every example CR rendered through the production path.

`UPDATE_GOLDEN=1` (or hack/update-golden.sh) rewrites them; review the diff like code.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
import yaml

from inferfleet.api import load_all
from inferfleet.cli.render import render_file, to_yaml
from inferfleet.config import OperatorSettings
from tests.conftest import REPO_ROOT, example_paths
from tests.unit.render.validation import validate

GOLDEN_DIR = REPO_ROOT / "tests" / "golden"
# Defaults, not the environment: goldens must not depend on who runs them. A default
# Gateway, so every example shows its front door (InferencePool, picker, HTTPRoute).
SETTINGS = OperatorSettings(gateway_name="inference-gateway", gateway_namespace="gateway-system")
EXAMPLES = example_paths()


def rendered(example: Path) -> str:
    return to_yaml(render_file(example, SETTINGS))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_matches_golden(example: Path) -> None:
    golden = GOLDEN_DIR / f"{example.stem}.yaml"
    text = rendered(example)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden file for {example.name}; run hack/update-golden.sh"
    expected = golden.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True), text.splitlines(True), str(golden), "rendered", n=2
            )
        )
        pytest.fail(f"{golden.name} is stale (hack/update-golden.sh rewrites it):\n{diff[:6000]}")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_rendering_is_deterministic(example: Path) -> None:
    assert rendered(example) == rendered(example)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_golden_object_is_valid(example: Path) -> None:
    documents = [d for d in yaml.safe_load_all(rendered(example)) if d]
    services = load_all(example.read_text(encoding="utf-8"))
    assert documents
    assert {d["metadata"]["namespace"] for d in documents} == {s.namespace for s in services}
    for document in documents:
        validate(document)


def test_every_example_has_a_golden_file_and_no_orphans() -> None:
    goldens = {p.stem for p in GOLDEN_DIR.glob("*.yaml")}
    assert goldens == {p.stem for p in EXAMPLES}
