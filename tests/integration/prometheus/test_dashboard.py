"""The Grafana dashboard's queries are valid PromQL and find the emulated tiers."""

from __future__ import annotations

import json
import urllib.error
from typing import Any

import pytest

from inferfleet.autoscaling.prometheus.testkit import PrometheusServer
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

DASHBOARD = REPO_ROOT / "charts" / "inferfleet" / "files" / "grafana-dashboard.json"
# What Grafana substitutes before sending a query.
VARIABLES = {"$namespace": ".*", "$service": ".*", "$__rate_interval": "30s", "$__range": "1h"}


def expressions() -> list[tuple[str, str]]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found = []
    for panel in document["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            found.append((panel["title"], expr))
    return found


def test_dashboard_is_well_formed() -> None:
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert document["uid"] and document["title"]
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids))
    assert {variable["name"] for variable in document["templating"]["list"]} == {
        "datasource",
        "namespace",
        "service",
    }
    assert len(expressions()) >= 12


def test_every_query_runs_and_the_serving_panels_see_the_tiers(prometheus: PrometheusServer) -> None:
    for title, expr in expressions():
        try:
            answer = prometheus.api("/api/v1/query", query=expr)
        except urllib.error.HTTPError as error:  # 400: the expression does not parse
            pytest.fail(f"{title}: {expr}: {error.read().decode(errors='replace')}")
        assert answer["status"] == "success", (title, answer)
        if title in {"Queue depth (waiting requests)", "Running requests", "KV cache usage (hottest pod)"}:
            tiers = {series["metric"].get("inferfleet_tier") for series in answer["data"]["result"]}
            assert {"h100", "l4"} <= tiers, (title, tiers)
