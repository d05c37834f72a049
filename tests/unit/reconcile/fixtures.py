"""A fake control plane: the in-memory cluster, the real planner, the real handlers."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import kopf
import yaml

from inferfleet import handlers
from inferfleet.api import labels
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from inferfleet.controller.reconciler import Reconciler, cr_ref
from inferfleet.kubedata import ObjectRef
from tests.conftest import EXAMPLES_DIR

NAMESPACE = "ml-serving"
NAME = "llama-8b-chat"
LOGGER = logging.getLogger("tests")


def example(name: str = "llama-8b-chat.yaml") -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES_DIR / name).read_text())
    return body


class FakeClock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(seconds=1)
        return self.now


class Control:
    """One operator (a Reconciler in a kopf memo) on one in-memory cluster."""

    def __init__(self, cluster: InMemoryCluster | None = None) -> None:
        self.cluster = cluster or InMemoryCluster()
        if self.cluster.get(ObjectRef("v1", "Namespace", None, NAMESPACE)) is None:
            self.cluster.add_namespace(NAMESPACE)
        self.settings = OperatorSettings()
        self.memo = kopf.Memo(reconciler=self.new_reconciler())

    def new_reconciler(self) -> Reconciler:
        return Reconciler(self.cluster, self.settings, FakeClock())

    def restart(self) -> None:
        """A new operator process: nothing kept but the cluster."""
        self.memo = kopf.Memo(reconciler=self.new_reconciler())

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.cluster.user_apply(body, manager="kubectl")

    def edit(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        body = copy.deepcopy(self.cr())
        change(body)
        body["metadata"]["generation"] = body["metadata"].get("generation", 1)
        for key in ("resourceVersion", "uid", "generation"):
            body["metadata"].pop(key, None)
        body.pop("status", None)
        return self.submit(body)

    def reconcile(self, name: str = NAME) -> None:
        asyncio.run(
            handlers.reconcile_on_change(
                name=name, namespace=NAMESPACE, memo=self.memo, retry=0, logger=LOGGER
            )
        )

    def cr(self, name: str = NAME) -> dict[str, Any]:
        return self.cluster.objects[cr_ref(NAMESPACE, name)]

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.cr().get("status") or {}
        return status

    def condition(self, type_: str) -> dict[str, Any]:
        return next(c for c in self.status()["conditions"] if c["type"] == type_)

    def workloads(self) -> dict[str, dict[str, Any]]:
        return {
            obj["metadata"]["labels"][labels.LABEL_TIER]: obj
            for obj in self.cluster.kinds("Deployment")
            if labels.LABEL_TIER in obj["metadata"]["labels"]
        }  # not the front door's pickers

    def workload_ref(self, tier: str) -> ObjectRef:
        return ObjectRef("apps/v1", "Deployment", NAMESPACE, f"{NAME}-{tier}")

    def mark_ready(self) -> None:
        """What the Deployment controller and kubelets would report once pods are ready."""
        for ref, obj in list(self.cluster.objects.items()):
            if ref.is_workload:
                replicas = obj["spec"].get("replicas", 1)
                self.cluster.set_status(
                    ref,
                    {
                        "observedGeneration": obj["metadata"]["generation"],
                        "replicas": replicas,
                        "updatedReplicas": replicas,
                        "readyReplicas": replicas,
                    },
                )

    def applied_workloads(self) -> list[ObjectRef]:
        return [ref for op, ref in self.cluster.calls if op == "apply" and ref.is_workload]
