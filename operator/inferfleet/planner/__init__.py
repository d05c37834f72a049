"""Sizing planner: memory math, quantization, parallelism, fleet sizing (pure).

`plan(spec, catalogs, name)` returns a `Plan` with one `TierPlan` per tier, in spec
order. It never raises for a spec that passed validation: a tier that cannot be served
comes back with `feasible: false` and the reason first in `reasons`.

The memory figures model the vLLM release each tier runs (planner.releases): the
release comes from `spec.serving.vllmVersion`, else the tier's image (`tier_images`, then
`spec.serving.image`, then `default_image`, the operator's vLLM image setting).
A model the catalog lacks is planned from `spec.model.config`, or from a `FetchedModel`
the caller read from the model's source (the operator and the CLI do; planning stays
pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from inferfleet.api.plan import Plan, TierPlan
from inferfleet.api.resource import InferenceService
from inferfleet.api.spec import InferenceServiceSpec, ModelSpec, TierSpec
from inferfleet.catalog import Catalogs, ConfigInvalid, ModelArch, default_catalogs, parse_hf_config
from inferfleet.catalog.gpus import GpuSpec, gpu_from_inline
from inferfleet.planner import host_kv
from inferfleet.planner.disaggregation import plan_disaggregation
from inferfleet.planner.load import extras_for
from inferfleet.planner.observed import (
    MeasuredColdStart,
    MeasuredKvCapacity,
    observe_cold_starts,
    observe_kv_capacity,
)
from inferfleet.planner.releases import DEFAULT_VLLM_IMAGE, Release, resolve_release
from inferfleet.planner.tier import TierInputs, build_tier_plan, unplannable_tier


@dataclass(frozen=True)
class FetchedModel:
    """A model's config.json and parameter count as read from its source (by the caller: a
    probe pod's verdict in the operator, caching.fetcher.modelconfig in the CLI)."""

    config: Mapping[str, Any]
    parameters_billion: float
    source: str  # where it was read, for the reasons
    revision: str | None = None  # the revision id it was read at (a commit on the hub)


def resolve_model(
    model: ModelSpec,
    catalogs: Catalogs,
    fetched: FetchedModel | None = None,
    fetch_problem: str | None = None,
) -> tuple[ModelArch | None, str | None]:
    """The architecture from an inline config (it wins), the config read from the
    model's source, or the catalog; else why not."""
    if model.config is not None:
        try:
            return (parse_hf_config(model.config, model.name, model.parameters_billion or 0.0), None)
        except ConfigInvalid as error:
            return (None, f"infeasible: spec.model.config: {error}")
    if fetched is not None:
        try:
            params = model.parameters_billion or fetched.parameters_billion
            return (parse_hf_config(fetched.config, model.name, params), None)
        except ConfigInvalid as error:
            return (None, f"infeasible: the config.json read from {fetched.source}: {error}")
    found = catalogs.model(model.name)
    if found is None:
        # The caller's words say where config.json stands (read in a probe, or why not).
        why = (
            f": {fetch_problem}"
            if fetch_problem
            else " and its config.json could not be read from its source"
        )
        return (
            None,
            f"infeasible: model {model.name!r} is not in the catalog{why}; or give its architecture inline "
            "as spec.model.config (the keys of its config.json) plus parametersBillion",
        )
    if model.parameters_billion is not None and model.parameters_billion != found.parameters_billion:
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


def tier_release(
    spec: InferenceServiceSpec, tier: TierSpec, default_image: str | None, tier_images: Mapping[str, str]
) -> Release:
    """The vLLM release a tier runs: the explicit field, else its image's tag."""
    serving = spec.serving
    image = tier_images.get(tier.name) or (serving.image if serving else None) or default_image
    return resolve_release(image, serving.vllm_version if serving else None)


def plan_tier(
    spec: InferenceServiceSpec,
    tier: TierSpec,
    catalogs: Catalogs,
    *,
    release: Release | None = None,
    fetched: FetchedModel | None = None,
    fetch_problem: str | None = None,
    host_kv_default: host_kv.Mode = "off",
) -> TierPlan:
    """One tier planned for `release` (else the default image's); `host_kv_default`: the
    operator's host KV cache mode for specs that do not choose (planner.host_kv)."""
    release = release or tier_release(spec, tier, DEFAULT_VLLM_IMAGE, {})
    gpu, gpu_problem = resolve_gpu(tier, catalogs)
    if gpu is None or gpu_problem:
        return unplannable_tier(tier, gpu, None, gpu_problem or "infeasible: unknown GPU", release=release)
    arch, model_problem = resolve_model(spec.model, catalogs, fetched, fetch_problem)
    if arch is None:
        return unplannable_tier(
            tier, gpu, None, model_problem or "infeasible: unknown model", release=release
        )
    speculative = spec.serving.speculative_decoding if spec.serving else None
    draft = catalogs.model(speculative.model) if speculative is not None and speculative.model else None
    pre_quantized = tuple(
        (fmt, name, other)
        for fmt, name in catalogs.pre_quantized_of(spec.model.name)
        if spec.model.config is None and (other := catalogs.model(name)) is not None
    )
    inputs = TierInputs(
        arch=arch,
        gpu=gpu,
        release=release,
        extras=extras_for(spec, arch, draft),
        pre_quantized=pre_quantized,
    )
    planned = build_tier_plan(spec, tier, inputs)
    host = host_kv.plan_host_kv(
        spec, tier, planned, gpu=gpu, arch=arch, release=release.facts, default=host_kv_default
    )
    if host == host_kv.NONE:
        return planned
    return planned.model_copy(
        update={
            "host_kv_cache_gi_b": host.gib,
            "host_kv_cache_tokens": host.tokens,
            "reasons": [*planned.reasons, *host.reasons],
            "warnings": [*planned.warnings, *host.warnings],
        }
    )


def with_roles(spec: InferenceServiceSpec, planned: Plan, catalogs: Catalogs) -> Plan:
    """The plan with its prefill/decode split (planner.disaggregation), where the spec asks."""
    gpus = {tier.name: gpu for tier in spec.tiers if (gpu := resolve_gpu(tier, catalogs)[0]) is not None}
    split = plan_disaggregation(spec, planned.tiers, gpus)
    return planned if split is None else planned.model_copy(update={"disaggregation": split})


def plan(
    spec: InferenceServiceSpec,
    catalogs: Catalogs,
    name: str,
    observed: Mapping[str, MeasuredColdStart] | None = None,
    *,
    default_image: str | None = DEFAULT_VLLM_IMAGE,
    tier_images: Mapping[str, str] | None = None,
    fetched: FetchedModel | None = None,
    fetch_problem: str | None = None,
    measured_kv: Mapping[str, MeasuredKvCapacity] | None = None,
) -> Plan:
    """Plan every tier of an InferenceService spec (pure, no I/O).

    `observed` / `measured_kv`: measured cold starts and KV capacities per tier name,
    which join the estimate (planner.observed); `default_image`: the vLLM image tiers
    run when the spec names none; `tier_images`: per-tier images, where they differ;
    `fetched`: the model's config read from its source."""
    images = tier_images or {}
    planned = Plan(
        name=name,
        tiers=[
            plan_tier(
                spec,
                tier,
                catalogs,
                release=tier_release(spec, tier, default_image, images),
                fetched=fetched,
                fetch_problem=fetch_problem,
            )
            for tier in spec.tiers
        ],
    )
    planned = with_roles(spec, planned, catalogs)
    planned = observe_kv_capacity(planned, spec, measured_kv or {})
    return observe_cold_starts(planned, observed or {})


def plan_service(
    service: InferenceService,
    catalogs: Catalogs | None = None,
    observed: Mapping[str, MeasuredColdStart] | None = None,
    *,
    default_image: str | None = DEFAULT_VLLM_IMAGE,
    tier_images: Mapping[str, str] | None = None,
    fetched: FetchedModel | None = None,
    fetch_problem: str | None = None,
    measured_kv: Mapping[str, MeasuredKvCapacity] | None = None,
) -> Plan:
    return plan(
        service.spec,
        catalogs or default_catalogs(),
        service.name,
        observed,
        default_image=default_image,
        tier_images=tier_images,
        fetched=fetched,
        fetch_problem=fetch_problem,
        measured_kv=measured_kv,
    )


__all__ = [
    "DEFAULT_VLLM_IMAGE",
    "FetchedModel",
    "MeasuredColdStart",
    "MeasuredKvCapacity",
    "observe_cold_starts",
    "observe_kv_capacity",
    "plan",
    "plan_service",
    "plan_tier",
    "resolve_gpu",
    "resolve_model",
    "tier_release",
    "with_roles",
]
