"""A namespace-only install (no ClusterRole) turns kopf's cluster-wide scanning off."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from inferfleet import handlers
from inferfleet.config import OperatorSettings


@pytest.mark.parametrize("scanning", [True, False])
def test_cluster_scanning_follows_the_setting(scanning: bool) -> None:
    settings = kopf.OperatorSettings()
    memo: Any = kopf.Memo(
        settings=OperatorSettings(cluster_scanning=scanning), reconciler=object(), resync=object()
    )
    handlers.configure(settings=settings, memo=memo)
    assert settings.scanning.disabled is (not scanning)


def test_defaults_grant_the_least() -> None:
    defaults = OperatorSettings()
    assert defaults.pod_deletion_cost is False  # no `patch pods` unless asked for
    assert defaults.cluster_scanning is True  # the chart turns it off with rbac.namespaceOnly
