"""The operator against a real cluster (kind, CPU only): `hack/kind-e2e.sh` runs this.

Skipped cleanly without a reachable cluster, without the CRD, or without the stand-in
image named by INFERFLEET_E2E_IMAGE. The operator runs in-process under KopfRunner.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inferfleet.api import labels
from tests.e2e.spec import cpu_service

pytestmark = pytest.mark.e2e

IMAGE = os.environ.get("INFERFLEET_E2E_IMAGE")
WAIT_S = 240.0


def reachable_cluster() -> Any:
    """An ApiClient for the current kubeconfig context, or None."""
    try:
        from kubernetes import client, config

        config.load_kube_config()
        api = client.ApiClient()
        client.VersionApi(api).get_code(_request_timeout=3)
        client.ApiextensionsV1Api(api).read_custom_resource_definition(labels.CRD_NAME, _request_timeout=3)
    except Exception:  # no kubeconfig, no server, no CRD: nothing to test against
        return None
    return api


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(2)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    if not IMAGE:
        pytest.skip("INFERFLEET_E2E_IMAGE is not set (hack/kind-e2e.sh sets it)")
    found = reachable_cluster()
    if found is None:
        pytest.skip("no reachable cluster with the InferenceService CRD (hack/kind-e2e.sh makes one)")
    yield found


@pytest.fixture
def namespace(api: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"inferfleet-e2e-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def test_cpu_tier_is_served_scaled_and_deleted(api: Any, namespace: str) -> None:
    from kopf.testing import KopfRunner
    from kubernetes import client

    assert IMAGE is not None
    custom, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
    group, version, plural = labels.GROUP, labels.VERSION, labels.PLURAL
    args = ["run", "--standalone", "--namespace", namespace, "-m", "inferfleet.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        custom.create_namespaced_custom_object(group, version, namespace, plural,
                                               cpu_service("tiny", namespace, IMAGE))

        def ready() -> bool:
            body = custom.get_namespaced_custom_object(group, version, namespace, plural, "tiny")
            conditions = {c["type"]: c for c in (body.get("status") or {}).get("conditions", [])}
            return conditions.get("Ready", {}).get("status") == "True"

        wait_for(ready, "the InferenceService to be Ready")
        deployment = apps.read_namespaced_deployment("tiny-cpu", namespace)
        assert deployment.status.ready_replicas == 1
        limits = deployment.spec.template.spec.containers[0].resources.limits or {}
        assert not [name for name in limits if "gpu" in name]

        # The autoscaler's path: the scale subresource. Reconciles must keep the value.
        apps.patch_namespaced_deployment_scale("tiny-cpu", namespace, {"spec": {"replicas": 2}})
        custom.patch_namespaced_custom_object(group, version, namespace, plural, "tiny",
                                              {"metadata": {"labels": {"e2e": "poke"}}})
        wait_for(lambda: apps.read_namespaced_deployment("tiny-cpu", namespace).status.ready_replicas == 2,
                 "two ready replicas")
        time.sleep(5)
        assert apps.read_namespaced_deployment("tiny-cpu", namespace).spec.replicas == 2

        custom.delete_namespaced_custom_object(group, version, namespace, plural, "tiny")

        def gone() -> bool:
            return not apps.list_namespaced_deployment(namespace).items

        wait_for(gone, "owner references to remove the Deployment")
    assert runner.exception is None, runner.output
