"""The RBAC tables of docs/security/tenancy.md are the default install's rules, exactly.

Each row (API group, resources, verbs, and the one object a verb is limited to after
"of") must be a rule of a ClusterRole or Role in manifests/install.yaml (the chart
rendered with its defaults; its own test keeps it fresh), and every such rule a row.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import REPO_ROOT

TENANCY = REPO_ROOT / "docs" / "security" / "tenancy.md"
INSTALL = REPO_ROOT / "manifests" / "install.yaml"
SECTION = "### RBAC, by install mode"
TABLE_HEADER = "| API group | resources | verbs | for |"

# (API group, resources, verbs, resourceNames)
Rule = tuple[str, frozenset[str], frozenset[str], frozenset[str]]


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def documented_rules(text: str) -> list[Rule]:
    section = text[text.index(SECTION) :]
    following = re.search(r"^##? ", section[len(SECTION) :], re.M)
    if following is not None:
        section = section[: len(SECTION) + following.start()]
    rules: list[Rule] = []
    in_table = False
    for line in section.splitlines():
        if line.strip() == TABLE_HEADER:
            in_table = True
            continue
        if not in_table or not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        group = "" if cells[0] == "core" else _ticked(cells[0])[0]
        verbs, _, names = cells[2].partition(" of ")
        rules.append(
            (group, frozenset(_ticked(cells[1])), frozenset(_ticked(verbs)), frozenset(_ticked(names)))
        )
    return rules


def installed_rules() -> list[Rule]:
    rules: list[Rule] = []
    for document in yaml.safe_load_all(INSTALL.read_text(encoding="utf-8")):
        if not document or document.get("kind") not in ("ClusterRole", "Role"):
            continue
        rule: dict[str, Any]
        for rule in document["rules"]:
            (group,) = rule["apiGroups"]
            rules.append(
                (
                    group,
                    frozenset(rule["resources"]),
                    frozenset(rule["verbs"]),
                    frozenset(rule.get("resourceNames", [])),
                )
            )
    return rules


def test_the_documented_rbac_is_the_default_installs() -> None:
    documented = documented_rules(TENANCY.read_text(encoding="utf-8"))
    installed = installed_rules()
    assert len(documented) == len(set(documented)), "a rule is documented twice"
    assert set(documented) - set(installed) == set(), "documented, not granted"
    assert set(installed) - set(documented) == set(), "granted, not documented"


def test_a_wrong_row_is_noticed() -> None:
    text = TENANCY.read_text(encoding="utf-8")
    row = "| core | `pods` | `get`, `list`, `watch` |"
    assert row in text
    changed = documented_rules(text.replace(row, "| core | `pods` | `list` |"))
    assert set(changed) != set(installed_rules())
