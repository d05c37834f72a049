"""Operator-wide settings: the SRE's surface (Helm values → environment variables).

Every field has a default and a description; `OperatorSettings.from_env()` validates
at startup so a bad value fails fast with the variable's name instead of surfacing as
odd behaviour later. Per-InferenceService `spec.scaling` fields override the scaling
defaults here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from inferfleet.api import frontdoor_spec as front_door_api
from inferfleet.api import host_paths
from inferfleet.catalog import Catalogs, default_catalogs
from inferfleet.planner.releases import DEFAULT_VLLM_IMAGE

ENV_PREFIX = "INFERFLEET_"
# Settings read from one comma-separated variable.
_LIST_FIELDS = frozenset({"namespaces", "amd_supplemental_groups", "allowed_gateways"})


class SettingsInvalid(ValueError):
    """An operator setting from the environment is invalid."""


class OperatorSettings(BaseModel):
    """Settings read once at startup; field `x` comes from `INFERFLEET_X`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Where the operator works.
    namespaces: tuple[str, ...] = Field(
        default=(), description="Namespaces to watch (comma-separated); empty means all namespaces."
    )
    log_format: Literal["json", "text"] = Field(default="json", description="Operator log format.")
    liveness_port: int = Field(default=8080, ge=1, le=65535, description="kopf liveness/health port.")
    metrics_port: int = Field(default=9090, ge=1, le=65535, description="Operator's own /metrics port.")
    webhook_port: int = Field(default=9443, ge=1, le=65535, description="Validating webhook port.")

    # Prometheus.
    prometheus_url: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090",
        description="Prometheus base URL the autoscaler queries.",
    )
    prometheus_bearer_token_file: str | None = Field(
        default=None, description="File holding a bearer token for Prometheus (mounted secret)."
    )
    prometheus_timeout_s: float = Field(default=5.0, gt=0, le=120, description="Per-query timeout.")

    # Scaling defaults (spec.scaling overrides each).
    scaling_mode: Literal["active", "advisory"] = Field(
        default="active",
        description="active sets replica counts; advisory only records its decisions in status and events.",
    )
    sync_period_s: int = Field(default=15, ge=5, le=3600, description="Autoscaler loop period.")
    scale_up_stabilization_s: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Scale-up stabilization window (scale-ups apply at once, paced by cooldown and step).",
    )
    scale_down_stabilization_s: int = Field(
        default=300, ge=0, le=86_400, description="Scale down only to the highest target of this window."
    )
    scale_down_max_replicas_per_step: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="Replicas one scale-down step may remove (or the share below).",
    )
    # A quarter of the fleet per step (or one replica, whichever is more): a big fleet
    # sheds a spent peak in minutes, a small one still one replica at a time.
    scale_down_max_percent_per_step: int = Field(
        default=25,
        ge=1,
        le=100,
        description="Share of the fleet one scale-down step may remove when more than the replicas above.",
    )
    scale_up_cooldown_s: int = Field(
        default=0, ge=0, le=86_400, description="Least time between two scale-ups of a tier."
    )
    scale_down_cooldown_s: int = Field(
        default=120,
        ge=0,
        le=86_400,
        description="Least time after the last scale change before a scale-down.",
    )
    headroom: float = Field(
        default=0.2,
        ge=0,
        le=5,
        description=(
            "Capacity above forecast demand: the starting point the measured forecast error "
            "replaces (headroomMode measured), or the share itself (fixed)."
        ),
    )
    headroom_mode: Literal["measured", "fixed"] = Field(
        default="measured",
        description="measured: headroom follows the forecaster's measured error; fixed: the headroom value.",
    )
    queue_depth_per_replica: float = Field(
        default=4.0, gt=0, le=100_000, description="Waiting requests per replica that trigger scale-up."
    )
    replan: Literal["advise", "auto"] = Field(
        default="advise",
        description=(
            "On WorkloadDrift: advise only reports the plan the observed workload implies; auto "
            "re-plans for it (pods roll with the new vLLM flags)."
        ),
    )
    # None (unset) is not `ttft`: it means every SLO the spec declares, and a spec's SLO
    # always has an ITL (workload.slo.itlP99Ms, 100 ms unless written), so ttftAndItl.
    capacity_slos: Literal["ttft", "ttftAndItl"] | None = Field(
        default=None,
        description=(
            "The SLOs a replica's learned capacity keeps. Unset: every SLO the spec declares "
            "(its workload.slo has an ITL, so ttftAndItl); ttft fills replicas as far as the "
            "time to first token allows; ttftAndItl also keeps decode steps within the ITL SLO."
        ),
    )
    predictive_enabled: bool = Field(default=True, description="Scale ahead of the forecast demand.")
    forecast_window_hours: float = Field(default=336.0, gt=0, le=24 * 56, description="History read.")
    cold_start_margin_s: float = Field(default=60.0, ge=0, le=3600, description="Added to lead time.")
    interruption_hold_min: int = Field(
        default=30,
        ge=0,
        le=24 * 60,
        description=(
            "Minutes the forecaster keeps the level from before traffic that stops dead "
            "(it tends to come back all at once); 0 treats silence as demand gone."
        ),
    )

    # Least privilege (issue 14): what needs RBAC beyond the operator's own objects.
    pod_deletion_cost: bool = Field(
        default=False,
        description=(
            "Annotate pods with controller.kubernetes.io/pod-deletion-cost before a scale-down "
            "so idle replicas go first; needs `patch pods` in every watched namespace."
        ),
    )
    cluster_scanning: bool = Field(
        default=True,
        description=(
            "Let kopf watch CRDs and namespaces cluster-wide; off for namespace-only installs "
            "(no ClusterRole): CRDs added later are noticed at the next restart."
        ),
    )

    # Serving and cache defaults.
    vllm_image: str = Field(
        default=DEFAULT_VLLM_IMAGE,
        min_length=1,
        description="Default vLLM image for NVIDIA GPUs (the CUDA build).",
    )
    # AMD's validated ROCm build of vLLM 0.11 (rocm.docs.amd.com, "vLLM inference
    # performance testing version history": rocm/vllm:rocm7.0.0_vllm_0.11.1_20251024 is
    # ROCm 7.0.0, vLLM 0.11.1, PyTorch 2.9). The CUDA image cannot drive an AMD GPU.
    vllm_image_amd: str = Field(
        default="rocm/vllm:rocm7.0.0_vllm_0.11.1_20251024",
        min_length=1,
        description="Default vLLM image for AMD GPUs (the ROCm build).",
    )
    # /dev/kfd and /dev/dri/renderD* are root:render 0660 and /dev/dri/card* root:video:
    # a non-root process needs those groups (ROCm docs run containers with --group-add
    # video and render). Kubernetes wants numeric GIDs: video is 44 on Debian/Ubuntu hosts,
    # render is created by amdgpu-install with a host-specific GID, commonly 109 (AMD's own
    # ROCm images add render as 109: ROCm/ROCm-docker#90 and #93). Check `getent group
    # render video` on the GPU nodes and set these to match.
    amd_supplemental_groups: tuple[int, ...] = Field(
        default=(44, 109),
        description="GIDs added to non-root vLLM pods on AMD GPUs (video, render on the host).",
    )
    operator_image: str = Field(
        default="ghcr.io/inferfleet/inferfleet:0.1.0",
        min_length=1,
        description="The operator image; also runs the weight pre-cache and config.json probe pods.",
    )

    # Front door (spec.frontDoor overrides the Gateway). The endpoint picker is llm-d's
    # router: the Gateway API Inference Extension's EPP plus llm-d's plugins, of which the
    # front door needs `context-length-aware` (no request reaches a tier whose
    # max-model-len it exceeds) and flow control (holds requests while a pool is empty).
    gateway_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        max_length=253,
        description="Gateway every InferenceService's HTTPRoute attaches to unless its spec names "
        "one; unset means no route (plain Services) unless the spec names a Gateway.",
    )
    gateway_namespace: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="Namespace of that Gateway; unset means each InferenceService's own.",
    )
    # Tenancy (issue 27): on a shared Gateway each service's route has a match of its own,
    # and a spec names a Gateway in another namespace only where the platform allows it.
    front_door_match: front_door_api.RouteMatch = Field(
        default="path",
        description=(
            "What tells one service's requests from another's on a shared Gateway: path (prefix "
            "/<namespace>/<name>, rewritten to /), hostname (front_door_hostname), or model (the "
            "X-Gateway-Model-Name header a body-based router sets from the request's model)."
        ),
    )
    front_door_hostname: str | None = Field(
        default=None,
        max_length=front_door_api.HOSTNAME_MAX_CHARS,
        description="Hostname template for front_door_match hostname, with {name} and {namespace} "
        "each as a whole label (e.g. {name}.{namespace}.llm.example.com).",
    )
    allowed_gateways: tuple[str, ...] = Field(
        default=(),
        description="Gateways in other namespaces a spec may name (namespace/name or namespace/*, "
        "comma-separated); the default Gateway and any in the service's own namespace always are.",
    )
    epp_image: str = Field(
        default="ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0",
        min_length=1,
        description="Endpoint picker image the operator runs per InferencePool (llm-d's router).",
    )
    pd_sidecar_image: str = Field(
        default="ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
        min_length=1,
        description="Routing sidecar the decode pods of a prefill/decode split run (llm-d's): it "
        "sends a request's prompt to the prefill pod the picker chose, then decodes locally.",
    )
    epp_off_gpu_nodes: bool = Field(
        default=True,
        description="Endpoint pickers require a node without any GPU label the operator knows "
        "(catalog.placement.GPU_NODE_LABELS and the catalog's); false for a cluster of GPU nodes only.",
    )
    cache_node_path: str = Field(
        default="/mnt/nvme/inferfleet",
        pattern=r"^/",
        description="Node-local weight cache directory (under cache_allowed_root).",
    )
    cache_allowed_root: str | None = Field(
        default=None,
        pattern=r"^/",
        description="Every node-local cache path (cache_node_path and each spec.cache.nodePath) must "
        "lie under this root; empty means cache_node_path itself. System directories can never be it.",
    )
    cache_budget_gib: float = Field(
        default=500.0,
        gt=0,
        description="Per-node cache budget of each namespace's tree (GiB); also the most a "
        "spec.cache.eviction.budgetGiB may ask for.",
    )
    cache_volumes: Literal["operator", "preProvisioned"] = Field(
        default="operator",
        description="Who creates each namespace's node-cache PersistentVolume and claim: the operator "
        "(needs the ClusterRole's persistentvolumes grant), or a cluster admin (`inferfleet cache "
        "volumes`; what a namespace-only install uses).",
    )
    catalog_file: str | None = Field(
        default=None, description="YAML file with extra GPUs for the hardware catalog."
    )
    host_kv_cache: Literal["off", "auto", "on"] = Field(
        default="off",
        description=(
            "A KV-cache tier in the serving pods' host memory (vLLM's CPU offloading) for specs "
            "that do not choose: off; auto where the planner finds it pays; on wherever the "
            "tier's vLLM release has it. spec.serving.hostKvCache.mode overrides."
        ),
    )
    fetch_model_config: bool = Field(
        default=True,
        description=(
            "Read config.json and the parameter count of a model the catalog lacks from the source "
            "its spec names, in a probe Job in its namespace with spec.model.credentialsSecretRef "
            "mounted, instead of requiring it inline."
        ),
    )
    model_probe_deadline_s: int = Field(
        default=60,
        ge=5,
        le=1800,
        description=(
            "Total deadline of the probe Job that reads such a model's config.json in its own "
            "namespace (its pod gets 120 s more to be scheduled and start)."
        ),
    )

    # vLLM pod security. The official vLLM image runs as root unless told otherwise; it
    # also runs fine as any UID once HOME and the caches point at writable volumes, which
    # the renderer provides, so generated pods run as this non-root UID by default.
    vllm_run_as_user: int = Field(
        default=10001,
        ge=10000,
        le=2**31 - 1,
        description=("UID (and GID, fsGroup) vLLM pods run as; >= 10000 so it never matches a host account."),
    )
    vllm_run_as_root: bool = Field(
        default=False,
        description=(
            "Run vLLM pods as the image's own user (root for the official image). Only for "
            "custom images that cannot run as an arbitrary UID; never privileged either way."
        ),
    )

    @field_validator("amd_supplemental_groups")
    @classmethod
    def _gids(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if len(value) > 16 or any(gid < 1 or gid > 2**31 - 1 for gid in value):
            raise ValueError("at most 16 group ids, each between 1 and 2147483647")
        return value

    @model_validator(mode="after")
    def _front_door(self) -> OperatorSettings:
        template = self.front_door_hostname
        problem = front_door_api.hostname_template_problem(template) if template is not None else None
        if problem is not None:
            raise ValueError(f"{ENV_PREFIX}FRONT_DOOR_HOSTNAME {template!r}: {problem}")
        if self.front_door_match == "hostname" and template is None:
            raise ValueError(
                f"{ENV_PREFIX}FRONT_DOOR_MATCH hostname needs {ENV_PREFIX}FRONT_DOOR_HOSTNAME "
                "(e.g. {name}.{namespace}.llm.example.com)"
            )
        for entry in self.allowed_gateways:
            problem = front_door_api.allowed_gateway_problem(entry)
            if problem is not None:
                raise ValueError(f"{ENV_PREFIX}ALLOWED_GATEWAYS {problem}")
        return self

    @model_validator(mode="after")
    def _cache_paths(self) -> OperatorSettings:
        for name, path in (
            ("cache_allowed_root", self.cache_allowed_root),
            ("cache_node_path", self.cache_node_path),
        ):
            reason = host_paths.unsafe_reason(path) if path is not None else None
            if reason is not None:
                raise ValueError(f"{ENV_PREFIX}{name.upper()} {path!r}: {reason}")
        if not host_paths.is_under(self.cache_node_path, self.cache_root):
            raise ValueError(
                f"{ENV_PREFIX}CACHE_NODE_PATH {self.cache_node_path!r} must lie under "
                f"{ENV_PREFIX}CACHE_ALLOWED_ROOT {self.cache_root!r}"
            )
        return self

    @property
    def cache_root(self) -> str:
        """The root every node cache path must lie under (cache_node_path when unset)."""
        return self.cache_allowed_root or self.cache_node_path

    def catalogs(self) -> Catalogs:
        """The catalogs the planner and the renderer share: built-in plus `catalog_file`."""
        return _catalogs(self.catalog_file)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        """Read `INFERFLEET_*` variables; raise SettingsInvalid naming the variable."""
        source = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = source.get(ENV_PREFIX + name.upper())
            if raw is None or raw == "":
                continue
            if name in _LIST_FIELDS:
                values[name] = tuple(part.strip() for part in raw.split(",") if part.strip())
            else:
                values[name] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            details = "; ".join(
                (f"{ENV_PREFIX}{str(detail['loc'][0]).upper()}: " if detail["loc"] else "")
                + str(detail["msg"]).removeprefix("Value error, ")
                for detail in error.errors(include_url=False)
            )
            raise SettingsInvalid(f"invalid operator settings: {details}") from None


@functools.lru_cache(maxsize=8)
def _catalogs(catalog_file: str | None) -> Catalogs:
    # Read once per path: settings are fixed for the life of the process, and the render
    # of every pass must not reopen the file.
    catalogs = default_catalogs()
    return catalogs.with_gpu_file(catalog_file) if catalog_file else catalogs
