"""The pure core stays in small named steps: no function over ~80 lines.

scaling/ (decide) and simulate/ are pure too and join this check in phase 2 of issue 19,
when their long functions (`decide`, `simulate`) are split.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "operator" / "inferfleet"
PURE_CORE = ("api", "catalog", "config.py", "kubedata.py", "planner", "precache", "reconcile", "render")
MAX_LINES = 85  # "about 80": a docstring or a long literal may push a step a little over


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def _modules() -> list[Path]:
    found: list[Path] = []
    for name in PURE_CORE:
        root = PACKAGE_DIR / name
        found.extend([root] if root.suffix == ".py" else sorted(root.rglob("*.py")))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_no_long_function_in_the_pure_core(path: Path) -> None:
    long = [(name, lines) for name, lines in _functions(path) if lines > MAX_LINES]
    assert long == [], f"split these into named pure steps: {long}"
