"""The import contracts (pyproject.toml, `lint-imports`) cover every package and really
fail when a pure package imports what it must not.

Each probe copies the package tree, appends one forbidden import to one module of the
copy and runs lint-imports with the project's own contracts against the copy: the run
must fail and name the contract that caught it. The unmodified copy must pass, so a
failure is the probe's doing.
"""

from __future__ import annotations

import ast
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "operator" / "inferfleet"
PYPROJECT = ROOT / "pyproject.toml"
PACKAGE_MAP = ROOT / "docs" / "contributing" / "development.md"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

LAYERS = "Layers: entry points > I/O shells > ports > pure core"
PURE = "The pure core never talks to the outside world"
CLUSTER_PORT = "The cluster port knows objects, not decisions"
SIMULATOR = "The simulator replays without I/O"

# (module file of the copy to change, the import appended to it, the contract that must break)
PROBES = [
    # the three holes issue 19 found in the old module list
    ("planner/__init__.py", "import prometheus_client", PURE),
    ("render/__init__.py", "import inferfleet.caching.fetcher.fetch", LAYERS),
    ("api/__init__.py", "import inferfleet.planner", LAYERS),
    # one upward import into every pure package, and one I/O library or module
    ("api/__init__.py", "import kopf", PURE),
    ("catalog/__init__.py", "import inferfleet.render", LAYERS),
    ("catalog/__init__.py", "import requests", PURE),
    ("planner/__init__.py", "import inferfleet.controller", LAYERS),
    ("config.py", "import inferfleet.cluster", LAYERS),
    ("config.py", "import urllib.request", PURE),
    ("caching/precache/__init__.py", "import inferfleet.caching.fetcher.store", LAYERS),
    ("caching/precache/__init__.py", "import socket", PURE),
    ("render/__init__.py", "import inferfleet.autoscaling.policy", LAYERS),  # render | autoscaling.policy
    ("render/__init__.py", "import kubernetes", PURE),
    ("autoscaling/policy/__init__.py", "import inferfleet.render", LAYERS),
    ("autoscaling/policy/__init__.py", "import time", PURE),
    # the design sits below what consumes it (render, the policy) and talks to nothing
    ("design/__init__.py", "import inferfleet.render", LAYERS),
    ("design/topology.py", "import inferfleet.autoscaling.policy", LAYERS),
    ("design/checks.py", "import socket", PURE),
    ("reconcile/__init__.py", "import inferfleet.controller", LAYERS),
    ("reconcile/__init__.py", "import threading", PURE),
    ("kubedata.py", "import inferfleet.api", LAYERS),  # api | kubedata
    ("kubedata.py", "import subprocess", PURE),
    ("autoscaling/promql/__init__.py", "import inferfleet.autoscaling.prometheus.reader", LAYERS),
    ("autoscaling/promql/signals.py", "import inferfleet.reconcile", LAYERS),
    ("autoscaling/promql/parse.py", "import prometheus_api_client", PURE),
    ("autoscaling/promql/queries.py", "import requests", PURE),
    ("autoscaling/promql/history.py", "import time", PURE),
    # the port and the I/O shells keep their places too
    ("cluster/__init__.py", "import inferfleet.reconcile", CLUSTER_PORT),
    ("cluster/__init__.py", "import inferfleet.caching.fetcher", LAYERS),  # cluster | caching.fetcher
    ("autoscaling/simulate/__init__.py", "import inferfleet.controller", LAYERS),
    ("autoscaling/simulate/engine.py", "import inferfleet.autoscaling.tracefiles.read", LAYERS),
    ("autoscaling/simulate/traces.py", "import subprocess", SIMULATOR),
    ("autoscaling/simulate/report.py", "import matplotlib", SIMULATOR),
    ("autoscaling/simulate/engine.py", "import time", SIMULATOR),  # the clock is the caller's
    (
        "autoscaling/simulate/setup.py",
        "import inferfleet.reconcile",
        LAYERS,
    ),  # reconcile | autoscaling.simulate
    # the autoscaler step: no I/O, no loop above it, no peer of its layer
    ("autoscaling/step/step.py", "import kopf", PURE),
    ("autoscaling/step/drift_report.py", "import time", PURE),
    ("autoscaling/step/step.py", "import inferfleet.autoscaling.prometheus.reader", LAYERS),
    ("autoscaling/step/step.py", "import inferfleet.autoscaling.loop.runner", LAYERS),
    (
        "autoscaling/step/drift_report.py",
        "import inferfleet.autoscaling.simulate",
        LAYERS,
    ),  # autoscaling.step | autoscaling.simulate
]


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return list(config["tool"]["importlinter"]["contracts"])


def _names(layer: str) -> list[str]:
    return [name.strip().removeprefix("inferfleet.") for name in re.split(r"[|:]", layer)]


def pure_packages() -> list[str]:
    """Every package a contract keeps off the network (forbids `socket` to): pure."""
    return sorted(
        str(module).removeprefix("inferfleet.")
        for contract in _contracts()
        if contract["type"] == "forbidden" and "socket" in contract["forbidden_modules"]
        for module in contract["source_modules"]
    )


def package_map_rows() -> list[tuple[list[str], str]]:
    """The package map of the development guide: per row, its packages (`cli/` -> cli,
    `autoscaling/policy/` -> autoscaling.policy) and its kind."""
    text = PACKAGE_MAP.read_text(encoding="utf-8")
    rows = re.findall(r"^\s*\| \w+ \| (.+?) \| (pure|I/O) \|", text, flags=re.MULTILINE)
    return [
        ([name.replace("/", ".") for name in re.findall(r"`(\w+(?:/\w+)*)(?:/|\.py)`", cell)], kind)
        for cell, kind in rows
    ]


def package_map() -> dict[str, str]:
    """Package -> "pure" or "I/O", as the package map says."""
    return {name: kind for names, kind in package_map_rows() for name in names}


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    copy = tmp_path / "src" / "inferfleet"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    return tmp_path


def _is_feature_folder(path: Path) -> bool:
    """A package whose own __init__ holds only its docstring and which has subpackages
    (autoscaling/, caching/): its parts take their places one by one."""
    init = ast.parse((path / "__init__.py").read_text(encoding="utf-8"))
    only_docstring = all(isinstance(node, ast.Expr) for node in init.body)
    return only_docstring and any(child.ispkg for child in pkgutil.iter_modules([str(path)]))


def _modules_to_place() -> set[str]:
    """Every top-level package and module, and each part of a feature folder."""
    found: set[str] = set()
    for module in pkgutil.iter_modules([str(PACKAGE_DIR)]):
        path = PACKAGE_DIR / module.name
        if module.ispkg and _is_feature_folder(path):
            found.update(
                f"inferfleet.{module.name}.{child.name}" for child in pkgutil.iter_modules([str(path)])
            )
        else:
            found.add(f"inferfleet.{module.name}")
    return found


def test_every_package_has_a_place_in_the_layers() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")
    placed = {name.strip() for layer in layers["layers"] for name in re.split(r"[|:]", str(layer))}
    to_place = _modules_to_place()
    assert to_place - placed == set(), "every package and top-level module needs a layer"
    assert placed - to_place == set(), "a layer names a package that does not exist"


def test_the_package_map_is_the_layers_contract_and_says_which_packages_are_pure() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")
    # Row by row, the same packages in the same order as the contract's layers ...
    assert [names for names, _ in package_map_rows()] == [_names(layer) for layer in layers["layers"]]
    # ... and "pure" exactly where a contract forbids the network.
    assert sorted(name for name, kind in package_map().items() if kind == "pure") == pure_packages()


def _package_of(module: str) -> str:
    """`autoscaling/policy/__init__.py` -> autoscaling.policy, `config.py` -> config: the
    contracted package a probed file belongs to."""
    contracted = set(pure_packages()) | {"autoscaling.simulate"}
    parts = module.removesuffix(".py").split("/")
    for depth in range(len(parts), 0, -1):
        name = ".".join(parts[:depth])
        if name in contracted:
            return name
    return parts[0]


def test_every_pure_package_is_probed_with_an_io_import() -> None:
    probed = {_package_of(module) for module, _, c in PROBES if c in (PURE, SIMULATOR)}
    assert probed == set(pure_packages())


def test_the_unchanged_tree_keeps_every_contract(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(("module", "statement", "contract"), PROBES, ids=[f"{m}:{s}" for m, s, _ in PROBES])
def test_a_forbidden_import_breaks_a_contract(tree: Path, module: str, statement: str, contract: str) -> None:
    target = tree / "src" / "inferfleet" / module
    probed = target.read_text(encoding="utf-8") + f"\n{statement}  # contract probe\n"
    target.write_text(probed, encoding="utf-8")
    result = _lint(tree)
    assert result.returncode != 0, f"{statement!r} in {module} passed lint-imports:\n{result.stdout}"
    assert f"{contract} BROKEN" in result.stdout, result.stdout
