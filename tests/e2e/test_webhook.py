"""The validating admission webhook, called by the API server over TLS on loopback."""

from __future__ import annotations

import base64
import copy
from typing import Any

import yaml

from tests.e2e.conftest import Operators
from tests.e2e.harness import Cluster, conditions, eventually, example
from tests.e2e.spec import gpu_service

CONFIGURATION = "validate.inferfleet.dev"


def apply(cluster: Cluster, body: dict[str, Any]) -> Any:
    return cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(body), check=False)


def test_webhook_denies_bad_specs_with_field_paths_and_admits_good_ones(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    operators.start(namespace, webhook=True)

    def registered() -> dict[str, Any]:
        found = cluster.kubectl(
            "get", "validatingwebhookconfiguration", CONFIGURATION, "-o", "json", check=False
        )
        assert found.returncode == 0, found.stderr
        configuration: dict[str, Any] = yaml.safe_load(found.stdout)
        hooks = configuration.get("webhooks") or []
        assert hooks, "kopf has not filled in its webhooks yet"
        return configuration

    configuration = eventually(registered, 60, what="kopf to register the webhook")
    (hook,) = configuration["webhooks"]
    assert hook["clientConfig"]["url"].startswith(f"https://{cluster.webhook_host}:")
    # The API server verifies the webhook's certificate against this CA: TLS, not plain HTTP.
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == cluster.webhook_pki.ca.read_bytes()
    assert hook["rules"][0]["resources"] == ["inferenceservices"]

    # Passes the CRD's own rules (gpu is free-form there), fails the operator's model.
    bad = gpu_service(
        "bad",
        namespace,
        [{"name": "l4", "gpu": {"name": "custom", "memoryGiB": -3}, "minReplicas": 1, "maxReplicas": 2}],
    )

    def denied_by_webhook() -> str:
        done = apply(cluster, bad)
        assert done.returncode != 0, "a spec with a negative GPU memory was admitted"
        assert "denied the request" in done.stderr, done.stderr
        return str(done.stderr)

    message = eventually(denied_by_webhook, 60, what="the webhook to take effect")
    assert "admission webhook" in message and "plan.validate.inferfleet.dev" in message, message
    assert "spec.tiers[0].gpu.memoryGiB" in message, message

    # A spec no tier can serve: refused with the planner's reason.
    infeasible = gpu_service(
        "huge",
        namespace,
        [{"name": "t4", "gpu": "T4", "gpusPerNode": 1, "minReplicas": 1, "maxReplicas": 2}],
        model="meta-llama/Llama-3.1-405B-Instruct",
    )
    done = apply(cluster, infeasible)
    assert done.returncode != 0 and "no tier can serve" in done.stderr, done.stderr
    # With the tier's field path and the planner's own words.
    assert "spec.tiers[0] (t4): infeasible" in done.stderr and "T4" in done.stderr, done.stderr

    # Good specs are admitted; one infeasible tier of two is admitted with a warning.
    good = example("llama-8b-chat", namespace)
    done = apply(cluster, good)
    assert done.returncode == 0, done.stderr
    partly = copy.deepcopy(good)
    partly["metadata"]["name"] = "partly"
    partly["spec"]["model"] = {"name": "meta-llama/Llama-3.3-70B-Instruct"}
    partly["spec"]["tiers"][0].update({"gpu": "T4", "gpusPerNode": 1})
    partly["spec"]["tiers"][0].pop("nodeSelector", None)
    done = apply(cluster, partly)
    assert done.returncode == 0, done.stderr
    assert "Warning:" in done.stderr and "tier l4 is infeasible" in done.stderr, done.stderr
    names = {
        item["metadata"]["name"]
        for item in cluster.list("inferfleet.dev/v1alpha1/inferenceservices", namespace)
    }
    assert names == {"llama-8b-chat", "partly"}


def test_webhook_admits_a_model_its_probe_reads_and_the_service_is_planned_from_the_verdict(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    """A model the catalog lacks, on a hub only the tenant's probe reads (a loopback hub
    here, the probe pod played by the suite as its kubelet): the webhook cannot know its
    architecture, so it admits the spec with a warning naming the source, the probe Job
    reads config.json, and the service is planned from its verdict. What the webhook can
    judge without the source is still denied, with the field path."""
    from tests.e2e.test_tenancy_probe import secret, service
    from tests.integration.fetcher.hub_server import FakeRepo, HubServer
    from tests.toolkit.model_sources import UNCATALOGUED_MODEL, uncatalogued_model_files
    from tests.toolkit.probe_kubelet import ProbeKubelet

    operators.start(namespace, webhook=True)
    eventually(lambda: _registered(cluster), 60, what="the replica to register the webhook")
    cluster.apply([secret(namespace, "hf_tenant")], manager="kubectl")
    body = service("private", namespace, UNCATALOGUED_MODEL)

    # Denied before anything reads the source: a GPU the catalog lacks, with its path.
    typo = copy.deepcopy(body)
    typo["spec"]["tiers"][0]["gpu"] = "H1000"
    done = eventually(lambda: _denied(cluster, typo), 60, what="the webhook to take effect")
    assert "spec.tiers[0].gpu: unknown GPU 'H1000'" in done.stderr, done.stderr
    # ... and a source no probe can read (mounted only in serving pods).
    mounted = copy.deepcopy(body)
    mounted["spec"]["model"]["source"] = "pvc://weights/private-moe"
    assert "spec.model.source: unknown model" in _denied(cluster, mounted).stderr

    with (
        HubServer() as hub,
        ProbeKubelet(cluster.kubectl, (namespace,), lambda *_: {"HF_ENDPOINT": hub.endpoint}),
    ):
        hub.add_repo(FakeRepo(UNCATALOGUED_MODEL, token="hf_tenant")).add_commit(uncatalogued_model_files())
        done = apply(cluster, body)
        assert done.returncode == 0, done.stderr
        assert (
            "Warning:" in done.stderr and f"hf://{UNCATALOGUED_MODEL}@main by a probe Job" in done.stderr
        ), done.stderr

        def planned() -> None:
            live = cluster.service(namespace, "private")
            source = (live.get("status") or {}).get("modelSource") or {}
            assert source.get("state") == "Resolved", (source, conditions(live))
            plan = (live.get("status") or {}).get("plan") or []
            assert plan and plan[0]["feasible"], plan
            assert conditions(live)["Planned"]["status"] == "True", conditions(live)

        eventually(planned, 120, what="the service to be planned from its probe's verdict")


def _registered(cluster: Cluster) -> None:
    found = cluster.kubectl("get", "validatingwebhookconfiguration", CONFIGURATION, "-o", "json", check=False)
    assert found.returncode == 0, found.stderr
    assert yaml.safe_load(found.stdout).get("webhooks") or [], "no webhook registered yet"


def _denied(cluster: Cluster, body: dict[str, Any]) -> Any:
    # A server-side dry run: the webhook answers (sideEffects None), nothing is stored.
    done = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(body), check=False
    )
    assert done.returncode != 0 and "denied the request" in done.stderr, done.stderr
    return done
