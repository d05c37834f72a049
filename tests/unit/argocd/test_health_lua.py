"""Argo CD's health check for InferenceService, evaluated by a real Lua (lupa).

The script and its cases live in Argo CD's own layout under
manifests/argocd/resource_customizations/, so they can be contributed upstream as is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from inferfleet.api import labels
from inferfleet.api.status import InferenceServiceStatus
from tests.conftest import REPO_ROOT

lupa = pytest.importorskip("lupa")

ARGOCD_DIR = REPO_ROOT / "manifests" / "argocd"
CHECK_DIR = ARGOCD_DIR / "resource_customizations" / labels.GROUP / labels.KIND
SCRIPT = (CHECK_DIR / "health.lua").read_text(encoding="utf-8")
CASES = yaml.safe_load((CHECK_DIR / "health_test.yaml").read_text(encoding="utf-8"))["tests"]
ARGO_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


def health(obj: dict[str, Any]) -> dict[str, Any]:
    """Run the script the way Argo CD does: `obj` is a global, the chunk returns `hs`."""
    runtime = lupa.LuaRuntime(unpack_returned_tuples=False)
    runtime.globals().obj = runtime.table_from(obj, recursive=True)
    result = runtime.execute(SCRIPT)
    return dict(result.items())


def load(input_path: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((CHECK_DIR / input_path).read_text(encoding="utf-8"))
    return obj


@pytest.mark.parametrize("case", CASES, ids=[Path(c["inputPath"]).stem for c in CASES])
def test_health_of_each_sample(case: dict[str, Any]) -> None:
    assert health(load(case["inputPath"])) == case["healthStatus"]


def test_samples_cover_every_argo_outcome_and_are_real_statuses() -> None:
    assert {c["healthStatus"]["status"] for c in CASES} == {"Healthy", "Progressing", "Degraded"}
    used_types = set()
    for case in CASES:
        obj = load(case["inputPath"])
        assert obj["apiVersion"] == labels.API_VERSION and obj["kind"] == labels.KIND
        if "status" in obj:
            status = InferenceServiceStatus.model_validate(obj["status"])
            used_types |= {c.type for c in status.conditions or []}
    assert used_types == set(labels.CONDITION_TYPES)
    assert {p.name for p in (CHECK_DIR / "testdata").iterdir()} == {Path(c["inputPath"]).name for c in CASES}


conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from([*labels.CONDITION_TYPES, "Other"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
            "reason": st.sampled_from([labels.REASON_AVAILABLE, labels.REASON_PROGRESSING, "ApplyFailed"]),
        },
        optional={"message": st.text(max_size=20)},
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(
    conditions=conditions,
    generation=st.integers(1, 5),
    observed=st.none() | st.integers(1, 5),
    summary=st.none() | st.just("l4:1/2"),
    front=st.none()
    | st.fixed_dictionaries(
        {
            "mode": st.sampled_from(["gateway", "service"]),
            "route": st.sampled_from(["Accepted", "NotAccepted", "Pending", "Missing", "None", "Shadowed"]),
            "endpoints": st.integers(0, 3),
        },
        optional={"gateway": st.just("gw-ns/gw"), "routeMessage": st.text(max_size=20)},
    ),
)
def test_any_status_yields_a_valid_health(
    conditions: list[dict[str, str]],
    generation: int,
    observed: int | None,
    summary: str | None,
    front: dict[str, Any] | None,
) -> None:
    status: dict[str, Any] = {"conditions": conditions}
    if front is not None:
        status["frontDoor"] = front
    if observed is not None:
        status["observedGeneration"] = observed
    if summary is not None:
        status["tierSummary"] = summary
    obj = {"apiVersion": labels.API_VERSION, "kind": labels.KIND, "metadata": {"generation": generation}}
    result = health({**obj, "status": status})
    assert result["status"] in {"Healthy", "Progressing", "Degraded"}
    assert isinstance(result["message"], str) and result["message"]
    first: dict[str, str] = {}  # the script reads the first condition of each type
    for c in conditions:
        first.setdefault(c["type"], c["status"])
    if result["status"] == "Healthy":
        assert first.get(labels.CONDITION_READY) == "True"
        assert first.get(labels.CONDITION_DEGRADED) != "True"
        assert first.get(labels.CONDITION_SCALING_ACTIVE) != "False"  # the autoscaler decides
        if front is not None and front["mode"] == "gateway":  # a front door that takes requests
            assert front["route"] == "Accepted"
    if front is not None and front["mode"] == "gateway" and front["route"] in {"NotAccepted", "Shadowed"}:
        assert result["status"] in {"Degraded", "Progressing"}  # Progressing: stale generation
    if observed is not None and observed < generation:
        assert result["status"] == "Progressing"


def test_argocd_cm_carries_the_same_script() -> None:
    configmap = yaml.safe_load((ARGOCD_DIR / "argocd-cm.yaml").read_text(encoding="utf-8"))
    key = f"resource.customizations.health.{labels.GROUP}_{labels.KIND}"
    assert configmap["data"][key] == SCRIPT
