"""One writer per condition type (LeaderWorkerSet's convention), checked in the source.

A condition type constant (`labels.CONDITION_*`) may be *used* (passed, returned,
stored: anything but compared) only by the component `labels.CONDITION_OWNERS` names;
any other package may only compare with it (`c.get("type") == labels.CONDITION_X`), i.e.
read. Writing a condition always passes its type somewhere, so a second writer fails here,
as does a literal condition type handed to a call. The reconciler and the autoscaler
running side by side are checked at runtime in tests/unit/autoscaler/test_condition_writers.py.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from inferfleet.api import labels

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "operator" / "inferfleet"
# Each writer is a pure package that decides and the I/O shell that executes it.
COMPONENTS = {
    labels.OWNER_RECONCILER: {"reconcile", "controller", "handlers"},
    labels.OWNER_AUTOSCALER: {"autoscaling/step", "autoscaling/loop"},
}
CONSTANTS = {name: getattr(labels, name) for name in dir(labels) if name.startswith("CONDITION_")}
TYPE_CONSTANTS = {name for name, value in CONSTANTS.items() if isinstance(value, str)}


def _component(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
    # A feature folder's parts are components of their own (autoscaling/step, ...).
    names = {parts[0], "/".join(parts[:2])}
    return next((owner for owner, tops in COMPONENTS.items() if names & tops), "/".join(parts[:2]))


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _constant_of(node: ast.AST) -> str | None:
    """The CONDITION_* constant `node` names (`labels.CONDITION_X` or an imported name)."""
    if isinstance(node, ast.Attribute) and node.attr in TYPE_CONSTANTS:
        return node.attr
    if isinstance(node, ast.Name) and node.id in TYPE_CONSTANTS:
        return node.id
    return None


def _sources() -> list[Path]:
    return [p for p in sorted(PACKAGE_DIR.rglob("*.py")) if p.relative_to(PACKAGE_DIR).parts[0] != "api"]


def _users() -> dict[str, set[str]]:
    """Condition type -> the components that use its constant other than in a comparison."""
    users: dict[str, set[str]] = defaultdict(set)
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = _parents(tree)
        for node in ast.walk(tree):
            name = _constant_of(node)
            if name is not None and not isinstance(parents.get(node), ast.Compare):
                users[CONSTANTS[name]].add(_component(path))
    return users


def test_every_condition_type_has_exactly_one_declared_owner() -> None:
    assert set(labels.CONDITION_OWNERS) == set(labels.CONDITION_TYPES)
    assert {CONSTANTS[name] for name in TYPE_CONSTANTS} == set(labels.CONDITION_TYPES)
    assert set(labels.CONDITION_OWNERS.values()) == set(COMPONENTS)


def test_each_condition_type_is_written_by_its_owner_only() -> None:
    users = _users()
    for type_ in labels.CONDITION_TYPES:
        assert users.get(type_) == {labels.CONDITION_OWNERS[type_]}, (
            f"{type_} is used (not only compared) by {sorted(users.get(type_, set()))}; "
            f"only the {labels.CONDITION_OWNERS[type_]} may write it"
        )


def test_no_call_is_handed_a_literal_condition_type() -> None:
    """`set_condition(c, "Degraded", ...)` would dodge the constant-based check above."""
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Constant) and arg.value in labels.CONDITION_TYPES:
                    found.append(f"{path.relative_to(PACKAGE_DIR)}:{arg.lineno} {arg.value!r}")
    assert found == []


def test_no_writer_tells_itself_apart_by_a_message_prefix() -> None:
    assert not hasattr(labels, "AUTOSCALER_MESSAGE_PREFIX")
    for path in _sources():
        assert "AUTOSCALER_MESSAGE_PREFIX" not in path.read_text(encoding="utf-8"), path
