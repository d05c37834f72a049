"""The e2e control plane's LeaderWorkerSet controller: built at the CRD's version, its
webhooks registered for a controller outside the cluster (hack/controlplane)."""

from __future__ import annotations

import base64
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

CONTROLPLANE = REPO_ROOT / "hack" / "controlplane"
controlplane = load_script("hack/controlplane/controlplane.py", "inferfleet_controlplane_lws_test")


def required(module: str, go_mod: Path) -> str:
    for line in go_mod.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if module in words:
            return words[words.index(module) + 1]
    raise AssertionError(f"{go_mod} does not require {module}")


def test_the_controller_is_built_at_the_version_of_the_crd_and_webhooks_the_cluster_installs() -> None:
    built = required("sigs.k8s.io/lws", CONTROLPLANE / "lws" / "go.mod")
    assert built == required("sigs.k8s.io/lws", CONTROLPLANE / "crds" / "go.mod")
    # build.sh names the cache entry after it, so a new version never reuses old binaries.
    assert "-lws-$lws_version" in (CONTROLPLANE / "build.sh").read_text(encoding="utf-8")


# The shape of lws' config/webhook/manifests.yaml (v0.8.0), shortened.
MANIFESTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mleaderworkerset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-lws}}
  rules: [{apiGroups: [leaderworkerset.x-k8s.io], resources: [leaderworkersets]}]
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  rules: [{apiGroups: [""], resources: [pods]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate--v1-pod}}
  rules: [{apiGroups: [""], resources: [pods]}]
"""


def test_webhooks_point_at_the_local_controller_and_only_leader_worker_set_pods(tmp_path: Path) -> None:
    manifests, ca = tmp_path / "manifests.yaml", tmp_path / "ca.crt"
    manifests.write_text(MANIFESTS, encoding="utf-8")
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    mutating, validating = controlplane.lws_webhook_configurations(manifests, "https://127.0.0.1:9443", ca)
    assert [mutating["metadata"]["name"], validating["metadata"]["name"]] == list(
        controlplane.LWS_WEBHOOK_CONFIGS
    )
    hooks = {hook["name"]: hook for doc in (mutating, validating) for hook in doc["webhooks"]}
    assert hooks["mpod.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
    }
    only_lws_pods = {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}
    assert hooks["mpod.kb.io"]["objectSelector"] == only_lws_pods
    assert hooks["vpod.kb.io"]["objectSelector"] == only_lws_pods
    assert "objectSelector" not in hooks["mleaderworkerset.kb.io"]
