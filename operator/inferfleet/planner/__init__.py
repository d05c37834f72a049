"""Sizing planner: memory math, quantization, parallelism, fleet sizing (pure).

`plan(spec, catalogs, name)` returns a `Plan` with one `TierPlan` per tier, in spec
order. It never raises for a spec that passed validation: a tier that cannot be served
comes back with `feasible: false` and the reason first in `reasons`.
"""

from __future__ import annotations

from collections.abc import Mapping

from inferfleet.api.plan import Plan, TierPlan
from inferfleet.api.resource import InferenceService
from inferfleet.api.spec import InferenceServiceSpec, ModelSpec, TierSpec
from inferfleet.catalog import Catalogs, ConfigInvalid, ModelArch, default_catalogs, parse_hf_config
from inferfleet.catalog.gpus import GpuSpec, gpu_from_inline
from inferfleet.planner.observed import MeasuredColdStart, observe_cold_starts
from inferfleet.planner.tier import build_tier_plan, unplannable_tier


def resolve_model(model: ModelSpec, catalogs: Catalogs) -> tuple[ModelArch | None, str | None]:
    """The architecture from an inline config (it wins) or the catalog, else why not."""
    if model.config is not None:
        try:
            return (parse_hf_config(model.config, model.name, model.parameters_billion or 0.0), None)
        except ConfigInvalid as error:
            return (None, f"infeasible: spec.model.config: {error}")
    found = catalogs.model(model.name)
    if found is None:
        return (
            None,
            f"infeasible: model {model.name!r} is not in the catalog; give its architecture inline as "
            "spec.model.config (the keys of its config.json) plus parametersBillion",
        )
    if model.parameters_billion is not None and model.parameters_billion != found.parameters_billion:
        from dataclasses import replace

        found = replace(found, parameters_billion=model.parameters_billion)
    return (found, None)


def resolve_gpu(tier: TierSpec, catalogs: Catalogs) -> tuple[GpuSpec | None, str | None]:
    if not isinstance(tier.gpu, str):
        return (gpu_from_inline(tier.gpu), None)
    found = catalogs.gpu(tier.gpu)
    if found is None:
        return (
            None,
            f"infeasible: GPU {tier.gpu!r} is not in the catalog; use one of "
            f"{', '.join(catalogs.gpu_names())} or describe it inline ({{name, memoryGiB, ...}})",
        )
    if found.unsupported_reason:
        return (found, f"infeasible: {found.unsupported_reason}")
    return (found, None)


def plan_tier(spec: InferenceServiceSpec, tier: TierSpec, catalogs: Catalogs) -> TierPlan:
    gpu, gpu_problem = resolve_gpu(tier, catalogs)
    if gpu is None or gpu_problem:
        return unplannable_tier(tier, gpu, None, gpu_problem or "infeasible: unknown GPU")
    arch, model_problem = resolve_model(spec.model, catalogs)
    if arch is None:
        return unplannable_tier(tier, gpu, None, model_problem or "infeasible: unknown model")
    return build_tier_plan(spec, tier, arch, gpu)


def plan(
    spec: InferenceServiceSpec,
    catalogs: Catalogs,
    name: str,
    observed: Mapping[str, MeasuredColdStart] | None = None,
) -> Plan:
    """Plan every tier of an InferenceService spec (pure, no I/O). `observed`: measured
    cold starts per tier name, which replace the estimate (planner.observed)."""
    planned = Plan(name=name, tiers=[plan_tier(spec, tier, catalogs) for tier in spec.tiers])
    return observe_cold_starts(planned, observed or {})


def plan_service(
    service: InferenceService,
    catalogs: Catalogs | None = None,
    observed: Mapping[str, MeasuredColdStart] | None = None,
) -> Plan:
    return plan(service.spec, catalogs or default_catalogs(), service.name, observed)


__all__ = [
    "MeasuredColdStart",
    "observe_cold_starts",
    "plan",
    "plan_service",
    "plan_tier",
    "resolve_gpu",
    "resolve_model",
]
