"""config.json of a model the catalog lacks, read by a probe Job in the tenant's namespace.

Written as a tenant would attack it: the operator must never read a Secret or a source
itself (the in-memory cluster refuses any Secret call: cluster.access declares none),
a forged or garbled result must not plan anyone's service, a pod in another namespace
must not decide this one, and the verdict must survive a restart without a new probe.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from typing import Any

from inferfleet.api import labels
from inferfleet.caching.precache import probe
from inferfleet.caching.precache.probe import ProbeResult, encode_result
from inferfleet.kubedata import ObjectRef
from tests.unit.reconcile.fixtures import Control

NAMESPACE = "team-a"
NAME = "private-moe"
MODEL = "acme/private-moe"
CONFIG = {
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def service(name: str = NAME, namespace: str = NAMESPACE, **model: Any) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": MODEL, "credentialsSecretRef": {"name": "hub-token", "key": "token"}, **model},
            "workload": {
                "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
                "outputTokens": {"p50": 200, "p95": 400, "p99": 800},
                "peakRequestsPerSecond": 2,
            },
            "tiers": [{"name": "h100", "gpu": "H100-SXM-80GB"}],
            "cache": {"mode": "none"},
        },
    }


class Tenant:
    """One tenant's service on the operator's in-memory cluster."""

    def __init__(self, control: Control | None = None, name: str = NAME, namespace: str = NAMESPACE) -> None:
        self.control = control or Control()
        self.name, self.namespace = name, namespace

    def submit(self, body: dict[str, Any]) -> None:
        self.control.submit(body)

    def reconcile(self) -> None:
        from inferfleet import handlers
        from tests.unit.reconcile.fixtures import LOGGER

        asyncio.run(
            handlers.reconcile_on_change(
                name=self.name, namespace=self.namespace, memo=self.control.memo, retry=0, logger=LOGGER
            )
        )

    def cr(self) -> dict[str, Any]:
        from inferfleet.controller.reconciler import cr_ref

        return self.control.cluster.objects[cr_ref(self.namespace, self.name)]

    def status(self) -> dict[str, Any]:
        return dict(self.cr().get("status") or {})

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status().get("conditions") or [] if c["type"] == type_), None)

    def jobs(self) -> list[dict[str, Any]]:
        return [
            job
            for job in self.control.cluster.kinds("Job")
            if job["metadata"]["namespace"] == self.namespace
            and job["metadata"]["labels"].get(labels.LABEL_COMPONENT) == probe.COMPONENT_PROBE
        ]

    def tier(self) -> dict[str, Any]:
        plan: list[dict[str, Any]] = self.status()["plan"]
        return plan[0]

    def finish(
        self, message: str, *, exit_code: int = 0, owner: bool = True, reason: str = "Completed"
    ) -> None:
        """What the kubelet reports once the probe container ended: its termination message."""
        (job,) = self.jobs()
        name = job["metadata"]["name"]
        metadata: dict[str, Any] = {
            "name": f"{name}-x7k2p",
            "namespace": self.namespace,
            "labels": {**probe.probe_labels_of(self.name), "batch.kubernetes.io/job-name": name},
        }
        if owner:
            metadata["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job["metadata"]["uid"]}
            ]
        self.pod(metadata, message, exit_code=exit_code, reason=reason)

    def pod(
        self, metadata: dict[str, Any], message: str, *, exit_code: int = 0, reason: str = "Completed"
    ) -> None:
        cluster = self.control.cluster
        cluster.user_apply({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {}})
        terminated: dict[str, Any] = {"exitCode": exit_code, "reason": reason}
        if message:
            terminated["message"] = message
        cluster.set_status(
            ObjectRef("v1", "Pod", metadata["namespace"], metadata["name"]),
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [{"name": probe.CONTAINER, "state": {"terminated": terminated}}],
            },
        )

    def advance(self, seconds: float) -> None:
        self.control.memo["reconciler"].clock.now += dt.timedelta(seconds=seconds)


def success(config: dict[str, Any] | None = None, parameters: float | None = 30.5) -> str:
    result = ProbeResult(
        ok=True, reason="Resolved", config=config or CONFIG, parameters_billion=parameters, revision=COMMIT
    )
    return encode_result(result)


def started() -> Tenant:
    tenant = Tenant()
    tenant.submit(service())
    tenant.reconcile()
    return tenant


def test_an_unknown_model_gets_a_probe_job_and_an_infeasible_tier_saying_so() -> None:
    tenant = started()
    (job,) = tenant.jobs()
    name = job["metadata"]["name"]
    assert name.startswith(f"{NAME}-probe-") and name.endswith("-1")
    verdict = tenant.status()["modelSource"]
    assert verdict["state"] == "Probing" and verdict["job"] == name and verdict["attempt"] == 1
    assert verdict["source"] == f"hf://{MODEL}" and verdict["secretName"] == "hub-token"
    tier = tenant.tier()
    assert not tier["feasible"]
    assert f"reading config.json from hf://{MODEL}@main in Job {NAMESPACE}/{name}" in tier["reasons"][0]
    condition = tenant.condition(labels.CONDITION_MODEL_CONFIG_READ)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("Unknown", labels.REASON_PROBING)
    # The operator touched no Secret and no source: the in-memory cluster would have
    # refused a Secret call (NotPermitted), and nothing here listens on the network.
    assert all(ref.kind != "Secret" for _, ref in tenant.control.cluster.calls)


def test_a_probe_result_plans_the_service_and_survives_a_restart_without_a_new_probe() -> None:
    tenant = started()
    (job,) = tenant.jobs()
    tenant.finish(success())
    tenant.reconcile()
    verdict = tenant.status()["modelSource"]
    assert verdict["state"] == "Resolved" and verdict["resolvedRevision"] == COMMIT
    assert verdict["parametersBillion"] == 30.5 and verdict["config"]["num_experts"] == 128
    tier = tenant.tier()
    assert tier["feasible"], tier["reasons"]
    assert "128 experts" in " ".join(tier["reasons"])
    condition = tenant.condition(labels.CONDITION_MODEL_CONFIG_READ)
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "ConfigRead")
    # The Job outlives the pass that read it (a failed status write loses nothing), then goes.
    assert [j["metadata"]["name"] for j in tenant.jobs()] == [job["metadata"]["name"]]
    tenant.reconcile()
    assert tenant.jobs() == []
    tenant.control.restart()
    tenant.reconcile()
    assert tenant.jobs() == [] and tenant.tier()["feasible"]
    assert tenant.status()["modelSource"]["state"] == "Resolved"


def test_a_failure_keeps_the_sources_reason_and_is_retried_by_a_new_job_after_a_backoff() -> None:
    tenant = started()
    (first,) = tenant.jobs()
    failure = probe.failure("BadCredentials", f"hf://{MODEL}@main: HTTP 401: the credentials were refused")
    tenant.finish(encode_result(failure), exit_code=1, reason="Error")
    tenant.reconcile()
    verdict = tenant.status()["modelSource"]
    assert (verdict["state"], verdict["reason"], verdict["attempt"]) == ("Failed", "BadCredentials", 1)
    assert "HTTP 401" in verdict["message"]
    assert "BadCredentials" in tenant.tier()["reasons"][0]
    condition = tenant.condition(labels.CONDITION_MODEL_CONFIG_READ)
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "ProbeFailed")
    tenant.reconcile()
    assert tenant.jobs() == []  # no probe while the backoff runs
    tenant.advance(31)
    tenant.reconcile()
    (second,) = tenant.jobs()
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["name"].endswith("-2")
    assert tenant.status()["modelSource"]["attempt"] == 2
    # The failure verdict survived a restart in between, too: status is the memory.
    tenant.control.restart()
    tenant.reconcile()
    assert [j["metadata"]["name"] for j in tenant.jobs()] == [second["metadata"]["name"]]


def test_a_changed_source_revision_or_secret_is_a_new_probe_a_success_is_kept_otherwise() -> None:
    tenant = started()
    tenant.finish(success())
    tenant.reconcile()
    tenant.reconcile()
    assert tenant.jobs() == []
    # An unrelated spec change (the workload) keeps the verdict: no new probe.
    body = service()
    body["spec"]["workload"]["peakRequestsPerSecond"] = 5
    tenant.submit(body)
    tenant.reconcile()
    assert tenant.jobs() == [] and tenant.tier()["feasible"]
    names = set()
    for change in ({"revision": "v2"}, {"credentialsSecretRef": {"name": "other-token", "key": "token"}}):
        tenant.submit(service(**change))
        tenant.reconcile()
        (job,) = tenant.jobs()
        names.add(job["metadata"]["name"])
        assert tenant.status()["modelSource"]["state"] == "Probing"
        assert not tenant.tier()["feasible"]
    assert len(names) == 2


def test_hostile_results_fail_only_their_own_service_with_a_bounded_message() -> None:
    for message, reason in [
        ("not json at all \x1b[31m", "ProbeResultInvalid"),
        ('{"v":1,"ok":true,"config":"x"}', "ProbeResultInvalid"),
        ('{"v":1,"ok":true,"config":{},"parametersBillion":1e308}', "ProbeResultInvalid"),
        (
            '{"v":1,"ok":false,"reason":"Owned\\u202e","message":"' + "A" * 200_000 + '"}',
            "ProbeResultInvalid",
        ),
        ('{"v":1,"ok":false,"reason":"x y","message":"line\\nbreak\\u202eevil"}', "ProbeFailed"),
    ]:
        tenant = started()
        tenant.finish(message, exit_code=1)
        tenant.reconcile()
        verdict = tenant.status()["modelSource"]
        assert (verdict["state"], verdict["reason"]) == ("Failed", reason), verdict
        assert len(verdict["message"]) <= probe.MAX_MESSAGE_CHARS
        assert "\n" not in verdict["message"] and "\u202e" not in verdict["message"]
        assert len(json.dumps(tenant.status())) < 64 * 1024
        assert not tenant.tier()["feasible"]


def test_a_config_out_of_bounds_is_infeasible_never_a_crash() -> None:
    tenant = started()
    tenant.finish(success({**CONFIG, "num_hidden_layers": 100_000_000}))
    tenant.reconcile()
    tier = tenant.tier()
    assert not tier["feasible"] and "num_hidden_layers" in tier["reasons"][0]


def test_pods_the_job_does_not_own_or_in_another_namespace_decide_nothing() -> None:
    control = Control()
    victim = Tenant(control)
    victim.submit(service())
    victim.reconcile()
    (job,) = victim.jobs()
    # The attacker's namespace: a Job of the victim's name and a pod it owns, with the
    # victim's labels and a result for a config of the attacker's choosing ...
    attacker = Tenant(control, name=NAME, namespace="team-b")
    evil = {**CONFIG, "num_hidden_layers": 1}
    name = job["metadata"]["name"]
    twin = control.cluster.user_apply(
        {
            **copy.deepcopy(job),
            "metadata": {"name": name, "namespace": "team-b", "labels": job["metadata"]["labels"]},
        }
    )
    forged = {
        "name": f"{name}-evil",
        "namespace": "team-b",
        "labels": probe.probe_labels_of(NAME),
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": twin["metadata"]["uid"]}
        ],
    }
    attacker.pod(forged, success(evil))
    # ... and, in the victim's namespace, a pod with the right labels that no Job owns.
    victim.finish(success(evil), owner=False)
    victim.reconcile()
    assert victim.status()["modelSource"]["state"] == "Probing"
    assert not victim.tier()["feasible"]


def test_a_probe_that_never_reports_fails_after_its_deadline_and_is_retried() -> None:
    tenant = started()
    settings = tenant.control.settings
    limit_s = settings.model_probe_deadline_s + probe.START_MARGIN_S
    tenant.advance(limit_s)
    tenant.reconcile()
    assert tenant.status()["modelSource"]["state"] == "Probing"
    tenant.advance(120)
    tenant.reconcile()
    verdict = tenant.status()["modelSource"]
    assert (verdict["state"], verdict["reason"]) == ("Failed", "DeadlineExceeded")


def test_a_job_the_controller_failed_and_an_oom_killed_probe_say_why() -> None:
    tenant = started()
    (job,) = tenant.jobs()
    ref = ObjectRef("batch/v1", "Job", NAMESPACE, job["metadata"]["name"])
    tenant.control.cluster.set_status(
        ref, {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}
    )
    tenant.reconcile()
    verdict = tenant.status()["modelSource"]
    assert (verdict["state"], verdict["reason"]) == ("Failed", "DeadlineExceeded")
    assert "missing Secret" in verdict["message"]
    tenant = started()
    tenant.finish("", exit_code=137, reason="OOMKilled")
    tenant.reconcile()
    assert tenant.status()["modelSource"]["reason"] == "OOMKilled"


def test_models_that_need_no_probe_get_none_and_lose_the_verdict() -> None:
    tenant = started()
    assert tenant.jobs()
    inline = service(config=copy.deepcopy(CONFIG), parametersBillion=30.5)
    tenant.submit(inline)
    tenant.reconcile()
    assert tenant.jobs() == []
    assert "modelSource" not in tenant.status()
    assert tenant.condition(labels.CONDITION_MODEL_CONFIG_READ) is None
    catalogued = service()
    catalogued["spec"]["model"]["name"] = "Qwen/Qwen3-8B"
    tenant.submit(catalogued)
    tenant.reconcile()
    assert tenant.jobs() == [] and tenant.tier()["feasible"]


def test_the_autoscaler_replans_from_the_verdict_in_status_and_never_from_the_source() -> None:
    """The autoscaler's re-plan (workload drift) takes the model from status.modelSource:
    the verdict for this spec's source, nothing for another's."""
    from inferfleet.api import load_all
    from inferfleet.reconcile.modelprobe import fetched_of

    tenant = started()
    tenant.finish(success())
    tenant.reconcile()
    verdict = tenant.status()["modelSource"]
    body = tenant.cr()
    resource = load_all(json.dumps({**body, "status": None}))[0]
    fetched = fetched_of(resource, verdict)
    assert fetched is not None and fetched.config["num_experts"] == 128 and fetched.parameters_billion == 30.5
    moved = load_all(json.dumps({**service(revision="v2"), "metadata": body["metadata"]}))[0]
    assert fetched_of(moved, verdict) is None
    assert fetched_of(resource, {**verdict, "state": "Failed"}) is None
    assert fetched_of(resource, "not a verdict") is None
