"""The reference pages are generated from the code (hack/gen_docs.py) and complete.

Staleness: rendering them again gives the checked-in pages byte for byte. Completeness,
read off the code independently of the generator's tables: every condition, reason,
setting, Helm value, CRD field, CLI command, metric and alert appears in its page.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from inferfleet.api import labels
from inferfleet.config import ENV_PREFIX, OperatorSettings
from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

gen_docs = load_script("hack/gen_docs.py", "inferfleet_gen_docs_generated")
DOCS = REPO_ROOT / "docs"


def page(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


def ticked(text: str) -> set[str]:
    """The code spans of a page (single or double backticks)."""
    return {match.group(2).strip() for match in re.finditer(r"(`+)(.+?)(?<!`)\1(?!`)", text)}


@pytest.mark.parametrize("path", sorted(gen_docs.PAGES))
def test_the_generated_page_is_current(path: str) -> None:
    rendered = gen_docs.PAGES[path]()
    assert (DOCS / path).is_file(), f"docs/{path} is missing: run python hack/gen_docs.py"
    assert page(path) == rendered, f"docs/{path} is stale: run python hack/gen_docs.py"


def test_the_check_mode_names_a_stale_page(tmp_path: pytest.TempPathFactory) -> None:
    rendered = gen_docs.render_all()
    changed = {**rendered, "reference/cli.md": rendered["reference/cli.md"] + "\nedited by hand\n"}
    assert gen_docs.stale_pages(rendered) == []
    assert gen_docs.stale_pages(changed) == ["reference/cli.md"]


def test_every_condition_and_reason_is_in_the_reference_and_the_troubleshooting_page() -> None:
    reference = ticked(page("reference/conditions.md"))
    troubleshooting = page("operations/troubleshooting.md")
    for condition in labels.CONDITION_TYPES:
        assert condition in reference, condition
    for reason in gen_docs.written_reasons():
        assert reason in reference, reason
        assert re.search(rf"\b{reason}\b", troubleshooting), reason


def test_every_setting_is_in_the_settings_reference() -> None:
    documented = ticked(page("reference/settings.md"))
    for name in OperatorSettings.model_fields:
        assert ENV_PREFIX + name.upper() in documented, name


def test_every_setting_the_chart_sets_names_its_helm_value() -> None:
    """The chart's Deployment passes a Helm value into every variable it sets, and the
    settings page says which."""
    by_variable = gen_docs.helm_values_by_variable()
    text = page("reference/settings.md")
    for variable, values in by_variable.items():
        assert values, variable
        row = next(line for line in text.splitlines() if line.startswith(f"| `{variable}` |"))
        assert all(f"`{value}`" in row for value in values), row


def _schema_paths(node: dict[str, object], prefix: str = "") -> list[str]:
    found = []
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            path = f"{prefix}.{name}" if prefix else name
            found.append(path)
            found += _schema_paths(child, path)
    items = node.get("items")
    if isinstance(items, dict):
        found += _schema_paths(items, prefix + "[]")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        found += _schema_paths(extra, prefix + ".*")
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key) or []:  # type: ignore[attr-defined]
            found += _schema_paths(option, prefix)
    return found


def test_every_helm_value_is_in_the_helm_reference_with_a_description() -> None:
    schema = json.loads((REPO_ROOT / "charts" / "inferfleet" / "values.schema.json").read_text())
    text = page("reference/helm-values.md")
    for path in _schema_paths(schema):
        row = next((line for line in text.splitlines() if line.startswith(f"| `{path}` |")), None)
        assert row is not None, f"Helm value {path} is missing from docs/reference/helm-values.md"
        assert row.rstrip(" |").split(" | ")[-1].strip(), f"Helm value {path} has no description"


def test_every_crd_field_is_in_the_api_reference() -> None:
    crd = yaml.safe_load((REPO_ROOT / "crds" / "inferenceservices.inferfleet.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    documented = ticked(page("reference/api.md"))
    paths = [p for p in _schema_paths(schema) if p.split(".")[0] in ("spec", "status") and "." in p]
    assert len(paths) > 100
    missing = [p for p in paths if p not in documented]
    assert missing == []


def test_every_cli_command_and_option_is_in_the_cli_reference() -> None:
    text = page("reference/cli.md")
    root = gen_docs._click_command()
    for name, command in gen_docs._commands(root, ""):
        assert f"## inferfleet{name}\n" in text, name
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in text, (name, param.opts)


def test_every_metric_and_alert_is_in_the_metrics_reference() -> None:
    documented = ticked(page("reference/metrics.md"))
    for name, *_ in gen_docs.operator_metrics():
        assert name in documented, name
    assert {"inferfleet_reconcile_total", "inferfleet_autoscaler_desired_replicas"} <= documented
    rules = gen_docs.alert_rules()
    assert any("alert" in rule for rule in rules)
    for rule in rules:
        assert rule.get("alert", rule.get("record")) in documented, rule
