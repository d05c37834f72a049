"""Names shared by every part of the operator: API group, labels, annotations, reasons.

One place for the strings that appear in the cluster, so a rename is one edit and a
typo is a NameError rather than an object nobody selects.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "inferfleet.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "InferenceService"
PLURAL: Final = "inferenceservices"
SINGULAR: Final = "inferenceservice"
SHORT_NAMES: Final = ("ifs",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

# The one field manager used for every server-side apply the operator makes.
FIELD_MANAGER: Final = "inferfleet-operator"

# Labels carried by every object the operator owns.
LABEL_SERVICE: Final = f"{GROUP}/service"
LABEL_TIER: Final = f"{GROUP}/tier"
LABEL_COMPONENT: Final = f"{GROUP}/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
MANAGED_BY_VALUE: Final = "inferfleet"

# Annotations.
ANNOTATION_PLAN_HASH: Final = f"{GROUP}/plan-hash"
ANNOTATION_POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"

# Series labels the autoscaler selects and groups by. Prometheus attaches them to the
# target, never the scraped endpoint (the PodMonitor keeps honorLabels off, so a label an
# endpoint exports under one of these names arrives as `exported_<name>`):
# - `namespace` and `pod` from service discovery (prometheus-operator sets them for every
#   PodMonitor; a Prometheus with `enforcedNamespaceLabel: namespace` pins `namespace` to
#   the monitor's own namespace, whatever the monitor's relabelings say);
# - `job`, which the operator's PodMonitors set to SCRAPE_JOB_*;
# - the service and tier, copied from the pod's labels by the operator's PodMonitor.
SERIES_LABEL_NAMESPACE: Final = "namespace"
SERIES_LABEL_POD: Final = "pod"
SERIES_LABEL_JOB: Final = "job"
SERIES_LABEL_SERVICE: Final = "inferfleet_service"
SERIES_LABEL_TIER: Final = "inferfleet_tier"
# A prefill/decode split's role (render.pd_objects): the pod label llm-d's picker reads,
# copied onto the series so a prefill pod's finished requests (each a prefill of a
# request its decode pod also finishes) are not counted twice in the service's rate.
LABEL_PD_ROLE: Final = "llm-d.ai/role"
SERIES_LABEL_ROLE: Final = "inferfleet_role"
PD_ROLE_PREFILL: Final = "prefill"
# The `job` of the targets the operator's own PodMonitors scrape: the vLLM servers and
# the front door's endpoint pickers. The autoscaler reads no other job's series.
SCRAPE_JOB_SERVER: Final = "inferfleet-vllm"
SCRAPE_JOB_PICKER: Final = "inferfleet-epp"

# Condition types. Each has one writer (LeaderWorkerSet's convention), named in
# CONDITION_OWNERS: nobody reads a message to learn who wrote a condition, and no writer
# can undo another's. tests/unit/test_condition_owners.py holds the code to it.
CONDITION_PLANNED: Final = "Planned"
CONDITION_CACHE_READY: Final = "CacheReady"
CONDITION_READY: Final = "Ready"
CONDITION_SCALING: Final = "Scaling"
CONDITION_DEGRADED: Final = "Degraded"
# A tier's plan cannot meet the workload's latency SLOs (plan.tiers[].warnings say why).
CONDITION_SLO_AT_RISK: Final = "SloAtRisk"
# The traffic the engines report departs from the declared workload enough to change
# the plan (the autoscaler's verdict; autoscaling.policy.drift).
CONDITION_WORKLOAD_DRIFT: Final = "WorkloadDrift"
# The autoscaler can decide this service (HorizontalPodAutoscaler's condition of the same
# name): False while it holds replicas because the metrics are missing
# (MetricsUnavailable) or the service cannot be decided (AutoscalingFailed).
CONDITION_SCALING_ACTIVE: Final = "ScalingActive"
# config.json of a model the catalog lacks, read by a probe Job in the service's namespace
# (reconcile.modelprobe): Unknown while it runs, False when it failed, True once read.
CONDITION_MODEL_CONFIG_READ: Final = "ModelConfigRead"
CONDITION_TYPES: Final = (
    CONDITION_PLANNED,
    CONDITION_CACHE_READY,
    CONDITION_READY,
    CONDITION_SCALING,
    CONDITION_DEGRADED,
    CONDITION_SLO_AT_RISK,
    CONDITION_WORKLOAD_DRIFT,
    CONDITION_SCALING_ACTIVE,
    CONDITION_MODEL_CONFIG_READ,
)
# The one component that writes each condition type: the reconciler (its pure rules in
# reconcile/, executed by controller/) or the autoscaler (scalestep/ decides, autoscaler/
# writes). Everyone else only reads.
OWNER_RECONCILER: Final = "reconciler"
OWNER_AUTOSCALER: Final = "autoscaler"
CONDITION_OWNERS: Final = {
    CONDITION_PLANNED: OWNER_RECONCILER,
    CONDITION_CACHE_READY: OWNER_RECONCILER,
    CONDITION_READY: OWNER_RECONCILER,
    CONDITION_DEGRADED: OWNER_RECONCILER,
    CONDITION_SLO_AT_RISK: OWNER_RECONCILER,
    CONDITION_SCALING: OWNER_AUTOSCALER,
    CONDITION_WORKLOAD_DRIFT: OWNER_AUTOSCALER,
    CONDITION_SCALING_ACTIVE: OWNER_AUTOSCALER,
    CONDITION_MODEL_CONFIG_READ: OWNER_RECONCILER,
}

# Condition reasons (CamelCase, as Kubernetes conventions ask).
REASON_PLANNED: Final = "Planned"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_INFEASIBLE_TIER: Final = "InfeasibleTier"
REASON_NO_FEASIBLE_TIER: Final = "NoFeasibleTier"
REASON_APPLY_FAILED: Final = "ApplyFailed"
# An object the operator would create exists and is not the InferenceService's (someone
# else made it): left untouched, named in Degraded's message.
REASON_OBJECT_CONFLICT: Final = "ObjectConflict"
REASON_METRICS_UNAVAILABLE: Final = "MetricsUnavailable"
REASON_FRONT_DOOR_UNAVAILABLE: Final = "FrontDoorUnavailable"
REASON_AVAILABLE: Final = "Available"
REASON_PROGRESSING: Final = "Progressing"
REASON_SLO_UNREACHABLE: Final = "SloUnreachable"
REASON_SLOS_REACHABLE: Final = "SlosReachable"
# The plan follows the observed workload (spec.scaling.replan: auto).
REASON_REPLANNED: Final = "ReplannedForObservedWorkload"
# ModelConfigRead: a probe Job is reading config.json / it failed (its own reason in the
# message, retried after a backoff) / it was read.
REASON_PROBING: Final = "Probing"
REASON_PROBE_FAILED: Final = "ProbeFailed"
REASON_CONFIG_READ: Final = "ConfigRead"
