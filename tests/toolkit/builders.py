"""Fluent builders for InferenceService documents and plans.

Every builder starts from one small valid default and returns a new builder on each
call (builders are values: a shared base can be extended in two directions). The
defaults are the ones the render tests were written against; a test that depends on a
value sets it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from inferfleet.api import InferenceService, Plan, TierPlan, parse
from inferfleet.api.spec import InferenceServiceSpec

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_WORKLOAD: dict[str, Any] = {
    "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
    "outputTokens": {"p50": 200, "p95": 500, "p99": 1000},
    "peakRequestsPerSecond": 5,
}
DEFAULT_TIERS: list[dict[str, Any]] = [
    {"name": "h100", "gpu": "H100-SXM-80GB", "minReplicas": 2, "maxReplicas": 6},
    {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4},
]


@dataclass(frozen=True)
class ServiceBuilder:
    """An InferenceService document; `.body()`, `.spec()` or `.service()` at the end."""

    name: str = "chat"
    namespace: str | None = "serving"
    uid: str | None = "uid-chat"
    generation: int | None = 1
    spec_doc: dict[str, Any] = field(
        default_factory=lambda: {
            "model": {"name": DEFAULT_MODEL, "credentialsSecretRef": {"name": "hf"}},
            "workload": copy.deepcopy(DEFAULT_WORKLOAD),
            "tiers": copy.deepcopy(DEFAULT_TIERS),
        }
    )

    def _with(self, **spec_changes: Any) -> ServiceBuilder:
        doc = copy.deepcopy(self.spec_doc)
        doc.update(copy.deepcopy(spec_changes))
        return ServiceBuilder(self.name, self.namespace, self.uid, self.generation, doc)

    def named(self, name: str, namespace: str | None = "serving") -> ServiceBuilder:
        return ServiceBuilder(name, namespace, f"uid-{name}", self.generation, copy.deepcopy(self.spec_doc))

    def without_metadata_extras(self) -> ServiceBuilder:
        """Only metadata.name (an offline file: no namespace, uid or generation)."""
        return ServiceBuilder(self.name, None, None, None, copy.deepcopy(self.spec_doc))

    def model(self, name: str = DEFAULT_MODEL, **fields: Any) -> ServiceBuilder:
        return self._with(model={"name": name, **fields})

    def workload(self, **fields: Any) -> ServiceBuilder:
        """Workload fields replaced (camelCase, as in the CRD); the rest kept."""
        return self._with(workload={**self.spec_doc["workload"], **fields})

    def tiers(self, *tiers: dict[str, Any]) -> ServiceBuilder:
        return self._with(tiers=list(tiers))

    def tier(
        self,
        name: str,
        gpu: str = "L4",
        *,
        min_replicas: int = 1,
        max_replicas: int | None = None,
        **fields: Any,
    ) -> ServiceBuilder:
        """Adds a tier, or replaces the tier of that name."""
        entry: dict[str, Any] = {"name": name, "gpu": gpu, "minReplicas": min_replicas, **fields}
        if max_replicas is not None:
            entry["maxReplicas"] = max_replicas
        kept = [t for t in self.spec_doc["tiers"] if t["name"] != name]
        return self._with(tiers=[*kept, entry])

    def only_tier(self, name: str, gpu: str = "L4", **fields: Any) -> ServiceBuilder:
        return self.tiers().tier(name, gpu, **fields)

    def with_spec(self, **spec_changes: Any) -> ServiceBuilder:
        """Top-level spec fields replaced as given (`serving=`, `cache=`, `scaling=`...)."""
        return self._with(**spec_changes)

    def spec_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.spec_doc)

    def body(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if self.namespace is not None:
            metadata["namespace"] = self.namespace
        if self.uid is not None:
            metadata["uid"] = self.uid
        if self.generation is not None:
            metadata["generation"] = self.generation
        return {
            "apiVersion": "inferfleet.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": metadata,
            "spec": self.spec_dict(),
        }

    def spec(self) -> InferenceServiceSpec:
        return InferenceServiceSpec.model_validate(self.spec_dict())

    def service(self) -> InferenceService:
        return parse(self.body())


def a_service(name: str = "chat") -> ServiceBuilder:
    return ServiceBuilder().named(name) if name != "chat" else ServiceBuilder()


# The service the autoscaler, Prometheus and security tests scale: one L4 tier of 1 to 10
# replicas, a 2 s TTFT p99 SLO, and no credentials (it is never deployed).
SCALED_WORKLOAD: dict[str, Any] = {
    "inputTokens": {"p50": 500, "p95": 1500, "p99": 3000},
    "outputTokens": {"p50": 200, "p95": 500, "p99": 800},
    "peakRequestsPerSecond": 10,
    "slo": {"ttftP99Ms": 2000.0},
}
SCALED_TIER: dict[str, Any] = {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 10}


def a_scaled_service(name: str = "chat", namespace: str = "default") -> ServiceBuilder:
    """The autoscaler's test service, as a user applies it (no uid or generation yet)."""
    spec_doc = {
        "model": {"name": DEFAULT_MODEL},
        "workload": copy.deepcopy(SCALED_WORKLOAD),
        "tiers": [dict(SCALED_TIER)],
    }
    return ServiceBuilder(name, namespace, None, None, spec_doc)


# A feasible tier's figures as `inferfleet plan -o json` writes them (camelCase wire
# names): hand-made, so a test never depends on the planner's numbers.
DEFAULT_TIER_PLAN: dict[str, Any] = {
    "gpu": "H100-SXM-80GB", "feasible": True,
    "tensorParallelSize": 2, "pipelineParallelSize": 1, "gpusPerReplica": 2, "nodesPerReplica": 1,
    "quantization": "fp8", "kvCacheDtype": "fp8", "gpuMemoryUtilization": 0.9,
    "maxModelLen": 8192, "maxNumSeqs": 128, "maxNumBatchedTokens": 4096,
    "memoryGiB": {"weights": 8, "activations": 2, "overhead": 3, "kvCache": 50},
    "kvCacheTokens": 200_000, "maxConcurrency": 24.4, "usableRps": 3.0, "replicasForPeak": 2,
    "coldStartSeconds": 150.0, "reasons": ["fits"],
}  # fmt: skip


@dataclass(frozen=True)
class TierPlanBuilder:
    """One tier's plan; `.build()` validates it as the API model."""

    wire: dict[str, Any]

    def with_(self, **wire_changes: Any) -> TierPlanBuilder:
        """Wire fields replaced as given (camelCase: `maxModelLen=`, `warnings=`...)."""
        return TierPlanBuilder({**copy.deepcopy(self.wire), **copy.deepcopy(wire_changes)})

    def on(self, gpu: str) -> TierPlanBuilder:
        return self.with_(gpu=gpu)

    def layout(self, tp: int, pp: int = 1, *, nodes: int = 1) -> TierPlanBuilder:
        return self.with_(
            tensorParallelSize=tp, pipelineParallelSize=pp, gpusPerReplica=tp * pp, nodesPerReplica=nodes
        )

    def infeasible(self, reason: str = "70B at BF16 does not fit one L4 node") -> TierPlanBuilder:
        return self.with_(feasible=False, reasons=[reason])

    def capacity(
        self, *, usable_rps: float | None = None, cold_start_s: float | None = None, peak: int | None = None
    ) -> TierPlanBuilder:
        """The figures the autoscaler reads: a replica's usable rate, its cold start, and
        the replicas the declared peak needs; the ones not given are kept."""
        changes: dict[str, Any] = {}
        if usable_rps is not None:
            changes["usableRps"] = usable_rps
        if cold_start_s is not None:
            changes["coldStartSeconds"] = cold_start_s
        if peak is not None:
            changes["replicasForPeak"] = peak
        return self.with_(**changes)

    def wire_dict(self) -> dict[str, Any]:
        """The tier as status.plan and `plan -o json` hold it (camelCase)."""
        return copy.deepcopy(self.wire)

    def build(self) -> TierPlan:
        return TierPlan.model_validate(self.wire)


def a_tier_plan(name: str) -> TierPlanBuilder:
    return TierPlanBuilder({"name": name, **copy.deepcopy(DEFAULT_TIER_PLAN)})


# One unquantized L4 replica serving 8 requests at once, 2 rps, 120 s cold start: the tier
# the autoscaler's tests scale (hand-made figures, like DEFAULT_TIER_PLAN's).
SMALL_TIER_PLAN: dict[str, Any] = {
    "gpu": "L4", "feasible": True,
    "tensorParallelSize": 1, "pipelineParallelSize": 1, "gpusPerReplica": 1,
    "quantization": "none", "kvCacheDtype": "auto", "gpuMemoryUtilization": 0.9,
    "maxModelLen": 8192, "maxNumSeqs": 64, "maxNumBatchedTokens": 8192,
    "memoryGiB": {"weights": 15.0, "activations": 1.0, "overhead": 1.0, "kvCache": 3.0},
    "kvCacheTokens": 20000, "maxConcurrency": 8.0, "concurrencyAtP95": 8.0,
    "usableRps": 2.0, "replicasForPeak": 10, "coldStartSeconds": 120.0, "reasons": ["test fixture"],
}  # fmt: skip


def a_small_tier_plan(name: str) -> TierPlanBuilder:
    return TierPlanBuilder({"name": name, **copy.deepcopy(SMALL_TIER_PLAN)})


@dataclass(frozen=True)
class PlanBuilder:
    name: str
    tiers: tuple[TierPlan, ...]

    def build(self) -> Plan:
        return Plan(name=self.name, tiers=list(self.tiers))


def a_plan(*tiers: TierPlanBuilder | TierPlan, name: str = "chat") -> Plan:
    """A plan of the given tiers; without any, the default service's two tiers."""
    built = [t.build() if isinstance(t, TierPlanBuilder) else t for t in tiers]
    if not built:
        built = [a_tier_plan("h100").build(), a_tier_plan("l4").on("L4").build()]
    return PlanBuilder(name, tuple(built)).build()
