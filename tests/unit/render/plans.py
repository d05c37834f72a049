"""Hand-made plans and services for tests that must not depend on the planner's numbers."""

from __future__ import annotations

import copy
from typing import Any

from inferfleet.api import InferenceService, Plan, TierPlan, parse

BASE_SERVICE: dict[str, Any] = {
    "apiVersion": "inferfleet.dev/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "serving", "uid": "uid-chat", "generation": 1},
    "spec": {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "credentialsSecretRef": {"name": "hf"}},
        "workload": {
            "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
            "outputTokens": {"p50": 200, "p95": 500, "p99": 1000},
            "peakRequestsPerSecond": 5,
        },
        "tiers": [
            {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 2, "maxReplicas": 6},
            {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4},
        ],
    },
}


def service_body(**spec_changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE_SERVICE)
    body["spec"].update(copy.deepcopy(spec_changes))
    return body


def service(**spec_changes: Any) -> InferenceService:
    return parse(service_body(**spec_changes))


def tier_plan(name: str, **changes: Any) -> TierPlan:
    wire: dict[str, Any] = {
        "name": name, "gpu": "H100-SXM-80GB", "feasible": True,
        "tensorParallelSize": 2, "pipelineParallelSize": 1, "gpusPerReplica": 2, "nodesPerReplica": 1,
        "quantization": "fp8", "kvCacheDtype": "fp8", "gpuMemoryUtilization": 0.9,
        "maxModelLen": 8192, "maxNumSeqs": 128, "maxNumBatchedTokens": 4096,
        "memoryGiB": {"weights": 8, "activations": 2, "overhead": 3, "kvCache": 50},
        "kvCacheTokens": 200_000, "maxConcurrency": 24.4, "usableRps": 3.0, "replicasForPeak": 2,
        "coldStartSeconds": 150.0, "reasons": ["fits"],
    }
    wire.update(changes)
    return TierPlan.model_validate(wire)


def plan(*tiers: TierPlan, name: str = "chat") -> Plan:
    return Plan(name=name, tiers=list(tiers) or [tier_plan("h100"), tier_plan("l4", gpu="L4")])


def infeasible(name: str, reason: str = "70B at BF16 does not fit one L4 node") -> TierPlan:
    return tier_plan(name, feasible=False, reasons=[reason])
