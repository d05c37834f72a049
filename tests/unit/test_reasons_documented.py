"""Every condition type and every reason the operator can write is in the README's table.

The table is README "Conditions, reasons and Events". What the code can write is
collected from the source (as tests/unit/test_condition_owners.py collects condition
types), so a new reason fails here until it has its row:

- every `REASON_*` / `EVENT_*` string constant anywhere in the package;
- every string literal handed over as a reason: `ConditionUpdate(type, status, REASON,
  ...)`, `set_condition(conditions, type, status, REASON, ...)`, `Event(type, REASON,
  ...)`, `CacheCondition(status, REASON, ...)`, any `reason=` keyword of those, and the
  `(status, REASON, message)` triples the reconciler's rules return;
- the fetchers' failure reasons (`precache.errors.REASONS`), which CacheReady shows.

And the other way round: a row whose reason the code never writes is a stale row.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from inferfleet.api import labels
from inferfleet.precache import errors
from tests.unit.test_condition_owners import PACKAGE_DIR

README = PACKAGE_DIR.parents[1] / "README.md"
SECTION = "### Conditions, reasons and Events"
CONSTANT_NAME = re.compile(r"^(REASON|EVENT)_[A-Z0-9_]+$")
REASON_WORD = re.compile(r"^[A-Z][A-Za-z0-9]+$")
# Where a call takes its reason: positional index, and the keyword.
REASON_ARGUMENT = {"ConditionUpdate": 2, "set_condition": 3, "Event": 1, "CacheCondition": 1}
STATUSES = {"True", "False", "Unknown"}
EVENT_ROW = "Event"


def _name_of(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and REASON_WORD.match(node.value):
        return None if node.value in STATUSES else node.value
    return None


def written_reasons() -> dict[str, str]:
    """Reason -> where the code names it first."""
    found: dict[str, str] = {}

    def add(value: str | None, path: Path, node: ast.AST) -> None:
        if value is not None:
            found.setdefault(value, f"{path.relative_to(PACKAGE_DIR)}:{getattr(node, 'lineno', 0)}")

    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and CONSTANT_NAME.match(t.id) for t in targets):
                    add(_literal(node.value), path, node)
            elif isinstance(node, ast.Call) and _name_of(node.func) in REASON_ARGUMENT:
                index = REASON_ARGUMENT[str(_name_of(node.func))]
                if len(node.args) > index:
                    add(_literal(node.args[index]), path, node)
                for keyword in node.keywords:
                    if keyword.arg == "reason":
                        add(_literal(keyword.value), path, node)
            elif isinstance(node, ast.Tuple) and len(node.elts) == 3:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value in STATUSES:
                    add(_literal(node.elts[1]), path, node)
    for reason in errors.REASONS:
        found.setdefault(reason, "precache/errors.py")
    return found


def table() -> list[list[str]]:
    """The rows of the first table after the section heading, as cells."""
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, f"README has no section {SECTION!r}"
    rows: list[list[str]] = []
    for line in text.split(SECTION, 1)[1].splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, "the section has no table"
    header, rule, *body = rows
    assert header[:3] == ["Condition", "Status", "Reason"], header
    assert set("".join(rule)) <= set("-: "), rule
    return body


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_every_condition_type_has_rows_naming_its_writer() -> None:
    rows = table()
    for row in rows:
        (condition,) = _ticked(row[0]) or [row[0]]
        assert condition in (*labels.CONDITION_TYPES, EVENT_ROW), row
        if condition != EVENT_ROW:
            assert row[3] == labels.CONDITION_OWNERS[condition], row
    documented = {(_ticked(row[0]) or [row[0]])[0] for row in rows}
    assert set(labels.CONDITION_TYPES) - documented == set()


def test_every_reason_the_code_can_write_is_in_the_table() -> None:
    documented = {reason for row in table() for reason in _ticked(row[2])}
    missing = {reason: where for reason, where in written_reasons().items() if reason not in documented}
    assert missing == {}, f"add a row to README {SECTION!r} for each: {missing}"


def test_the_table_names_no_reason_the_code_never_writes() -> None:
    written = written_reasons()
    stale = sorted({reason for row in table() for reason in _ticked(row[2])} - set(written))
    assert stale == []


def test_the_collector_finds_what_it_is_meant_to() -> None:
    """The collector itself: constants, literals in each position, the fetchers' reasons."""
    found = written_reasons()
    assert {"Available", "NoWorkloads", "NoFeasibleTier", "ObjectConflict", "RouteShadowed"} <= set(found)
    assert {"ScaledUp", "PlanChanged", "TierPruned", "WorkloadDrift", "PromptsRejected"} <= set(found)
    assert {"BadCredentials", "DiskFull", "NodeCacheVolumePending", "Probing"} <= set(found)
