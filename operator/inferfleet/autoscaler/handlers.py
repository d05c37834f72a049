"""kopf wiring for the autoscaler: a timer per InferenceService, one shared reader.

A timer (not a free-running task) so kopf's peering pauses the autoscaler on standby
replicas and its namespace filter applies. The timer fires every few seconds; each
object is decided only when its own sync period has passed, and all timers of one
tick share one batched Prometheus read and one workload listing (`Autoscaler`).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from inferfleet.api import labels
from inferfleet.autoscaler.runner import Autoscaler
from inferfleet.cluster import KubernetesCluster
from inferfleet.config import OperatorSettings
from inferfleet.metrics import operator_metrics

Logger = logging.Logger | logging.LoggerAdapter[Any]
GVP = (labels.GROUP, labels.VERSION, labels.PLURAL)
# The shortest sync period the API allows; objects with longer periods skip ticks.
TICK_S = 5.0

_metrics_served = False


@kopf.on.startup()
def start_autoscaler(*, memo: Any, logger: Logger, **_: Any) -> None:
    global _metrics_served  # noqa: PLW0603 - one HTTP server per process
    settings: OperatorSettings = memo.get("settings") or OperatorSettings.from_env()
    metrics = operator_metrics.default_metrics()
    if not _metrics_served:
        operator_metrics.serve(settings.metrics_port)
        _metrics_served = True
    if memo.get("autoscaler") is None:
        cluster = memo.get("cluster") or KubernetesCluster.from_environment()
        memo["autoscaler"] = Autoscaler.from_settings(cluster, settings, metrics=metrics)
    logger.info("autoscaler reads %s every %.0fs", settings.prometheus_url, settings.sync_period_s)


@kopf.on.cleanup()
def stop_autoscaler(*, memo: Any, **_: Any) -> None:
    autoscaler: Autoscaler | None = memo.get("autoscaler")
    if autoscaler is not None:
        autoscaler.close()


@kopf.timer(*GVP, id="autoscaler", interval=TICK_S, initial_delay=TICK_S)
def autoscale(*, body: kopf.Body, memo: Any, logger: Logger, **_: Any) -> None:
    autoscaler: Autoscaler = memo["autoscaler"]
    report = autoscaler.run_service(dict(body))
    if report.error:
        # The world's error (API server): logged here, retried on the next tick.
        logger.warning("autoscaler: %s", report.error)
    elif report.scaled:
        logger.info("autoscaler scaled %d tier(s)", report.scaled)
