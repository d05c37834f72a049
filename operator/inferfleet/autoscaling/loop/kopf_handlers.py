"""kopf wiring for the autoscaler: one background loop for all InferenceServices.

No kopf timer or daemon per object (kopf would put a finalizer on every
InferenceService, and deleting one would hang while the operator is down): the startup
handler starts `AutoscalerLoop`, the cleanup handler stops it. With several replicas
the loop acts only on the holder of the leader Lease (`controller.leader`), the same
Lease that gates the resync loop.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from inferfleet.autoscaling.loop.loop import AutoscalerLoop
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.cluster import KubernetesCluster
from inferfleet.config import OperatorSettings
from inferfleet.controller import leader
from inferfleet.metrics import operator_metrics

Logger = logging.Logger | logging.LoggerAdapter[Any]

_metrics_served = False


@kopf.on.startup()
def start_autoscaler(*, memo: Any, logger: Logger, **_: Any) -> None:
    global _metrics_served  # noqa: PLW0603 - one HTTP server per process
    settings: OperatorSettings = memo.get("settings") or OperatorSettings.from_env()
    metrics = memo.get("metrics") or operator_metrics.default_metrics()
    memo["metrics"] = metrics
    if not _metrics_served:
        operator_metrics.serve(settings.metrics_port, addr=memo.get("bind_address") or "0.0.0.0")
        _metrics_served = True
    if memo.get("autoscaler") is None:
        cluster = memo.get("cluster") or KubernetesCluster.from_environment()
        namespaces = memo.get("namespaces")
        memo["autoscaler"] = Autoscaler.from_settings(
            cluster,
            settings,
            metrics=metrics,
            namespaces=None if namespaces is None else tuple(namespaces),
        )
    if memo.get("autoscaler_loop") is None:
        autoscaler: Autoscaler = memo["autoscaler"]
        loop = AutoscalerLoop(
            autoscaler, tick_s=autoscaler.tick_s, is_leader=leader.gate_of(leader.from_memo(memo))
        )
        loop.start()
        memo["autoscaler_loop"] = loop
    logger.info("autoscaler reads %s every %.0fs", settings.prometheus_url, settings.sync_period_s)


@kopf.on.cleanup()
def stop_autoscaler(*, memo: Any, **_: Any) -> None:
    loop: AutoscalerLoop | None = memo.get("autoscaler_loop")
    if loop is not None:
        loop.stop()
    autoscaler: Autoscaler | None = memo.get("autoscaler")
    if autoscaler is not None:
        autoscaler.close()
    elector: leader.LeaderElector | None = memo.get("leader")
    if elector is not None:
        elector.stop()
