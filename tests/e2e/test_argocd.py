"""The bundled Argo CD health check (health.lua, run by a real Lua) on the live objects the
operator produces: Progressing while it plans and rolls out, Healthy once Ready, Degraded
when the spec cannot be served."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually
from tests.e2e.spec import gpu_service

lupa = pytest.importorskip("lupa")

SCRIPT = (
    REPO_ROOT
    / "manifests"
    / "argocd"
    / "resource_customizations"
    / "inferfleet.dev"
    / "InferenceService"
    / "health.lua"
).read_text(encoding="utf-8")
NAME = "chat"


def health(obj: dict[str, Any]) -> dict[str, Any]:
    runtime = lupa.LuaRuntime(unpack_returned_tuples=False)
    runtime.globals().obj = runtime.table_from(obj, recursive=True)
    return dict(runtime.execute(SCRIPT).items())


def test_argocd_health_follows_the_live_service(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace)
    tiers = [
        {
            "name": "l4",
            "gpu": "L4",
            "gpusPerNode": 1,
            "minReplicas": 2,
            "maxReplicas": 3,
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        }
    ]
    body = gpu_service(NAME, namespace, tiers)
    cluster.apply([body])

    seen: list[tuple[str, str]] = []  # (health, the Ready condition's status)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        live = cluster.service(namespace, NAME)
        verdict = health(live)["status"]
        ready = conditions(live).get("Ready", {}).get("status", "-")
        degraded = conditions(live).get("Degraded", {}).get("status")
        scaling_active = conditions(live).get("ScalingActive", {}).get("status")
        seen.append((verdict, ready))
        # Healthy exactly when the operator says Ready; a valid spec is never Degraded.
        assert (verdict == "Healthy") == (
            ready == "True" and degraded != "True" and scaling_active != "False"
        ), (
            verdict,
            live.get("status"),
        )
        assert verdict in {"Progressing", "Healthy"}, (
            health(live),
            [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in conditions(live).values()],
        )
        if (
            verdict == "Healthy"
            and live["status"].get("observedGeneration") == live["metadata"]["generation"]
        ):
            break
        time.sleep(0.2)
    assert seen and seen[-1][0] == "Healthy", seen[-5:]
    assert seen[0][0] == "Progressing", "the first verdict must be Progressing (nothing deployed yet)"

    # The model changes to one no tier here can hold: Degraded, with the planner's reason.
    body["spec"]["model"] = {"name": "meta-llama/Llama-3.1-405B-Instruct"}
    cluster.apply([body])

    def degraded() -> dict[str, Any]:
        live = cluster.service(namespace, NAME)
        verdict = health(live)
        assert verdict["status"] == "Degraded", (verdict, conditions(live))
        return verdict

    verdict = eventually(degraded, 60, what="Degraded")
    assert "l4" in verdict["message"], verdict
    # Running pods were not deleted because of a spec that cannot be served.
    assert cluster.apps().read_namespaced_deployment(f"{NAME}-l4", namespace).spec.replicas == 2
