"""Every decision derived from an InferenceService spec, in one place (pure).

`design(service, settings, observed) -> Design` (design.derive) is what the operator will
do with a spec; the reconciler, the webhook, the CLI, the simulator and the autoscaler
all call it. Its parts: `replan` (the workload planned for), `images` (each tier's vLLM
build), `checks` (the one verdict on a spec), `topology` (the front door's pools),
`policy_config` (the scaling policy), `object_names` (deterministic object names).
"""

from inferfleet.design.derive import (
    NOT_READ,
    NOTHING_OBSERVED,
    Design,
    ModelReading,
    Observations,
    PlanFailure,
    TierDesign,
    design,
)

__all__ = [
    "NOTHING_OBSERVED",
    "NOT_READ",
    "Design",
    "ModelReading",
    "Observations",
    "PlanFailure",
    "TierDesign",
    "design",
]
