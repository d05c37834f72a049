"""The CEL rules in the CRD and the pydantic validators agree, sample by sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inferfleet.api import SpecInvalid, parse
from inferfleet.api.crd import openapi_schema
from inferfleet.api.resource import WORKLOAD_NAME_MAX_CHARS
from inferfleet.design import object_names as names
from tests.unit.api.cel_eval import apply_defaults, cel_failures_for_spec, failed_rules
from tests.unit.api.samples import base_spec, document

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(spec: dict[str, Any]) -> None:
        node: Any = spec
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
        node[keys[-1]] = value

    return mutate


def _all(*mutations: Mutation) -> Mutation:
    def mutate(spec: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(spec)

    return mutate


# (id, mutation, message both sides must give, or None when the sample is valid)
CASES: list[tuple[str, Mutation, str | None]] = [
    ("valid", _all(), None),
    ("min-above-max", _set("tiers.0.minReplicas", 5), "minReplicas must be <= maxReplicas"),
    ("min-equals-max", _set("tiers.0.minReplicas", 4), None),
    ("percentiles-unordered", _set("workload.inputTokens.p95", 100), "p50 <= p95 <= p99"),
    ("output-percentiles-unordered", _set("workload.outputTokens.p99", 300), "p50 <= p95 <= p99"),
    ("routing-unknown-tier", _set("workload.routing", {"h100": 0.5}), "routing names a tier"),
    ("routing-known-tier", _set("workload.routing", {"l4": 0.5, "a100": 0.5}), None),
    ("routing-share-above-one", _set("workload.routing", {"l4": 1.5}), "between 0 and 1"),
    ("zero-min-without-opt-in", _set("tiers.1.minReplicas", 0), "allowScaleToZero"),
    (
        "zero-min-with-opt-in",
        _all(_set("tiers.1.minReplicas", 0), _set("scaling.allowScaleToZero", True)),
        None,
    ),
    (
        "scale-to-zero-without-a-front-door",
        _all(_set("scaling.allowScaleToZero", True), _set("frontDoor", {"mode": "service"})),
        "needs a front door that holds requests",
    ),
    (
        "scale-to-zero-behind-a-gateway",
        _all(_set("scaling.allowScaleToZero", True), _set("frontDoor", {"gateway": {"name": "gw"}})),
        None,
    ),
    (
        "service-mode-with-a-gateway",
        _set("frontDoor", {"mode": "service", "gateway": {"name": "gw"}}),
        "renders no route",
    ),
    ("pvc-without-name", _set("cache.mode", "pvc"), "pvcName"),
    ("pvc-with-name", _all(_set("cache.mode", "pvc"), _set("cache.pvcName", "weights")), None),
    (
        "prewarm-unknown-tier",
        _set(
            "scaling.prewarm",
            [{"schedule": "0 8 * * 1-5", "durationMinutes": 60, "replicas": 2, "tier": "h100"}],
        ),
        "prewarm names a tier",
    ),
    (
        "tp-above-gpus-per-node",
        _all(_set("tiers.0.gpusPerNode", 1), _set("tiers.0.overrides", {"tensorParallelSize": 2})),
        "tensorParallelSize cannot exceed gpusPerNode",
    ),
    (
        "adapters-fewer-than-max",
        _all(
            _set("model.adapters", [{"name": "sql", "source": "hf://org/sql-lora"}]),
            _set("model.maxSimultaneousAdapters", 2),
        ),
        "maxSimultaneousAdapters",
    ),
    ("config-without-params", _set("model.config", {"hidden_size": 4096}), "parametersBillion"),
    ("env-literal", _set("serving.env", [{"name": "LOG", "value": "1"}]), None),
    (
        "env-from-secret",
        _set(
            "serving.env",
            [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "key"}}}],
        ),
        None,
    ),
    (
        "env-both",
        _set(
            "serving.env",
            [{"name": "LOG", "value": "1", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
        ),
        "exactly one of value or valueFrom",
    ),
    ("env-neither", _set("serving.env", [{"name": "LOG"}]), "exactly one of value or valueFrom"),
    (
        "env-two-sources",
        _set(
            "serving.env",
            [
                {
                    "name": "LOG",
                    "valueFrom": {
                        "secretKeyRef": {"name": "s", "key": "k"},
                        "configMapKeyRef": {"name": "c", "key": "k"},
                    },
                }
            ],
        ),
        "exactly one of secretKeyRef or configMapKeyRef",
    ),
    ("api-key-literal", _set("serving.env", [{"name": "VLLM_API_KEY", "value": "sk-123"}]), "secret"),
    (
        "hf-token-env",
        _set("serving.env", [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
        "credentialsSecretRef",
    ),
    ("cache-under-nvme", _set("cache", {"nodePath": "/mnt/nvme/inferfleet/team-a"}), None),
    ("cache-root", _set("cache", {"nodePath": "/"}), "normalized absolute path"),
    ("cache-etc", _set("cache", {"nodePath": "/etc"}), "normalized absolute path"),
    ("cache-under-kubelet", _set("cache", {"nodePath": "/var/lib/kubelet/pods"}), "normalized absolute path"),
    ("cache-proc", _set("cache", {"nodePath": "/proc/1"}), "normalized absolute path"),
    ("cache-sys", _set("cache", {"nodePath": "/sys"}), "normalized absolute path"),
    ("cache-dot-dot", _set("cache", {"nodePath": "/mnt/nvme/../../etc"}), "normalized absolute path"),
    ("cache-trailing-slash", _set("cache", {"nodePath": "/mnt/nvme/"}), "normalized absolute path"),
    (
        "cache-in-the-tenants-tree",
        _set("cache", {"nodePath": "/mnt/nvme/inferfleet/.tenants/x"}),
        "no component starting with '.'",
    ),
    (
        "cache-dot-directory",
        _set("cache", {"nodePath": "/mnt/nvme/.cache"}),
        "no component starting with '.'",
    ),
    ("cache-dot-inside-a-name", _set("cache", {"nodePath": "/mnt/nvme/inferfleet/team.a"}), None),
    ("opt-out-without-placement", _set("tiers.0.gpuNodeAffinity", "none"), "gpuNodeAffinity none"),
    (
        "opt-out-with-selector",
        _all(_set("tiers.0.gpuNodeAffinity", "none"), _set("tiers.0.nodeSelector", {"pool": "l4"})),
        None,
    ),
]


@pytest.mark.parametrize(("case_id", "mutate", "message"), CASES, ids=[case[0] for case in CASES])
def test_cel_and_pydantic_agree(case_id: str, mutate: Mutation, message: str | None) -> None:
    spec = base_spec()
    mutate(spec)
    cel_failures = cel_failures_for_spec(spec)
    if message is None:
        parse(document(spec))
        assert cel_failures == []
    else:
        with pytest.raises(SpecInvalid) as raised:
            parse(document(spec))
        assert any(message in problem.message for problem in raised.value.problems), raised.value
        assert any(message in failure for failure in cel_failures), cel_failures


def test_duplicate_tier_names_are_rejected_by_pydantic() -> None:
    # The CRD enforces this with x-kubernetes-list-type: map keyed by name.
    spec = base_spec()
    spec["tiers"][1]["name"] = "l4"
    with pytest.raises(SpecInvalid, match="tier names must be unique"):
        parse(document(spec))


def test_routing_shares_must_sum_to_at_most_one() -> None:
    # CEL cannot sum a map's values; the webhook and the operator enforce it.
    spec = base_spec()
    spec["workload"]["routing"] = {"l4": 0.7, "a100": 0.6}
    with pytest.raises(SpecInvalid, match="sum to at most 1"):
        parse(document(spec))


# (id, metadata.name, tier names, message both sides must give, or None when valid)
NAME_CASES: list[tuple[str, str, list[str], str | None]] = [
    ("plain", "llama-8b-chat", ["l4", "a100"], None),
    ("starts-with-digit", "8b-chat", ["l4"], "must start with a lowercase letter"),
    ("upper-case", "Llama", ["l4"], "must start with a lowercase letter"),
    ("ends-with-dash", "llama-", ["l4"], "must start with a lowercase letter"),
    ("dot", "llama.chat", ["l4"], "must start with a lowercase letter"),
    ("longest-name", "a" * 50, ["x"], None),
    ("name-too-long", "a" * 51, ["x"], "at most 50 characters"),
    ("name-and-tier-fit", "a" * 27, ["t" * 24], None),
    ("name-and-tier-too-long", "a" * 30, ["l4", "t" * 22], "plus each tier name"),
]


def _root_failures(body: dict[str, Any]) -> list[str]:
    schema = openapi_schema()
    return failed_rules(schema, apply_defaults(schema, body))


@pytest.mark.parametrize(
    ("case_id", "name", "tiers", "message"), NAME_CASES, ids=[case[0] for case in NAME_CASES]
)
def test_names_that_cannot_be_applied_are_refused_on_both_sides(
    case_id: str, name: str, tiers: list[str], message: str | None
) -> None:
    spec = base_spec()
    spec["tiers"] = [{**spec["tiers"][0], "name": tier} for tier in tiers]
    body = document(spec, name=name)
    failures = _root_failures(body)
    if message is None:
        service = parse(body)
        assert failures == []
        for tier in tiers:
            # Every derived name fits as is: no hash truncation needed.
            assert names.workload_name(service.name, tier) == f"{name}-{tier}"
            assert len(names.workload_name(service.name, tier)) <= WORKLOAD_NAME_MAX_CHARS
            assert names.tier_service_name(service.name, tier) == f"{name}-{tier}-api"
    else:
        with pytest.raises(SpecInvalid) as raised:
            parse(body)
        assert any(message in problem.message for problem in raised.value.problems), raised.value
        assert any(message in failure for failure in failures), failures


def test_tier_names_are_bounded_in_the_schema_too() -> None:
    tier_schema = openapi_schema()["properties"]["spec"]["properties"]["tiers"]["items"]
    assert tier_schema["properties"]["name"]["maxLength"] == 24
    spec = base_spec()
    spec["tiers"][0]["name"] = "t" * 25
    with pytest.raises(SpecInvalid, match="at most 24 characters"):
        parse(document(spec, name="llm"))
