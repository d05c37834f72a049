"""Renderer: a Design -> Kubernetes objects (pure).

`render` is a pure function of its arguments: the same design gives
the same list of objects, sorted, every time (golden files and the reconcile diff rely
on it). Per feasible tier: a Deployment (or a LeaderWorkerSet when a replica spans
nodes), a Service and a PodDisruptionBudget; per InferenceService: a Service over all
tiers and a PodMonitor. In a deployed prefill/decode split its two tiers' pods take their
role (render.pd_objects). Infeasible tiers render nothing; the reconciler decides what
that means for objects that already exist.

Extension points for other features, each one line to add to:
- `POD_CONTRIBUTORS`: functions returning `PodAdditions` (init containers, volumes,
  mounts, env) merged into every vLLM pod of a tier;
- `OBJECT_CONTRIBUTORS`: functions returning extra objects (pre-cache Jobs,
  DaemonSets) rendered beside the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from inferfleet.api import InferenceService, Plan
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.config import OperatorSettings
from inferfleet.design import pd_split
from inferfleet.design.derive import Design
from inferfleet.render import frontdoor, model_source, pd_objects
from inferfleet.render.pod import HOME_PATH, HOME_VOLUME, PodAdditions, TierRenderContext, extend
from inferfleet.render.service_objects import (
    PodContributor,
    content_hash,
    disruption_budget,
    owner_reference,
    pod_monitor,
    service_object,
    tier_service,
    workload,
)

ObjectContributor = Callable[
    [InferenceService, Plan, OperatorSettings, Mapping[str, str]], list[dict[str, Any]]
]
# The pod's writable home (render.pod) holds the engine's caches (VLLM_CACHE_ROOT,
# TRITON_CACHE_DIR): what the node's compile cache is restored into and published from.
ENGINE_HOME = cache_objects.EngineHome(HOME_VOLUME, HOME_PATH, f"{HOME_PATH}/.cache")


def _weight_cache(ctx: TierRenderContext) -> PodAdditions:
    """Serving pods wait for, and pin, the node's pre-cached weights (issue 5), and start
    from the node's compile cache for their tier's key where it keeps one (issue 33)."""
    ref = cache_objects.compile_cache_ref(ctx.service, ctx.plan, ctx.image)
    home = dataclasses.replace(ENGINE_HOME, port=pd_objects.vllm_port(ctx.role))
    compiled = (ref, home) if ref is not None else None
    init = cache_objects.init_containers(ctx.service, ctx.tier.name, ctx.settings, compiled)
    volumes = cache_objects.compile_volumes(ctx.service, ctx.settings) if ref is not None else []
    return PodAdditions(init_containers=tuple(init), volumes=tuple(volumes))


def _secret_env_note(ctx: TierRenderContext) -> PodAdditions:
    """Say why a secret reaches vLLM as an environment variable, where one does.

    vLLM reads its API key only from VLLM_API_KEY or --api-key (a Secret reference is the
    safer of the two), and the Run:ai streamer reads object-store keys from AWS_*/GOOGLE_*
    variables; every other secret is a mounted file."""
    serving = ctx.service.spec.serving
    from_secret = any(
        e.value_from is not None and e.value_from.secret_key_ref is not None
        for e in (serving.env if serving is not None else None) or []
    )
    if not from_secret and not ctx.source.credentials_as_env_from:
        return PodAdditions()
    reason = "CKV_K8S_35=vLLM reads its API key and object-store keys only from environment variables"
    return PodAdditions(annotations={"checkov.io/skip1": reason})


def _routing_sidecar(ctx: TierRenderContext) -> PodAdditions:
    """A decode pod of a deployed split runs llm-d's routing sidecar in front of vLLM, with
    a token of its own (render.pd_objects)."""
    if ctx.role != "decode" or ctx.pool is None:
        return PodAdditions()
    return PodAdditions(
        init_containers=(pd_objects.sidecar(ctx.service.namespace, ctx.pool, ctx.settings.pd_sidecar_image),),
        volumes=(pd_objects.token_volume(),),
        pod_fields={"serviceAccountName": pd_objects.sidecar_service_account(ctx.service)},
    )


POD_CONTRIBUTORS: tuple[PodContributor, ...] = (_weight_cache, _secret_env_note, _routing_sidecar)
OBJECT_CONTRIBUTORS: tuple[ObjectContributor, ...] = (cache_objects.precache_objects,)

# Apply order: what others point at first (Services, budgets), the pre-cache (so weights
# start moving before replicas wait for them), then the workloads.
KIND_ORDER = (
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Service",
    "PodDisruptionBudget",
    "PodMonitor",
    "DaemonSet",
    "Job",
    "Deployment",
    "LeaderWorkerSet",
    # The pool once its picker exists, the route once the pool does.
    "InferencePool",
    "HTTPRoute",
)


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str]:
    kind = str(obj["kind"])
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return rank, kind, str(obj["metadata"]["name"])


def at_revision(service: InferenceService, revision: str) -> InferenceService:
    """The same InferenceService asking for another model revision."""
    model = service.spec.model.model_copy(update={"revision": revision})
    spec = service.spec.model_copy(update={"model": model})
    return service.model_copy(update={"spec": spec})


def render(design: Design, workload_revisions: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every object the design's InferenceService should own, sorted for apply order.

    The pods of each feasible tier run the image and GPU placement the design chose; the
    front door is the design's topology (its holds already lengthened by measured cold
    starts, while pod templates keep the plan's estimate, so a measurement never rolls
    pods). `workload_revisions` (per tier) is the model revision a held tier's workload
    keeps serving until its nodes cache the new one (reconcile.rollout); every other
    object, its pre-cache DaemonSet included, renders at the spec's revision."""
    service, plan, settings, front = design.service, design.plan, design.settings, design.front_door
    if plan is None or front is None:
        raise ValueError(f"{design.source}: nothing to render without a plan ({design.invalid})")
    source = model_source.resolve(service, settings)
    held = dict(workload_revisions or {})
    split = pd_split.roles(plan)
    split_pool = front.pools[0].name if split is not None and front.disaggregated else None
    objects = [service_object(service), pod_monitor(service)]
    for tier_plan in plan.feasible_tiers:
        tier = design.tier(tier_plan.name)
        if tier is None or tier.image is None:
            why = "no image (design.checks refuses it)"
            raise ValueError(f"{design.source}: tier {tier_plan.name} has {why}")
        at = at_revision(service, held[tier.name]) if tier.name in held else service
        at_source = model_source.resolve(at, settings) if tier.name in held else source
        role = split.of(tier.name) if split is not None and split_pool is not None else None
        ctx = TierRenderContext(
            at, tier.spec, tier_plan, settings, at_source, tier.image, tier.gpu, role, split_pool
        )
        serving_labels = {**frontdoor.pod_labels(front, plan, tier.name), **pd_objects.role_labels(role)}
        objects.append(workload(ctx, POD_CONTRIBUTORS, serving_labels))
        objects.append(tier_service(service, tier.name))
        objects.append(disruption_budget(service, tier.name))
    objects.extend(frontdoor.objects(service, front, settings, owner_reference(service)))
    for contribute in OBJECT_CONTRIBUTORS:
        objects.extend(contribute(service, plan, settings, design.tier_images))
    return sorted(objects, key=sort_key)


__all__ = [
    "KIND_ORDER",
    "OBJECT_CONTRIBUTORS",
    "POD_CONTRIBUTORS",
    "ObjectContributor",
    "PodAdditions",
    "PodContributor",
    "TierRenderContext",
    "at_revision",
    "content_hash",
    "extend",
    "frontdoor",
    "owner_reference",
    "render",
    "sort_key",
]
