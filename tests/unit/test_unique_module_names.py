"""Each module file name says where it lives: no two modules of operator/inferfleet share
one, except the CLI's, each named after the `inferfleet` command it implements.

`frontdoor.py` in three packages, `status.py` in two, made every "which one?" a search;
a second module of a name fails here (package `__init__.py` files aside).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "operator" / "inferfleet"
COMMANDS_DIR = PACKAGE_DIR / "cli"


def test_no_module_file_name_is_used_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name == "__init__.py" or path.parent == COMMANDS_DIR:
            continue
        where[path.name].append(str(path.relative_to(PACKAGE_DIR)))
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert twice == {}
