"""`spec.frontDoor`: how clients reach the service's tiers through one endpoint.

The front door is a Gateway API `HTTPRoute` to an `InferencePool`
(`inference.networking.k8s.io/v1`) whose endpoint picker (EPP) chooses a pod per
request, and holds requests while no pod is ready. `mode: service` keeps only the
plain Kubernetes Services (no route, no pool, no hold); a spec in that mode cannot
scale a tier to zero, because nothing would hold the first request.
"""

from __future__ import annotations

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
        "another namespace must allow routes from this one (listeners[].allowedRoutes.namespaces).",
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
