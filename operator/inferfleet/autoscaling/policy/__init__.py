"""Autoscaling policy: forecaster, policies, decide() (pure).

The live loop and the simulator both build a `ScalingContext`, call a policy
(`decide` is ours; `POLICIES` also holds the baselines) with the `ScalingState` from
the previous tick, apply the `Recommendation` and keep the returned state
(`ScalingState.to_dict()` goes to `status.autoscalerState`).
"""

# The policy's configuration is resolved per service by the design (design.policy_config);
# decide() reads it, so its types are part of this package's interface too.
from inferfleet.autoscaling.policy.baselines import (
    POLICIES,
    PolicyFunction,
    policy_function,
    queue_only,
    queue_only_at,
    reactive_util,
    reactive_util_at,
    static_peak,
)
from inferfleet.autoscaling.policy.demand_placement import Placement, TierSlot, place
from inferfleet.autoscaling.policy.figures import figures_from_plan
from inferfleet.autoscaling.policy.forecast import Forecast, ForecastConfig, forecast
from inferfleet.autoscaling.policy.policy import decide
from inferfleet.autoscaling.policy.readings import TierReadings, TokenQuantiles
from inferfleet.autoscaling.policy.types import (
    SIGNAL_ESCALATION,
    SIGNAL_HOLD,
    SIGNAL_PREDICTIVE,
    SIGNAL_REACTIVE,
    SIGNAL_SCHEDULED,
    SIGNAL_WAKE,
    SIGNAL_WARM_MINIMUM,
    DoorPool,
    FrontDoorSignals,
    Recommendation,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierRecommendation,
    TierSignals,
    TierState,
)
from inferfleet.design.policy_config import PolicyConfig, PrewarmRule, ScalePacing, TierPolicy

__all__ = [
    "POLICIES",
    "SIGNAL_ESCALATION",
    "SIGNAL_HOLD",
    "SIGNAL_PREDICTIVE",
    "SIGNAL_REACTIVE",
    "SIGNAL_SCHEDULED",
    "SIGNAL_WAKE",
    "SIGNAL_WARM_MINIMUM",
    "DoorPool",
    "Forecast",
    "ForecastConfig",
    "FrontDoorSignals",
    "Placement",
    "PolicyConfig",
    "PolicyFunction",
    "PrewarmRule",
    "Recommendation",
    "ScalePacing",
    "ScalingContext",
    "ScalingState",
    "TierContext",
    "TierFigures",
    "TierPolicy",
    "TierReadings",
    "TierRecommendation",
    "TierSignals",
    "TierSlot",
    "TierState",
    "TokenQuantiles",
    "decide",
    "figures_from_plan",
    "forecast",
    "place",
    "policy_function",
    "queue_only",
    "queue_only_at",
    "reactive_util",
    "reactive_util_at",
    "static_peak",
]
