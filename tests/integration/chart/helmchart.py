"""Render the chart through real Helm (helm-python-sdk: Helm's Go SDK in-process).

The rendering code is hack/gen_install.py's, so the install bundle and the tests see
the same objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

CHART_DIR = REPO_ROOT / "charts" / "inferfleet"
VALUES_DIR = Path(__file__).resolve().parent / "values"
NAMESPACE = "inferfleet-system"


gen_install = load_script("hack/gen_install.py", "gen_install")


def values_file(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((VALUES_DIR / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def render(values: dict[str, Any] | None = None, *, release: str = "inferfleet") -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = gen_install.render_chart(values, name=release, namespace=NAMESPACE)
    return objects


def notes(values: dict[str, Any] | None = None, *, release: str = "inferfleet") -> str:
    """The chart's NOTES.txt as `helm install` prints it."""
    with helm.Chart.load(CHART_DIR) as chart:
        rendered = chart.render(values=values, name=release, namespace=NAMESPACE, is_install=True)
    text: str = rendered[f"{CHART_DIR.name}/templates/NOTES.txt"]
    return text


def commands(text: str) -> list[str]:
    """The command lines a NOTES text prints (indented, starting with kubectl or helm)."""
    return [line.strip() for line in text.splitlines() if line.startswith(("  kubectl ", "  helm "))]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def named(objects: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    """The one object of `kind` whose name ends with `suffix`."""
    found = [o for o in by_kind(objects, kind) if o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"expected one {kind} named *{suffix}, got {len(found)}"
    return found[0]


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def env_of(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in operator_container(objects)["env"] if "value" in e}
