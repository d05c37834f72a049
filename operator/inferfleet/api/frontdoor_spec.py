"""`spec.frontDoor`: how clients reach the service's tiers through one endpoint.

The front door is a Gateway API `HTTPRoute` to an `InferencePool`
(`inference.networking.k8s.io/v1`) whose endpoint picker (EPP) chooses a pod per
request, and holds requests while no pod is ready. `mode: service` keeps only the
plain Kubernetes Services (no route, no pool, no hold); a spec in that mode cannot
scale a tier to zero, because nothing would hold the first request.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from inferfleet.api.base import ApiModel, cel, schema_extra

FrontDoorMode = Literal["gateway", "service"]

# Gateway API names: DNS subdomains (gateway.networking.k8s.io ObjectName), namespaces and
# listener section names are DNS labels.
GatewayName = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]
DnsLabelName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]

# Shortest and longest hold a spec may ask for: below a minute no replica can start.
HOLD_MIN_S = 30
HOLD_MAX_S = 3600

SERVICE_MODE_GATEWAY_MESSAGE = (
    "frontDoor.mode service renders no route: drop frontDoor.gateway or use mode gateway"
)


class GatewayRef(ApiModel):
    """The Gateway (gateway.networking.k8s.io/v1) the service's HTTPRoute attaches to."""

    name: GatewayName = Field(description="Name of the Gateway.")
    namespace: DnsLabelName | None = Field(
        default=None,
        description="Namespace of the Gateway; empty means the InferenceService's own. A Gateway in "
        "another namespace must be the operator's default Gateway or one its settings allow "
        "(frontDoor.allowedGateways), and must allow routes from this one "
        "(listeners[].allowedRoutes.namespaces).",
    )
    section_name: DnsLabelName | None = Field(
        default=None, description="Listener of the Gateway to attach to; empty means every listener."
    )


class EndpointPickerRef(ApiModel):
    """An endpoint picker the platform team runs: a Service speaking Envoy ext-proc."""

    name: GatewayName = Field(description="Name of the endpoint picker's Service, in this namespace.")
    port: int = Field(default=9002, ge=1, le=65535, description="Its ext-proc (gRPC) port.")
    holds_requests: bool = Field(
        default=False,
        description="Its flow control holds requests while the pool has no ready endpoint. Required "
        "for scale to zero: the operator cannot see another picker's configuration.",
    )


class FrontDoorSpec(ApiModel):
    """One endpoint for every tier: an HTTPRoute to an InferencePool and its endpoint picker."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": schema_extra(
            cel(
                "!has(self.mode) || self.mode != 'service' || !has(self.gateway)",
                SERVICE_MODE_GATEWAY_MESSAGE,
                ".gateway",
            ),
        )
    }

    mode: FrontDoorMode | None = Field(
        default=None,
        description="gateway: HTTPRoute + InferencePool + endpoint picker (holds requests while a "
        "tier wakes from zero). service: only the Kubernetes Services. Empty means gateway when a "
        "Gateway is named here or in the operator's settings, else service.",
    )
    gateway: GatewayRef | None = Field(
        default=None, description="Gateway to attach to; empty means the operator's default Gateway."
    )
    endpoint_picker: EndpointPickerRef | None = Field(
        default=None,
        description="Use an endpoint picker the platform team runs instead of the one the operator "
        "renders per pool.",
    )
    hold_seconds: int | None = Field(
        default=None,
        ge=HOLD_MIN_S,
        le=HOLD_MAX_S,
        description="How long the endpoint picker holds a request while no pod can take it; empty "
        "means the slowest tier's cold start plus the operator's cold-start margin.",
    )

    @model_validator(mode="after")
    def _service_mode_has_no_gateway(self) -> FrontDoorSpec:
        if self.mode == "service" and self.gateway is not None:
            raise ValueError(SERVICE_MODE_GATEWAY_MESSAGE)
        return self


# --- the operator's front-door settings (config.OperatorSettings validates them) --------

# How each service's HTTPRoute tells its requests from every other service's on a shared
# Gateway: a path prefix of its own (the default), a hostname of its own, or the model
# name a client sends (a header set by a body-based router).
RouteMatch = Literal["path", "hostname", "model"]
HOSTNAME_PLACEHOLDERS = ("{name}", "{namespace}")
# RFC 1123 hostname as the Gateway API spells one (lowercase, no wildcard: a wildcard
# would cover other services' hostnames too).
HOSTNAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
HOSTNAME_MAX_CHARS = 253
LABEL_MAX_CHARS = 63
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def hostname_template_problem(template: str) -> str | None:
    """Why a hostname template cannot give every service a hostname of its own, or None.

    `{name}` and `{namespace}` must each be one whole label: "{name}-{namespace}" would
    give `a-b` in `c` and `a` in `b-c` the same hostname, and a template without
    `{namespace}` gives same-named services of two teams one hostname."""
    labels_ = template.split(".")
    for placeholder in HOSTNAME_PLACEHOLDERS:
        if labels_.count(placeholder) != 1:
            return (
                f"must hold {placeholder} exactly once, as a whole label "
                "(e.g. {name}.{namespace}.llm.example.com)"
            )
    for label in labels_:
        if label in HOSTNAME_PLACEHOLDERS:
            continue
        if "{" in label or "}" in label:
            return f"label {label!r}: only {{name}} and {{namespace}} may be used, each as a whole label"
        if len(label) > LABEL_MAX_CHARS or _LABEL.match(label) is None:
            return f"label {label!r} is not an RFC 1123 label (lowercase letters, digits and '-', at most 63)"
    if len(labels_) < 3:
        return "needs at least one fixed label beside {name} and {namespace} (a domain the Gateway serves)"
    return None


def render_hostname(template: str, namespace: str, name: str) -> str:
    return template.replace("{namespace}", namespace).replace("{name}", name)


def hostname_problem(hostname: str) -> str | None:
    """Why a rendered hostname is not an RFC 1123 hostname the Gateway API accepts, or None."""
    if len(hostname) > HOSTNAME_MAX_CHARS:
        return f"{hostname!r} is longer than {HOSTNAME_MAX_CHARS} characters"
    if re.fullmatch(HOSTNAME_PATTERN, hostname) is None or any(
        len(label) > LABEL_MAX_CHARS for label in hostname.split(".")
    ):
        return f"{hostname!r} is not an RFC 1123 hostname"
    return None


def allowed_gateway_problem(entry: str) -> str | None:
    """Why an allowed-Gateway entry is not `namespace/name` or `namespace/*`, or None."""
    namespace, slash, name = entry.partition("/")
    if not slash or _LABEL.match(namespace) is None or len(namespace) > LABEL_MAX_CHARS:
        return f"{entry!r}: expected namespace/name or namespace/* (namespace a DNS label)"
    if name != "*" and (_NAME.match(name) is None or len(name) > HOSTNAME_MAX_CHARS):
        return f"{entry!r}: the Gateway name must be a DNS subdomain or *"
    return None


def gateway_allowed(allowed: tuple[str, ...], namespace: str, name: str) -> bool:
    """Whether `namespace/name` is in the allowed list (entries `ns/name` or `ns/*`)."""
    return f"{namespace}/{name}" in allowed or f"{namespace}/*" in allowed
