"""The operator's PodMonitors: what Prometheus attaches to their targets is the only
thing the autoscaler keys series by, so no endpoint may name its own series."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.api import labels
from inferfleet.config import OperatorSettings
from tests.toolkit.design import render
from tests.unit.render import plans

GATEWAY = OperatorSettings(gateway_name="inference-gateway", gateway_namespace="gateway-system")


def monitors() -> dict[str, dict[str, Any]]:
    objects = render(plans.service(frontDoor={"holdSeconds": 30}), plans.plan(), GATEWAY)
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodMonitor"}


@pytest.mark.parametrize(
    ("name", "job"), [("chat", labels.SCRAPE_JOB_SERVER), ("chat-epp", labels.SCRAPE_JOB_PICKER)]
)
def test_no_endpoint_can_name_its_own_series(name: str, job: str) -> None:
    """An endpoint exporting `namespace`, `job`, `pod` or `inferfleet_*` labels must not
    move its series: honorLabels off (they arrive as exported_<name>), no metric
    relabeling, the monitor sees its own namespace only, and it never rewrites the
    target's `namespace`, `pod` or `instance`."""
    monitor = monitors()[name]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is False
    assert "metricRelabelings" not in endpoint
    assert "namespaceSelector" not in monitor["spec"]
    assert endpoint["relabelings"][0] == {"targetLabel": "job", "replacement": job, "action": "replace"}
    written = {rule["targetLabel"] for rule in endpoint["relabelings"]}
    assert written.isdisjoint({labels.SERIES_LABEL_NAMESPACE, labels.SERIES_LABEL_POD, "instance"})
    assert "inferfleet_namespace" not in written
