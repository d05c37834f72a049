"""Each class name is defined once in operator/inferfleet.

Two classes of one name (two `TierSignals`, one Prometheus's readings and one decide()'s
input) make every import a question of which one; a second definition fails here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "operator" / "inferfleet"


def test_no_class_name_is_defined_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert twice == {}
