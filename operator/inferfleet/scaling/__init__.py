"""Autoscaling policy: forecaster, policies, decide() (pure).

The live loop and the simulator both build a `ScalingContext`, call a policy
(`decide` is ours; `POLICIES` also holds the baselines) with the `ScalingState` from
the previous tick, apply the `Recommendation` and keep the returned state
(`ScalingState.to_dict()` goes to `status.autoscalerState`).
"""

from inferfleet.scaling.baselines import (
    POLICIES,
    PolicyFunction,
    policy_function,
    queue_only,
    reactive_util,
    static_peak,
)
from inferfleet.scaling.config import (
    figures_from_plan,
    mean_input_tokens,
    mean_output_tokens,
    replan_mode,
    resolve_policy,
)
from inferfleet.scaling.forecast import Forecast, ForecastConfig, forecast
from inferfleet.scaling.placement import Placement, TierSlot, place
from inferfleet.scaling.policy import decide
from inferfleet.scaling.types import (
    SIGNAL_ESCALATION,
    SIGNAL_HOLD,
    SIGNAL_PREDICTIVE,
    SIGNAL_REACTIVE,
    SIGNAL_SCHEDULED,
    SIGNAL_WAKE,
    SIGNAL_WARM_MINIMUM,
    DoorPool,
    FrontDoorSignals,
    PolicyConfig,
    PrewarmRule,
    Recommendation,
    ScalePacing,
    ScalingContext,
    ScalingState,
    TierContext,
    TierFigures,
    TierPolicy,
    TierRecommendation,
    TierSignals,
    TierState,
    TokenQuantiles,
)

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
    "TierRecommendation",
    "TierSignals",
    "TierSlot",
    "TierState",
    "TokenQuantiles",
    "decide",
    "figures_from_plan",
    "forecast",
    "mean_input_tokens",
    "mean_output_tokens",
    "place",
    "policy_function",
    "queue_only",
    "reactive_util",
    "replan_mode",
    "resolve_policy",
    "static_peak",
]
