"""Every package stays in small named steps: no function body over ~80 lines.

Every module of the package is checked, the pure core and the I/O shells alike; the
length is the body's (docstring included), not the signature's, so a CLI command's
option declarations do not count against it.

A longer function must say why in a `# hot loop:` comment right after its docstring
(the simulator's per-request replay is the one today).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.test_import_contracts import package_map, pure_packages

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "operator" / "inferfleet"
HOT_LOOP_MARK = "# hot loop:"
MAX_LINES = 85  # "about 80": a docstring or a long literal may push a step a little over


def _says_why(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    """A `# hot loop:` comment between the def (and its docstring) and the first statement."""
    body = node.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    first = body[1] if has_docstring and len(body) > 1 else body[0]
    return any(line.strip().startswith(HOT_LOOP_MARK) for line in lines[node.lineno : first.lineno - 1])


def _functions(path: Path) -> list[tuple[str, int]]:
    """(name, body lines) of every function, leaving out the ones that say why they are long."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    return [
        (node.name, (node.end_lineno or node.lineno) - node.body[0].lineno + 1)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _says_why(node, lines)
    ]


def _modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_the_check_covers_every_package() -> None:
    # Every package of the package map, pure and I/O (test_import_contracts holds the map
    # to the layers contract): a new package is checked here without a list to update.
    checked = {
        path.relative_to(PACKAGE_DIR).with_suffix("").as_posix().replace("/", ".") for path in _modules()
    }

    def covered(package: str) -> bool:
        return any(module == package or module.startswith(package + ".") for module in checked)

    assert all(covered(package) for package in package_map())
    assert all(covered(package) for package in pure_packages())


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_no_long_function(path: Path) -> None:
    long = [(name, lines) for name, lines in _functions(path) if lines > MAX_LINES]
    assert long == [], f"split these into named pure steps: {long}"


def test_only_a_marked_hot_loop_may_be_long(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    body = "    x = 1\n" * (MAX_LINES + 5)
    many_options = "".join(f"    option_{index}: int = {index},\n" for index in range(MAX_LINES))
    source.write_text(
        f'def marked():\n    """Doc."""\n    {HOT_LOOP_MARK} why\n{body}'
        f'def unmarked():\n    """Doc."""\n{body}'
        f'def marked_too_late():\n    """Doc."""\n    x = 0\n    {HOT_LOOP_MARK} why\n{body}'
        f'def long_signature_short_body(\n{many_options}) -> None:\n    """Doc."""\n    x = 1\n',
        encoding="utf-8",
    )
    assert sorted(name for name, lines in _functions(source) if lines > MAX_LINES) == [
        "marked_too_late",
        "unmarked",
    ]
