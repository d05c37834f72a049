"""Problems that need the operator's catalogs and settings to see (pure).

Field validation (api.spec) knows the spec alone. These checks also know the hardware
and model catalogs (built-in plus catalog_file) and the operator's settings, and report
each problem with the field path to fix. `refusals` is the one verdict on a spec: the
webhook (controller.admission), `inferfleet validate` and the reconciler all call it,
so what one refuses the others refuse too (the reconciler with `Planned=False`,
reason InvalidSpec).

- `catalog_problems`: a GPU name no catalog has (and no inline definition), a model the
  catalog lacks without an inline config and without a source a probe Job can read
  (`awaiting_source`: pvc:// and file:// are mounted only in serving pods; none at all
  with fetch_model_config off).
- `render_problems`: things that must never be rendered: a cache path outside the
  operator's allowed root, an eviction budget above the operator's per-namespace one, a
  GPU without node labels whose tier gives no placement of its own (its pods would fit
  any GPU node), one `serving.image` for tiers of different vendors, a vendor without a
  default image, scale to zero without a front door that holds requests (no Gateway, or
  a platform picker not declared to hold them), a Gateway in another namespace the
  settings do not allow, a hostname the Gateway API would refuse.

A model the catalog lacks is read by a probe Job in the tenant's namespace, with the
tenant's credentials (reconcile.modelprobe); nothing in the operator's process reads it.
So before that Job has run (at admission, in `validate`, while the probe runs) the
architecture is unknown, and with it which tiers are feasible: `refusals(service,
settings, None)` then judges what holds whatever the model is (the catalog, the spec's
own settings), and each tier's own problems wait for the plan.
"""

from __future__ import annotations

from collections.abc import Collection

from inferfleet.api import InferenceService, Plan, Problem
from inferfleet.api.frontdoor_spec import gateway_allowed, hostname_problem, render_hostname
from inferfleet.api.host_paths import is_under
from inferfleet.api.spec import NO_ACCELERATOR, InlineGpu
from inferfleet.caching.precache import probe
from inferfleet.catalog import Catalogs
from inferfleet.catalog.placement import (
    MAX_NODE_SELECTOR_TERMS,
    combined_term_count,
    resource_name,
    tier_gpu,
)
from inferfleet.config import OperatorSettings
from inferfleet.design import images, pd_split, topology

INLINE_HINT = (
    "give its architecture inline as spec.model.config (the keys of its config.json) plus "
    "spec.model.parametersBillion"
)


def awaiting_source(service: InferenceService, settings: OperatorSettings) -> str | None:
    """The source a probe Job reads the model's config.json from (`hf://<name>` when the
    spec names none), or None when the architecture is known without it (catalog, inline)
    or no probe can read it (then `catalog_problems` refuses the spec)."""
    if not settings.fetch_model_config or not probe.needs_fetch(service, settings.catalogs()):
        return None
    return None if probe.unprobeable(service) is not None else probe.source_uri(service)


def _model_problem(
    service: InferenceService, settings: OperatorSettings, catalogs: Catalogs
) -> Problem | None:
    model = service.spec.model
    if not probe.needs_fetch(service, catalogs):
        return None
    unknown = f"unknown model {model.name!r}: not in the model catalog"
    if not settings.fetch_model_config:
        return Problem(
            "spec.model.name",
            f"{unknown}, and this operator reads no model sources (Helm value serving.fetchModelConfig: "
            f"false); {INLINE_HINT}",
        )
    refused = probe.unprobeable(service)
    if refused is not None:
        return Problem("spec.model.source", f"{unknown}, and {refused}; {INLINE_HINT}")
    return None


def catalog_problems(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    catalogs = settings.catalogs()
    found: list[Problem] = []
    for index, tier in enumerate(service.spec.tiers):
        if isinstance(tier.gpu, str) and catalogs.gpu(tier.gpu) is None:
            found.append(
                Problem(
                    f"spec.tiers[{index}].gpu",
                    f"unknown GPU {tier.gpu!r}: not in the catalog (use one of "
                    f"{', '.join(catalogs.gpu_names())}, add it to the operator's catalog file, or "
                    "describe it inline as {name, memoryGiB, ...})",
                )
            )
    model = _model_problem(service, settings, catalogs)
    if model is not None:
        found.append(model)
    return found


def _budget_problems(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    """The node's disk is shared by every namespace's tree: a team may ask for less than
    the platform's per-namespace budget, never more."""
    cache = service.spec.cache
    budget = cache.eviction.budget_gib if cache is not None and cache.eviction is not None else None
    if budget is None or budget <= settings.cache_budget_gib:
        return []
    return [
        Problem(
            "spec.cache.eviction.budgetGiB",
            f"{budget:g} GiB is more than the operator's per-namespace node cache budget "
            f"({settings.cache_budget_gib:g} GiB, Helm value cache.budgetGiB); ask for at most that",
        )
    ]


def render_problems(
    service: InferenceService, settings: OperatorSettings, tiers: Collection[str] | None = None
) -> list[Problem]:
    """`tiers`: only these tiers' own problems (the feasible ones, which are rendered);
    every tier when None."""
    found: list[Problem] = []
    cache = service.spec.cache
    if cache is not None and cache.node_path and not is_under(cache.node_path, settings.cache_root):
        found.append(
            Problem(
                "spec.cache.nodePath",
                f"{cache.node_path!r} is outside the node cache root the operator allows "
                f"({settings.cache_root}, Helm value cache.allowedRoot); use a path under it",
            )
        )
    found += _budget_problems(service, settings)
    catalogs = settings.catalogs()
    needs_serving_image: dict[str, list[str]] = {}
    for index, tier in enumerate(service.spec.tiers):
        gpu = tier_gpu(tier, catalogs)
        if gpu is None or (tiers is not None and tier.name not in tiers):
            continue  # catalog_problems names it; the planner makes the tier infeasible
        accelerator = resource_name(tier, gpu) != NO_ACCELERATOR
        if (
            accelerator
            and tier.gpu_node_affinity == "required"
            and not gpu.node_labels
            and not tier.has_own_placement()
        ):
            inline = isinstance(tier.gpu, InlineGpu)
            found.append(
                Problem(
                    f"spec.tiers[{index}].gpu" + (".nodeLabels" if inline else ""),
                    (
                        f"inline GPU {gpu.name!r} has no nodeLabels"
                        if inline
                        else f"GPU {gpu.name!r} has no nodeLabels in the operator's catalog"
                    )
                    + f", so its pods would fit any node with a free {gpu.resource_name}: "
                    + (
                        "give the labels of the nodes that have it (e.g. {nvidia.com/gpu.product: "
                        "NVIDIA-RTX-6000-Ada-Generation})"
                        if inline
                        else "add nodeLabels to its catalog entry"
                    )
                    + ", or give the tier a nodeSelector or required node affinity",
                )
            )
        terms = combined_term_count(tier, gpu)
        if terms > MAX_NODE_SELECTOR_TERMS:
            found.append(
                Problem(
                    f"spec.tiers[{index}].affinity",
                    f"{terms} required node-selector terms once the tier's own are ANDed with its GPU "
                    f"type's (at most {MAX_NODE_SELECTOR_TERMS}); use fewer terms, or gpuNodeAffinity: none",
                )
            )
        if tier.image is None:
            needs_serving_image.setdefault(gpu.vendor, []).append(tier.name)
        no_default = images.default_image(gpu.vendor, settings) is None
        if images.explicit_image(service, tier) is None and no_default:
            found.append(
                Problem(
                    f"spec.tiers[{index}].image",
                    f"the operator has no default vLLM image for {gpu.vendor} GPUs ({gpu.name}); set this "
                    "tier's image or spec.serving.image",
                )
            )
    found.extend(front_door_problems(service, settings))
    serving = service.spec.serving
    if serving is not None and serving.image and len(needs_serving_image) > 1:
        groups = "; ".join(
            f"{vendor}: {', '.join(names)}" for vendor, names in sorted(needs_serving_image.items())
        )
        found.append(
            Problem(
                "spec.serving.image",
                f"one image cannot serve GPUs of several vendors ({groups}); set spec.tiers[].image "
                "on the tiers of all but one vendor, or drop serving.image to use the operator's "
                "image for each vendor",
            )
        )
    return found


def gateway_problems(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    """A Gateway is the platform's: a spec may name one in another namespace only where the
    operator's settings allow it (the default Gateway, `allowed_gateways`), or a team
    could attach routes to a Gateway the platform never meant for it. In `hostname` mode
    the service's hostname must be one the Gateway API accepts."""
    found: list[Problem] = []
    front = service.spec.front_door
    ref = front.gateway if front is not None and front.mode != "service" else None
    if ref is not None and ref.namespace and ref.namespace != service.namespace:
        default = (settings.gateway_namespace or service.namespace, settings.gateway_name)
        if (ref.namespace, ref.name) != default and not gateway_allowed(
            settings.allowed_gateways, ref.namespace, ref.name
        ):
            allowed = ", ".join(settings.allowed_gateways) or "none"
            found.append(
                Problem(
                    "spec.frontDoor.gateway",
                    f"Gateway {ref.namespace}/{ref.name} is in another namespace and the operator does not "
                    f"allow it (Helm frontDoor.allowedGateways: {allowed}); drop frontDoor.gateway to use "
                    "the operator's default Gateway, name one in this namespace, or ask the platform team "
                    "to allow it",
                )
            )
    if settings.front_door_match == "hostname" and topology.gateway_of(service, settings) is not None:
        hostname = render_hostname(settings.front_door_hostname or "", service.namespace, service.name)
        problem = hostname_problem(hostname)
        if problem is not None:
            found.append(
                Problem(
                    "metadata.name",
                    f"the route's hostname from the operator's template (Helm frontDoor.hostname) is not "
                    f"valid: {problem}; use a shorter name or namespace",
                )
            )
    return found


def front_door_problems(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    """Scale to zero needs a front door that holds the first request while a tier starts;
    a platform's endpoint picker serves one pool, so it cannot serve per-tier pools."""
    gateway = gateway_problems(service, settings)
    if gateway:
        return gateway
    front = service.spec.front_door
    if (
        front is not None
        and front.endpoint_picker is not None
        and service.spec.workload.routing
        and topology.gateway_of(service, settings) is not None
    ):
        return [
            Problem(
                "spec.frontDoor.endpointPicker",
                "with workload.routing the route splits traffic over one InferencePool per tier, and an "
                "endpoint picker serves exactly one pool; drop endpointPicker (the operator runs one "
                "picker per pool) or the routing shares",
            )
        ]
    scaling = service.spec.scaling
    if scaling is None or not scaling.allow_scale_to_zero:
        return []
    if topology.gateway_of(service, settings) is None:
        return [
            Problem(
                "spec.scaling.allowScaleToZero",
                "scale to zero needs a front door that holds requests, and this service has none: no "
                "Gateway is named in spec.frontDoor.gateway nor in the operator's settings (Helm "
                "frontDoor.gateway.name), so clients reach plain Services and the first request after "
                "idle would fail while a tier starts; name a Gateway or keep minReplicas >= 1",
            )
        ]
    picker = front.endpoint_picker if front is not None else None
    if picker is not None and not picker.holds_requests:
        return [
            Problem(
                "spec.frontDoor.endpointPicker.holdsRequests",
                f"scale to zero needs an endpoint picker that holds requests while the pool is empty; "
                f"the operator cannot see the configuration of {picker.name!r}: set holdsRequests: true "
                "once its flow control does (featureGates [flowControl]), or drop endpointPicker to use "
                "the operator's own",
            )
        ]
    return []


def refusals(service: InferenceService, settings: OperatorSettings, plan: Plan | None) -> list[Problem]:
    """Why the operator will not deploy this spec, each with its field path: the one verdict
    the webhook, `inferfleet validate` and the reconciler share.

    `plan`: the spec's plan; None while the model's architecture waits for its probe Job
    (`awaiting_source`). The tiers' own render problems count for the tiers the plan
    finds feasible (only those are rendered), for none without a plan."""
    feasible = set() if plan is None else {tier.name for tier in plan.feasible_tiers}
    return [
        *catalog_problems(service, settings),
        *render_problems(service, settings, feasible),
        *pd_split.problems(service, settings, plan),
    ]


def deferred(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    """The tiers' own problems `refusals` leaves for the plan while the architecture is
    unknown: each refuses the spec once the probe finds its tier feasible."""
    every = render_problems(service, settings)
    now = set(map(str, render_problems(service, settings, set())))
    return [problem for problem in every if str(problem) not in now]
