"""The `InferenceService` status: what the operator observed and decided.

The operator writes status only; it never writes spec (GitOps tools own spec).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import Field

from inferfleet.api import labels
from inferfleet.api.base import ApiModel
from inferfleet.api.plan import DisaggregationPlan, TierPlan
from inferfleet.api.spec import TokenPercentiles


class Condition(ApiModel):
    """A metav1.Condition: type, status, reason, message, last transition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    message: str = Field(default="", max_length=32_768)
    last_transition_time: str | None = Field(default=None, description="RFC 3339 time of the last change.")
    observed_generation: int | None = None


class TierReplacement(ApiModel):
    """While a tier changes kind, its old workload: serving until the new one is Ready."""

    kind: str = Field(description="Deployment or LeaderWorkerSet.")
    ready: int = Field(default=0, description="Ready replicas it still serves with.")
    needed: int = Field(default=0, description="Ready replicas the new workload needs before this one goes.")


class TierReplicas(ApiModel):
    """Replica counts of one tier's workload as last observed."""

    tier: str
    desired: int = 0
    ready: int = Field(
        default=0, description="Ready serving replicas, the replaced workload's included while it serves."
    )
    replacing: TierReplacement | None = Field(
        default=None, description="While the tier changes kind: the old workload, still serving."
    )


class CompileNode(ApiModel):
    """A node that has shown the tier's compile cache: a serving pod restored or published it
    there (the pod's verify container started at `since`)."""

    node: str = Field(max_length=253)
    since: str = Field(max_length=64, description="RFC 3339.")


class TierCache(ApiModel):
    """Weight pre-cache progress of one tier."""

    tier: str
    nodes_ready: int = 0
    nodes_eligible: int = 0
    revision: str | None = None
    nodes_wanted: str | None = Field(
        default=None,
        description="Set while no node matches the tier's placement: the node labels its pods look "
        "for, as a kubectl label selector (alternatives joined by OR).",
    )
    compile_key: str | None = Field(
        default=None,
        max_length=400,
        description="The tier's compile-cache key on the node cache (<model-dir>/<config-key>); unset "
        "where the node cache keeps none for the tier.",
    )
    nodes_compile_warm: int = Field(
        default=0, description="Eligible nodes that have shown they hold the tier's compile cache."
    )
    compile_nodes: list[CompileNode] | None = Field(
        default=None,
        max_length=100,
        description="Those nodes, with when each showed it (kept between passes; evidence stands while "
        "the node's pre-cache pod that was Ready before it stays Ready).",
    )


class ScalingDecision(ApiModel):
    """The autoscaler's last decision, for humans and for a restarted operator."""

    time: str = Field(description="RFC 3339 time of the decision.")
    replicas: dict[str, int] = Field(description="Desired replicas per tier.")
    signal: str = Field(
        description="The signal that won: warmMinimum, predictive, reactive, scheduled, escalation, "
        "wake, hold."
    )
    reason: str
    forecast_rps: float | None = None
    queue_depth: float | None = None
    ttft_p99_ms: float | None = None
    applied: bool = Field(default=True, description="False in advisory mode.")


class PoolStatus(ApiModel):
    """One InferencePool of the front door."""

    name: str
    tiers: list[str] = Field(default_factory=list, description="Tiers it routes to first.")
    endpoints: int = Field(default=0, description="Ready serving pods its selector matches.")
    hold_seconds: int | None = Field(default=None, description="How long its picker holds a request.")
    picker_ready: bool | None = Field(default=None, description="Its endpoint picker is Ready.")


class FrontDoorStatus(ApiModel):
    """How clients reach the service: the route on the Gateway and the pools behind it."""

    mode: str = Field(description="gateway or service.")
    gateway: str | None = Field(default=None, description="namespace/name of the Gateway.")
    route: str = Field(
        description="Accepted, NotAccepted, Pending, Missing, Shadowed (another route on the Gateway "
        "takes requests this route covers), or None (service mode)."
    )
    route_message: str | None = None
    shadowed_by: list[str] | None = Field(
        default=None, description="namespace/name of the routes that take requests this route covers."
    )
    endpoints: int = Field(default=0, description="Ready serving pods behind the front door.")
    pools: list[PoolStatus] | None = None


class ObservedWorkload(ApiModel):
    """The request mix the vLLM engines report (the autoscaler's reading; WorkloadDrift
    compares it with the workload the plan was made for)."""

    time: str = Field(description="RFC 3339 time of the reading.")
    input_tokens: TokenPercentiles = Field(
        description="Prompt percentiles (vllm:request_prompt_tokens); a workload to plan with."
    )
    output_tokens: TokenPercentiles = Field(
        description="Output percentiles (vllm:request_generation_tokens)."
    )
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    requests: int = Field(default=0, description="Requests the reading rests on.")
    rejected_share: float | None = Field(default=None, description="Share of requests answered 4xx.")
    capacity_ratio: float | None = Field(
        default=None, description="A replica's capacity for this mix over that for the planned one."
    )
    drift: bool = Field(default=False, description="True while WorkloadDrift is True.")
    implied_input_tokens: TokenPercentiles | None = Field(
        default=None,
        description="Prompt percentiles to re-plan with (past max-model-len when prompts are rejected).",
    )
    implied_output_tokens: TokenPercentiles | None = None


class PlannedWorkload(ApiModel):
    """The workload the plan was made for when it is not the declared one (replan: auto)."""

    source: Literal["observed"] = "observed"
    time: str = Field(description="RFC 3339 time the operator re-planned.")
    generation: int | None = Field(
        default=None, description="metadata.generation it applies to; a spec change returns to the declared."
    )
    input_tokens: TokenPercentiles
    output_tokens: TokenPercentiles


class ModelSourceStatus(ApiModel):
    """How config.json of a model the catalog lacks was read: by a probe Job in the
    service's namespace with its Secret (caching.precache.probe); the verdict survives restarts."""

    source: str
    revision: str
    key: str = Field(description="Hash of source, revision, Secret name/key and parameter counting.")
    secret_name: str | None = None
    secret_key: str | None = None
    state: Literal["Probing", "Resolved", "Failed"]
    reason: str = Field(description="Resolved, Probing, or why the read failed (DeadlineExceeded, ...).")
    message: str = Field(default="", max_length=2048)
    time: str = Field(description="RFC 3339 time this state began.")
    job: str | None = Field(default=None, description="The probe Job of this attempt.")
    attempt: int = Field(default=1, ge=0)
    resolved_revision: str | None = Field(default=None, description="The revision id read (a hub commit).")
    parameters_billion: float | None = None
    config: dict[str, Any] | None = Field(
        default=None,
        description="The config.json keys the planner reads.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class InferenceServiceStatus(ApiModel):
    """Observed state."""

    observed_generation: int | None = None
    plan_hash: str | None = None
    plan: list[TierPlan] | None = Field(default=None, description="Per-tier plan (the plan JSON contract).")
    disaggregation: DisaggregationPlan | None = Field(
        default=None,
        description="The prefill/decode split of the plan (the plan JSON's `disaggregation`), where the "
        "spec asks: the pools, the ratio, whether it is deployed and why.",
    )
    replicas: list[TierReplicas] | None = None
    desired_replicas: int | None = Field(default=None, description="Sum over tiers.")
    ready_replicas: int | None = Field(default=None, description="Sum over tiers.")
    tier_summary: str | None = Field(default=None, description="tier:ready/desired, for kubectl get.")
    summary: str | None = Field(
        default=None,
        description="The reason of the worst condition (WORST_FIRST), for kubectl get's STATUS column.",
    )
    ttft_p99_ms: float | None = None
    front_door: FrontDoorStatus | None = None
    cache: list[TierCache] | None = None
    last_scaling_decision: ScalingDecision | None = None
    observed_workload: ObservedWorkload | None = None
    planned_workload: PlannedWorkload | None = None
    model_source: ModelSourceStatus | None = None
    autoscaler_state: dict[str, Any] | None = Field(
        default=None,
        description="Opaque policy state, persisted so a restart never causes a scale-down.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


# What `status.summary` (kubectl get's STATUS) shows: the reason of the first condition
# in this list that holds, worst first. Trouble that needs someone (the spec is not
# deployed as written, a model config unreadable, the autoscaler holding replicas), then
# warnings about the plan (SLOs out of reach, traffic unlike the plan), then progress
# (probing, rolling out, fetching weights, waiting for replicas); Ready's own reason
# (Available) only when none holds. The Ready and Desired columns show progress anyway.
WORST_FIRST: Final[tuple[tuple[str, str], ...]] = (
    (labels.CONDITION_DEGRADED, "True"),
    (labels.CONDITION_MODEL_CONFIG_READ, "False"),
    (labels.CONDITION_PLANNED, "False"),
    (labels.CONDITION_SCALING_ACTIVE, "False"),
    (labels.CONDITION_SLO_AT_RISK, "True"),
    (labels.CONDITION_WORKLOAD_DRIFT, "True"),
    (labels.CONDITION_MODEL_CONFIG_READ, "Unknown"),
    (labels.CONDITION_READY, "False"),
    (labels.CONDITION_CACHE_READY, "False"),
    (labels.CONDITION_SCALING, "True"),
    (labels.CONDITION_READY, "True"),
)


def worst_condition(conditions: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The reason `status.summary` shows for these conditions (None: none to show).

    Each writer (the reconciler, the autoscaler) sets it from the conditions list it
    writes, which holds the other writer's conditions as last read."""
    found = {
        (str(c.get("type")), str(c.get("status"))): str(c.get("reason") or "")
        for c in conditions or []
        if isinstance(c, Mapping)
    }
    for wanted in WORST_FIRST:
        if found.get(wanted):
            return found[wanted]
    return None
