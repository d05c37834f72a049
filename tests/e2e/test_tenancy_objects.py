"""Tenancy on a real API server: what a tenant's InferenceService can do to objects it
does not own, and to the text others read about it.

- A platform admin made a Role and a RoleBinding `<name>-epp` and a Service `<name>` in
  the tenant's namespace. At 6e505f6 the operator's forced server-side apply rewrote
  their rules, subjects and selector, added the tenant's owner reference, and the
  garbage collector deleted them with the tenant's CR. Now they stay as they were (not
  one write: same resourceVersion), the InferenceService's status names them, and
  deleting the InferenceService leaves them.
- A tenant's spec carries bidi overrides, newlines and a 200 KB string (an inline GPU
  name, a node selector value the API server refuses and quotes back): status and
  Events, read back through the API, hold it escaped and bounded.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually, example, owned_by

RBAC = "rbac.authorization.k8s.io/v1"
FORBIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def platform_objects(namespace: str, name: str) -> list[dict[str, Any]]:
    meta = {"namespace": namespace, "labels": {"owner": "platform"}}
    return [
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": f"{name}-epp", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": f"{name}-epp", **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-epp"},
            "subjects": [
                {"kind": "Group", "name": "platform-auditors", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, **meta},
            "spec": {"selector": {"app": "platform-proxy"}, "ports": [{"name": "https", "port": 443}]},
        },
    ]


PATHS = {"Role": f"{RBAC}/roles", "RoleBinding": f"{RBAC}/rolebindings", "Service": "v1/services"}


def current(cluster: Cluster, namespace: str, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    name = obj["metadata"]["name"]
    found = [o for o in cluster.list(PATHS[obj["kind"]], namespace) if o["metadata"]["name"] == name]
    return found[0] if found else None


def what_matters(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Identity, every write (resourceVersion), owners, and the content a takeover rewrites."""
    meta = obj["metadata"]
    return {
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
        "ownerReferences": meta.get("ownerReferences"),
        "labels": meta.get("labels"),
        "managers": sorted(e["manager"] for e in meta.get("managedFields") or []),
        "rules": obj.get("rules"),
        "subjects": obj.get("subjects"),
        "selector": (obj.get("spec") or {}).get("selector"),
    }


def events_about(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.list("v1/events", namespace)
        if (e.get("involvedObject") or {}).get("kind") == "InferenceService"
        and e["involvedObject"].get("name") == name
    ]


def test_platform_objects_named_like_the_tenant_s_are_left_alone_and_reported(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    body = example("llama-8b-chat", namespace)
    name = body["metadata"]["name"]
    platform = platform_objects(namespace, name)
    # The platform admin's kubectl create: plain POSTs, fields owned by kubectl-create.
    cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(platform))
    before = {obj["kind"]: what_matters(current(cluster, namespace, obj) or {}) for obj in platform}

    operators.start(namespace)
    cluster.apply([body])

    def passed() -> None:
        assert "Degraded" in conditions(cluster.service(namespace, name))

    eventually(passed, 90, what="a reconcile pass to write its conditions")
    # The platform's objects: never written (a takeover rewrites rules and subjects and
    # adds the tenant as owner; even an apply of equal values would bump resourceVersion).
    for obj in platform:
        assert what_matters(current(cluster, namespace, obj) or {}) == before[obj["kind"]], obj["kind"]
    degraded = conditions(cluster.service(namespace, name))["Degraded"]
    assert degraded["reason"] == "ObjectConflict", degraded
    message = degraded["message"]
    for obj in platform:
        where = (
            f"{obj['kind']} {namespace}/{obj['metadata']['name']} exists and is not this InferenceService's"
        )
        assert where in message, message
    assert "written by kubectl-create" in message and "Delete or rename it" in message

    def warned() -> list[dict[str, Any]]:
        # Posted right after the status write of the same pass.
        found = [e for e in events_about(cluster, namespace, name) if e["reason"] == "ObjectConflict"]
        assert found
        return found

    warnings = eventually(warned, 30, what="the ObjectConflict Event")
    assert (
        warnings[0]["type"] == "Warning"
        and "exists and is not this InferenceService's" in warnings[0]["message"]
    )

    # The rest of the fleet is the tenant's, and made.
    owner = cluster.service(namespace, name)
    deployments = {d["metadata"]["name"]: d for d in cluster.list("apps/v1/deployments", namespace)}
    assert {f"{name}-l4", f"{name}-epp"} <= set(deployments)
    assert all(owned_by(d, owner) for d in deployments.values())

    # What the operator made with POST still follows the spec: a node selector the tenant
    # drops goes from the Deployment (its fields are claimed for the operator's applies
    # first; the POST's Update entry alone would keep it).
    selector_key = next(iter(body["spec"]["tiers"][0]["nodeSelector"]))
    assert selector_key in deployments[f"{name}-l4"]["spec"]["template"]["spec"]["nodeSelector"]
    body["spec"]["tiers"][0].pop("nodeSelector")
    cluster.apply([body])

    def dropped() -> None:
        (l4,) = [
            d for d in cluster.list("apps/v1/deployments", namespace) if d["metadata"]["name"] == f"{name}-l4"
        ]
        assert selector_key not in (l4["spec"]["template"]["spec"].get("nodeSelector") or {})
        managers = {(e["manager"], e["operation"]) for e in l4["metadata"]["managedFields"]}
        assert ("inferfleet-operator", "Update") not in managers, managers

    eventually(dropped, 90, what="the dropped node selector to leave the Deployment")

    # Deleting the tenant's InferenceService takes its objects with it, not the platform's.
    cluster.kubectl("delete", "inferenceservice", name, "-n", namespace, "--wait=true")

    def collected() -> None:
        left = [d["metadata"]["name"] for d in cluster.list("apps/v1/deployments", namespace)]
        assert left == [], left

    eventually(collected, 90, what="the garbage collector to delete the tenant's Deployments")
    for obj in platform:
        assert what_matters(current(cluster, namespace, obj) or {}) == before[obj["kind"]], obj["kind"]


# 245 characters (the CRD allows 253): a bidi override, a forged status line, 100 isolates.
GPU_NAME = "RTX\u202eevil\n  Degraded: False" + "\u2066" * 100 + "A" * 115
# A node selector value: the API server refuses it in the pods (a label value is at most
# 63 characters) and quotes it back, 200 KB of it, in its error.
SELECTOR_VALUE = "x\u202ey\nz" + "v" * 200_000


def raw(value: Any) -> set[str]:
    if isinstance(value, str):
        return {c for c in value if unicodedata.category(c) in FORBIDDEN}
    if isinstance(value, dict):
        return set().union(set(), *(raw(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(set(), *(raw(v) for v in value))
    return set()


def test_tenant_text_in_status_and_events_is_escaped_and_bounded(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    body = example("llama-8b-chat", namespace)
    name = body["metadata"]["name"]
    tier = body["spec"]["tiers"][0]
    tier["gpu"] = {
        "name": GPU_NAME,
        "memoryGiB": 48,
        "bf16Tflops": 180,
        "memoryBandwidthTBs": 0.96,
        "nodeLabels": {"nvidia.com/gpu.product": "RTX-6000-Ada"},
    }
    tier["nodeSelector"] = {"team": SELECTOR_VALUE}
    operators.start(namespace)
    cluster.apply([body])

    def written() -> dict[str, Any]:
        found = cluster.service(namespace, name)
        status = found.get("status") or {}
        degraded = conditions(found).get("Degraded") or {}
        assert status.get("plan") and degraded.get("reason") == "ApplyFailed", degraded
        return found

    found = eventually(written, 120, what="the plan, and Degraded=ApplyFailed quoting the API server")
    status = found["status"]
    assert not raw(status), raw(status)
    size = len(json.dumps(status, ensure_ascii=False).encode())
    assert size < 64 * 1024, size
    assert status["plan"][0]["gpu"].startswith("RTX\\u202eevil\\n  Degraded: False\\u2066")
    for condition in status["conditions"]:
        assert len(condition["message"]) <= 8192, condition["type"]
    degraded = conditions(found)["Degraded"]["message"]
    # The API server's refusal quotes the 200 KB value (twice): one line per object, cut.
    assert "is invalid" in degraded and "Invalid value" in degraded and "more characters cut]" in degraded

    def posted() -> list[dict[str, Any]]:
        found = events_about(cluster, namespace, name)
        assert {"PlanChanged", "ApplyFailed"} <= {e["reason"] for e in found}, found
        return found

    events = eventually(posted, 30, what="the pass's Events")
    for event in events:
        assert len(event["message"]) <= 1024 and not raw(event["message"]), event["reason"]
    assert any("RTX\\u202eevil\\n" in e["message"] for e in events if e["reason"] == "PlanChanged")

    # What a human reads: `kubectl describe` prints status and Events as stored (the spec
    # above them is the tenant's own text, as it wrote it).
    described = cluster.kubectl("describe", "inferenceservice", name, "-n", namespace).stdout
    shown = described[described.index("\nStatus:") :]
    assert "\u202e" not in shown and "\u2066" not in shown
    assert "\n  Degraded: False" not in shown
