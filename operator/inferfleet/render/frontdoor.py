"""The front door: one endpoint for every tier of an InferenceService (pure).

In `gateway` mode the service gets an `HTTPRoute` (gateway.networking.k8s.io/v1) to an
`InferencePool` (inference.networking.k8s.io/v1) and, per pool, an endpoint picker
(EPP, llm-d's router) with its configuration. The picker chooses a pod per request
(load, KV use, prefix cache), drops the pods whose max-model-len the prompt exceeds,
and holds requests while no pod can take them (flow control), which is what lets a tier
start from zero without losing the first request.

Routing shares (`workload.routing`) are weights on the route: one pool per tier behind
weighted `backendRefs`, so the Gateway sends each tier its planned share. A weighted
split happens before anyone reads the prompt, so a tier's pool also holds the pods of
the tiers that accept longer prompts (its "overflow" tiers): the picker's length filter
sends a prompt its own tier cannot take to one of them, and its context-length scorer
prefers the pool's own tier for every prompt that fits there. Without shares there is
one pool over all tiers and the picker alone places each request.

`service` mode (no Gateway named in the spec or the operator's settings) renders none
of this: clients use the `<service>` Service, nothing filters by length (vLLM answers
400) and nothing holds requests, so scale to zero is refused (design.checks). Which
pools and Gateway a service gets is decided in design.frontdoor; this module renders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from inferfleet.api import InferenceService, Plan, TierPlan, labels
from inferfleet.api.frontdoor_spec import render_hostname
from inferfleet.catalog import placement
from inferfleet.config import OperatorSettings
from inferfleet.design import object_names as names
from inferfleet.design.topology import FrontDoor, Pool
from inferfleet.render import lifecycle, pd_objects, templating
from inferfleet.render.service_objects import prometheus_name
from inferfleet.render.vllm_args import HTTP_PORT, served_model_name

# Pod labels the endpoint picker's plugins read (a picker sees pod labels, not
# annotations). The context-length range is llm-d's `context-length-aware` plugin's
# label: "min-max" prompt tokens the pod accepts.
LABEL_CONTEXT_LENGTH_RANGE = "llm-d.ai/context-length-range"
LABEL_MAX_MODEL_LEN = f"{labels.GROUP}/max-model-len"
LABEL_MAX_NUM_SEQS = f"{labels.GROUP}/max-num-seqs"
LABEL_KV_CACHE_TOKENS = f"{labels.GROUP}/kv-cache-tokens"
LABEL_COST_RANK = f"{labels.GROUP}/cost-rank"
# Pool membership in share mode: `inferfleet.dev/pool-<tier>: member` on the pods of that
# tier and of its overflow tiers (an InferencePool selects by equality only).
POOL_LABEL_PREFIX = f"{labels.GROUP}/pool-"
POOL_MEMBER = "member"
LABEL_POOL = f"{labels.GROUP}/pool"

COMPONENT_EPP = "epp"
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_GRACE_S = 130
EPP_RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}
EPP_CONFIG_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
# Scorer weights: load and KV balance with prefix-cache affinity (the picker's own
# defaults), plus the context-length scorer. In a share-mode pool it outweighs them all so
# a prompt that fits the pool's own tier stays there (its range is the tightest).
LOAD_SCORER_WEIGHTS = (
    ("queue-scorer", 2.0),
    ("kv-cache-utilization-scorer", 2.0),
    ("prefix-cache-scorer", 3.0),
)
OWN_TIER_WEIGHT_SHARED = 1.0
OWN_TIER_WEIGHT_SPLIT = 10.0
# The picker's saturation detector (the utilization detector, left at its defaults) calls
# a pool saturated, and flow control starts queueing its requests, once its pods average
# this many requests waiting in vLLM (its default queueDepthThreshold).
DETECTOR_QUEUE_DEPTH = 5

# The header a body-based router (the Inference Extension's BBR, GKE's body-based
# routing) sets from the `model` of an OpenAI-style request body, before routes match.
MODEL_HEADER = "X-Gateway-Model-Name"
# The Gateway API allows 64 matches per rule.
MATCHES_PER_RULE = 64

# The flow-control queue metric, per pool (label `inference_pool`): what the autoscaler
# wakes a tier on. llm-d's router exports it under its own prefix as well.
QUEUE_METRICS = ("inference_extension_flow_control_queue_size", "llm_d_epp_flow_control_queue_size")


def path_prefix(service: InferenceService) -> str:
    """The path of a service's own on a shared Gateway: `/<namespace>/<name>`. Namespaces
    and names are DNS labels, so no two services' prefixes cover each other."""
    return f"/{service.namespace}/{service.name}"


def served_names(service: InferenceService) -> list[str]:
    """The `model` values vLLM answers to: the served model name and each adapter's."""
    adapters = service.spec.model.adapters or []
    return [served_model_name(service), *(adapter.name for adapter in adapters)]


@dataclass(frozen=True)
class RouteShape:
    """Which requests a service's HTTPRoute takes: its hostnames and matches (wire form),
    and whether the path prefix is cut before vLLM sees the request."""

    hostnames: tuple[str, ...]
    matches: tuple[dict[str, Any], ...]
    rewrite_prefix: bool


def route_shape(service: InferenceService, settings: OperatorSettings) -> RouteShape:
    """A match of the service's own, as `settings.front_door_match` asks: unique per
    namespace/name for `path` and `hostname`; for `model`, the names the spec serves."""
    match settings.front_door_match:
        case "hostname":
            template = settings.front_door_hostname or ""
            hostname = render_hostname(template, service.namespace, service.name)
            return RouteShape((hostname,), ({"path": {"type": "PathPrefix", "value": "/"}},), False)
        case "model":
            matches = tuple(
                {
                    "path": {"type": "PathPrefix", "value": "/"},
                    "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model}],
                }
                for model in served_names(service)
            )
            return RouteShape((), matches, False)
        case _:
            prefix = {"path": {"type": "PathPrefix", "value": path_prefix(service)}}
            return RouteShape((), (prefix,), True)


def route_rules(shape: RouteShape, backends: list[dict[str, Any]], timeout: str) -> list[dict[str, Any]]:
    """The route's rules: its matches (64 to a rule), the prefix rewrite, the backends and
    the timeout (the Gateway must wait out the picker's hold plus the longest answer)."""
    rules = []
    for start in range(0, len(shape.matches), MATCHES_PER_RULE):
        rule: dict[str, Any] = {"matches": list(shape.matches[start : start + MATCHES_PER_RULE])}
        if shape.rewrite_prefix:
            # vLLM serves /v1/...: the Gateway cuts /<namespace>/<name> before forwarding.
            rewrite = {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}
            rule["filters"] = [{"type": "URLRewrite", "urlRewrite": rewrite}]
        rule["backendRefs"] = backends
        rule["timeouts"] = {"request": timeout}
        rules.append(rule)
    return rules


# --- pod labels ------------------------------------------------------------------------


def cost_ranks(plan: Plan) -> dict[str, int]:
    """1 for the feasible tier with the lowest cost per token, 2 for the next, ...; tiers
    without a cost come last, in spec order."""
    feasible = plan.feasible_tiers
    order = sorted(
        range(len(feasible)),
        key=lambda i: (
            feasible[i].cost_per_million_tokens_usd is None,
            feasible[i].cost_per_million_tokens_usd or 0.0,
            i,
        ),
    )
    return {feasible[index].name: rank for rank, index in enumerate(order, start=1)}


def capacity_labels(tier: TierPlan, cost_rank: int, *, longest: bool) -> dict[str, str]:
    """What one tier's pods publish about their planned capacity. vLLM answers 400 to a
    prompt of max-model-len tokens or more, so a range ends one token below it.

    The tiers with the service's longest max-model-len carry no range: the picker's
    length filter lets unlabelled pods take any prompt, so a prompt no tier can take
    still reaches one of them and gets vLLM's own 400 (which tells the client the limit,
    and which WorkloadDrift counts) instead of a picker error; every shorter tier is
    closed to the prompts it cannot take."""
    out = {
        LABEL_MAX_MODEL_LEN: str(tier.max_model_len),
        LABEL_MAX_NUM_SEQS: str(tier.max_num_seqs),
        LABEL_KV_CACHE_TOKENS: str(tier.kv_cache_tokens),
        LABEL_COST_RANK: str(cost_rank),
    }
    if not longest:
        out[LABEL_CONTEXT_LENGTH_RANGE] = f"0-{max(0, tier.max_model_len - 1)}"
    return out


def pod_labels(front: FrontDoor, plan: Plan, tier: str) -> dict[str, str]:
    """Capacity labels plus, in share mode, the pools this tier's pods belong to."""
    longest = max(t.max_model_len for t in plan.feasible_tiers)
    this = plan.tier(tier)
    out = capacity_labels(
        this, cost_ranks(plan).get(tier, len(plan.tiers)), longest=this.max_model_len >= longest
    )
    if any(pool.weight is not None for pool in front.pools):
        for pool in front.pools:
            if tier in pool.tiers or tier in pool.overflow:
                out[POOL_LABEL_PREFIX + pool.tiers[0]] = POOL_MEMBER
    return dict(sorted(out.items()))


def pool_selector(service: InferenceService, pool: Pool) -> dict[str, str]:
    selector = {labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: names.COMPONENT_SERVER}
    if pool.weight is not None:
        selector[POOL_LABEL_PREFIX + pool.tiers[0]] = POOL_MEMBER
    return selector


# --- objects ---------------------------------------------------------------------------


def picker_name(pool: Pool) -> str:
    return names.bounded(f"{pool.name}-epp", names.WORKLOAD_NAME_MAX)


def service_account_name(service: InferenceService) -> str:
    return names.bounded(f"{service.name}-epp")


def route_name(service: InferenceService) -> str:
    return service.name


def _common(service: InferenceService, owner: dict[str, str] | None) -> dict[str, Any]:
    return {"namespace": service.namespace, "owner": owner}


def picker_config(pool: Pool, *, disaggregated: bool = False) -> dict[str, Any]:
    """The EndpointPickerConfig of one pool's picker; `disaggregated`: with the P/D
    profiles of a prefill/decode split (render.pd_objects)."""
    own_weight = OWN_TIER_WEIGHT_SPLIT if pool.weight is not None else OWN_TIER_WEIGHT_SHARED
    plugins: list[dict[str, Any]] = [
        # Filter (hard): no pod whose range the prompt is outside of; scorer: the tightest
        # range that fits first.
        {
            "name": "context-length",
            "type": "context-length-aware",
            "parameters": {"label": LABEL_CONTEXT_LENGTH_RANGE, "enableFiltering": True},
        },
        *({"type": scorer} for scorer, _ in LOAD_SCORER_WEIGHTS),
        {"type": "max-score-picker"},
    ]
    profile: list[dict[str, Any]] = [
        {"pluginRef": "context-length", "weight": own_weight},
        *({"pluginRef": scorer, "weight": weight} for scorer, weight in LOAD_SCORER_WEIGHTS),
        {"pluginRef": "max-score-picker"},
    ]
    profiles = [{"name": "default", "plugins": profile}]
    if disaggregated:
        plugins, profiles = pd_objects.picker_plugins_and_profiles(plugins, profile[:-1])
    return {
        "apiVersion": EPP_CONFIG_API_VERSION,
        "kind": "EndpointPickerConfig",
        "featureGates": ["flowControl"],
        "plugins": plugins,
        "schedulingProfiles": profiles,
        # A pool with no ready pod is saturated: flow control holds its requests (FIFO)
        # until a pod is ready or the TTL, the hold, runs out. The same TTL bounds a wait
        # for busy pods in this router, so those queues are kept short by length instead.
        "flowControl": {"defaultRequestTTL": f"{pool.hold_s}s", "maxRequests": str(pool.queue_limit)},
    }


def _picker_objects(
    service: InferenceService,
    pool: Pool,
    settings: OperatorSettings,
    owner: dict[str, str] | None,
    *,
    disaggregated: bool = False,
) -> list[dict[str, Any]]:
    name = picker_name(pool)
    pool_labels = {
        **names.service_labels(service.name),
        labels.LABEL_COMPONENT: COMPONENT_EPP,
        LABEL_POOL: pool.name,
    }
    selector = {
        labels.LABEL_SERVICE: service.name,
        labels.LABEL_COMPONENT: COMPONENT_EPP,
        LABEL_POOL: pool.name,
    }
    # The configuration travels as an argument (--config-text), not a ConfigMap: the
    # operator never reads or writes ConfigMaps (they can hold what env valueFrom points
    # at), and a new configuration is a new pod template, so the picker restarts with it.
    config_text = yaml.safe_dump(picker_config(pool, disaggregated=disaggregated), sort_keys=False)
    args = [
        "--pool-name",
        pool.name,
        "--pool-namespace",
        service.namespace,
        "--config-text",
        config_text,
        "--grpc-port",
        str(EPP_GRPC_PORT),
        "--grpc-health-port",
        str(EPP_HEALTH_PORT),
        "--metrics-port",
        str(EPP_METRICS_PORT),
        # Prometheus scrapes the queue metric without a token (the PodMonitor has none).
        "--metrics-endpoint-auth=false",
    ]
    deployment = templating.render_json(
        "epp-deployment.json.j2",
        name=name,
        labels=pool_labels,
        selector=selector,
        pod_labels=pool_labels,
        pod_annotations={},
        service_account=service_account_name(service),
        grace_s=EPP_GRACE_S,
        image=settings.epp_image,
        args=args,
        grpc_port=EPP_GRPC_PORT,
        health_port=EPP_HEALTH_PORT,
        metrics_port=EPP_METRICS_PORT,
        resources=EPP_RESOURCES,
        **_common(service, owner),
    )
    if settings.epp_off_gpu_nodes:
        # A CPU pod: a spot GPU node's reclaim would take the pool's only picker with it,
        # and an untainted GPU node would give it room a vLLM replica needs.
        deployment["spec"]["template"]["spec"].update(
            placement.off_gpu_nodes(settings.catalogs()).pod_fields()
        )
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, service, pool_labels, owner),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [
                {
                    # Named as the Inference Extension's chart names them (meshes read the prefix).
                    "name": "grpc-ext-proc",
                    "port": EPP_GRPC_PORT,
                    "targetPort": "grpc",
                    "protocol": "TCP",
                    "appProtocol": "http2",
                },
                {
                    "name": "http-metrics",
                    "port": EPP_METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }
    return [deployment, svc]


def _picker_access(service: InferenceService, owner: dict[str, str] | None) -> list[dict[str, Any]]:
    """The pickers' identity: they watch the pods and read the pool (and the Inference
    Extension's objective and rewrite objects) in this namespace, nothing else."""
    name = service_account_name(service)
    object_labels = {**names.service_labels(service.name), labels.LABEL_COMPONENT: COMPONENT_EPP}
    read = ["get", "list", "watch"]
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(name, service, object_labels, owner),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(name, service, object_labels, owner),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {
                    "apiGroups": ["inference.networking.k8s.io"],
                    "resources": ["inferencepools"],
                    "verbs": read,
                },
                {
                    "apiGroups": ["inference.networking.x-k8s.io"],
                    "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                    "verbs": read,
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(name, service, object_labels, owner),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": service.namespace}],
        },
    ]


def _picker_monitor(service: InferenceService, owner: dict[str, str] | None) -> dict[str, Any]:
    """Prometheus scrapes the pickers: their queue is what wakes a tier from zero."""
    relabel = [
        ("__meta_kubernetes_pod_label_" + prometheus_name(labels.LABEL_SERVICE), labels.SERIES_LABEL_SERVICE),
    ]
    return templating.render_json(
        "podmonitor.json.j2",
        name=names.bounded(f"{service.name}-epp"),
        labels={**names.service_labels(service.name), labels.LABEL_COMPONENT: COMPONENT_EPP},
        selector={labels.LABEL_SERVICE: service.name, labels.LABEL_COMPONENT: COMPONENT_EPP},
        port="metrics",
        interval="5s",
        job=labels.SCRAPE_JOB_PICKER,
        relabel=relabel,
        **_common(service, owner),
    )


def _metadata(
    name: str, service: InferenceService, object_labels: dict[str, str], owner: dict[str, str] | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": service.namespace, "labels": object_labels}
    if owner:
        metadata["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    return metadata


def request_timeout_s(service: InferenceService, front: FrontDoor) -> int:
    """The route's request timeout: the longest hold plus the longest answer."""
    hold = max((pool.hold_s for pool in front.pools), default=0)
    return hold + lifecycle.drain_budget_s(service)


def objects(
    service: InferenceService, front: FrontDoor, settings: OperatorSettings, owner: dict[str, str] | None
) -> list[dict[str, Any]]:
    """Every front-door object of one InferenceService (none in service mode)."""
    if front.mode != "gateway" or not front.pools or front.gateway is None:
        return []
    out: list[dict[str, Any]] = []
    object_labels = names.service_labels(service.name)
    for pool in front.pools:
        external = front.picker
        out.append(
            templating.render_json(
                "inferencepool.json.j2",
                name=pool.name,
                labels={**object_labels, LABEL_POOL: pool.name},
                annotations={
                    f"{labels.GROUP}/tiers": ",".join(pool.tiers),
                    f"{labels.GROUP}/overflow-tiers": ",".join(pool.overflow),
                    f"{labels.GROUP}/hold-seconds": str(pool.hold_s),
                    f"{labels.GROUP}/queue-limit": str(pool.queue_limit),
                },
                selector=pool_selector(service, pool),
                port=HTTP_PORT,
                picker_name=external.name if external else picker_name(pool),
                picker_port=external.port if external else EPP_GRPC_PORT,
                **_common(service, owner),
            )
        )
        if external is None:
            out.extend(_picker_objects(service, pool, settings, owner, disaggregated=front.disaggregated))
    if front.picker is None:
        out.extend(_picker_access(service, owner))
        out.append(_picker_monitor(service, owner))
        if front.disaggregated:
            out.extend(pd_objects.access_objects(service, service_account_name(service), owner))
    parent: dict[str, Any] = {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": front.gateway.name,
    }
    if front.gateway.namespace:
        parent["namespace"] = front.gateway.namespace
    if front.gateway.section_name:
        parent["sectionName"] = front.gateway.section_name
    backends = []
    for pool in front.pools:
        backend: dict[str, Any] = {
            "group": "inference.networking.k8s.io",
            "kind": "InferencePool",
            "name": pool.name,
        }
        if pool.weight is not None:
            backend["weight"] = pool.weight
        backends.append(backend)
    shape = route_shape(service, settings)
    out.append(
        templating.render_json(
            "httproute.json.j2",
            name=route_name(service),
            labels=object_labels,
            parent=parent,
            hostnames=list(shape.hostnames),
            rules=route_rules(shape, backends, f"{request_timeout_s(service, front)}s"),
            **_common(service, owner),
        )
    )
    return out
