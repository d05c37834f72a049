"""Whether the operator runs the prefill/decode split the planner chose (pure).

planner.disaggregation decides whether a split pays and on which two tiers. Running it
takes what the operator renders for it (render.pd_objects), and that works only with:

- the gateway front door and the operator's own endpoint picker: per request, the picker
  chooses a decode pod and, for a prompt with enough uncached tokens, a prefill pod; the
  decode pod's routing sidecar sends the prompt to that prefill pod and vLLM's
  NixlConnector brings its KV cache back. A platform's picker is not the operator's to
  configure, and `service` mode has no picker at all;
- one pool over the service: route weights (`workload.routing`) split requests before
  anyone reads them, and a split request needs both roles behind one picker;
- single-node replicas in both roles: a role spanning nodes needs LeaderWorkerSet's
  DisaggregatedSet, which the operator does not render;
- releases with the NixlConnector: vLLM's connector factory registers it from 0.9 (it is
  in the 0.9.2 source distribution, not in 0.8.5's);
- vLLM's one `--kv-transfer-config` free for it: no connector of the user's in
  extraArgs, no host-memory KV tier (its own connector) on either role.

`resolve` marks the plan's split deployed, or adds the reason it is not (auto stays
colocated); `problems` gives the same blockers as refusals with their field paths for
`mode: on`, which asks for the split and must never be run colocated in silence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from inferfleet import planner
from inferfleet.api import InferenceService, Plan, Problem, TierPlan
from inferfleet.api.plan import DisaggregationPlan
from inferfleet.config import OperatorSettings
from inferfleet.design import images, topology
from inferfleet.planner.disaggregation import MIN_MEAN_PROMPT, decode_tokens_per_s, prefill_tokens_per_s
from inferfleet.planner.releases import Version
from inferfleet.planner.workload import mean_tokens

Role = Literal["prefill", "decode"]
NIXL_SINCE = Version(0, 9, 0)
# The picker splits a request when at least this many of its prompt tokens are cached on
# no decode pod; shorter work is prefilled where it decodes: the crossover the planner
# uses for mean prompts (planner.disaggregation.MIN_MEAN_PROMPT), per request.
SPLIT_MIN_UNCACHED_TOKENS = int(MIN_MEAN_PROMPT)


@dataclass(frozen=True)
class Roles:
    """The two tiers of a deployed split."""

    prefill: str
    decode: str

    def of(self, tier: str) -> Role | None:
        if tier == self.prefill:
            return "prefill"
        if tier == self.decode:
            return "decode"
        return None


def roles(plan: Plan | None) -> Roles | None:
    """The deployed split's tiers; None when every tier serves both phases."""
    split = plan.disaggregation if plan is not None else None
    if split is None or not split.deployed or split.prefill_tier is None or split.decode_tier is None:
        return None
    return Roles(split.prefill_tier, split.decode_tier)


def _front_door_blockers(service: InferenceService, settings: OperatorSettings) -> list[Problem]:
    front = service.spec.front_door
    if topology.mode_of(service, settings) != "gateway":
        return [
            Problem(
                "spec.frontDoor",
                "a prefill/decode split needs the gateway front door (its endpoint picker chooses both "
                "pods of each request); name a Gateway here or set the operator's default "
                "(Helm frontDoor.gateway.name)",
            )
        ]
    if front is not None and front.endpoint_picker is not None:
        return [
            Problem(
                "spec.frontDoor.endpointPicker",
                "a prefill/decode split needs the operator's own endpoint picker, configured for it; "
                f"{front.endpoint_picker.name!r} is the platform's",
            )
        ]
    if service.spec.workload.routing:
        return [
            Problem(
                "spec.workload.routing",
                "a prefill/decode split needs one pool over the service: route weights split requests "
                "before the picker reads them; drop the shares",
            )
        ]
    return []


def _tier_blockers(
    service: InferenceService, settings: OperatorSettings, plan: Plan, tiers: Roles
) -> list[Problem]:
    by_image = images.tier_images(service, settings)
    out = []
    for index, tier in enumerate(service.spec.tiers):
        role = tiers.of(tier.name)
        if role is None:
            continue
        tier_plan = plan.tier(tier.name)
        if tier_plan.nodes_per_replica > 1:
            out.append(
                Problem(
                    f"spec.tiers[{index}]",
                    f"a {role} replica of {tier.name} spans {tier_plan.nodes_per_replica} nodes; a role "
                    "spanning nodes (LeaderWorkerSet's DisaggregatedSet) is not rendered: restrict "
                    f"serving.disaggregation.{role}Tiers to single-node tiers",
                )
            )
        release = planner.tier_release(service.spec, tier, settings.vllm_image, by_image)
        if release.version is None or release.version < NIXL_SINCE:
            which = "an unknown vLLM release" if release.version is None else f"vLLM {release.version}"
            out.append(
                Problem(
                    f"spec.tiers[{index}].image",
                    f"{tier.name} runs {which} ({release.source}); the KV transfer needs the NixlConnector "
                    f"(vLLM {NIXL_SINCE.major}.{NIXL_SINCE.minor} on): name a newer image, or the release "
                    "with serving.vllmVersion",
                )
            )
    return out


def _connector_blockers(service: InferenceService, plan: Plan, tiers: Roles) -> list[Problem]:
    """vLLM takes one --kv-transfer-config: the split's NixlConnector cannot share it with a
    connector of the user's or with the host-memory KV tier (its OffloadingConnector)."""
    serving = service.spec.serving
    extra = (serving.extra_args if serving is not None else None) or []
    out = []
    if any(arg == "--kv-transfer-config" or arg.startswith("--kv-transfer-config=") for arg in extra):
        out.append(
            Problem(
                "spec.serving.extraArgs",
                "--kv-transfer-config is the split's (NixlConnector moves the KV cache between the "
                "roles); drop it, or set serving.disaggregation.mode off to run your own connector",
            )
        )
    offloading = [name for name in (tiers.prefill, tiers.decode) if plan.tier(name).host_kv_cache_gi_b > 0]
    if offloading:
        out.append(
            Problem(
                "spec.serving.hostKvCache",
                f"{' and '.join(offloading)} would keep a KV tier in host memory, whose connector cannot "
                "run beside the split's NixlConnector: set hostKvCache.mode off for a split",
            )
        )
    return out


def blockers(service: InferenceService, settings: OperatorSettings, plan: Plan) -> list[Problem]:
    """What stops the operator from running the split the plan chose (none without one)."""
    split = plan.disaggregation
    if split is None or not split.enabled or split.prefill_tier is None or split.decode_tier is None:
        return []
    return [
        *_front_door_blockers(service, settings),
        *_tier_blockers(service, settings, plan, Roles(split.prefill_tier, split.decode_tier)),
        *_connector_blockers(service, plan, Roles(split.prefill_tier, split.decode_tier)),
    ]


def resolve(service: InferenceService, settings: OperatorSettings, plan: Plan) -> Plan:
    """The plan with its split marked deployed, or with the reason it is not."""
    split = plan.disaggregation
    if split is None or not split.enabled:
        return plan
    stopped = blockers(service, settings, plan)
    if stopped:
        why = f"not deployed, every tier serves both phases: {stopped[0].message} ({stopped[0].path})"
        updated = split.model_copy(update={"deployed": False, "reasons": [*split.reasons, why]})
        return plan.model_copy(update={"disaggregation": updated})
    done = (
        f"deployed: {split.prefill_tier} pods prefill (llm-d.ai/role=prefill), {split.decode_tier} pods "
        "decode behind the routing sidecar (llm-d.ai/role=decode); the picker sends a prompt with at "
        f"least {SPLIT_MIN_UNCACHED_TOKENS} uncached tokens to both, a shorter one to a decode pod alone"
    )
    updated = split.model_copy(update={"deployed": True, "reasons": [*split.reasons, done]})
    tiers = [_in_role(service, tier, split) for tier in plan.tiers]
    return plan.model_copy(update={"disaggregation": updated, "tiers": tiers})


def _in_role(service: InferenceService, tier: TierPlan, split: DisaggregationPlan) -> TierPlan:
    """A role's tier as the autoscaler and the simulator size it: requests per second one
    replica prefills (its prefill rate over the mean prompt) or decodes (its rate within
    the ITL SLO over the mean output), and the replicas the split's pool needs."""
    workload = service.spec.workload
    mean_in = mean_tokens(workload.input_tokens.p50, workload.input_tokens.p95)
    mean_out = mean_tokens(workload.output_tokens.p50, workload.output_tokens.p95)
    if tier.name == split.prefill_tier:
        rps = prefill_tokens_per_s(tier) / mean_in if mean_in > 0 else 0.0
        role, replicas, what = (
            "prefill",
            split.prefill_replicas,
            f"prefills {mean_in:,.0f}-token mean prompts",
        )
    elif tier.name == split.decode_tier:
        rate = decode_tokens_per_s(tier, workload.slo.itl_p99_ms, mean_in + mean_out / 2)
        rps = rate / mean_out if mean_out > 0 else 0.0
        role, replicas, what = "decode", split.decode_replicas, f"decodes {mean_out:,.0f}-token mean outputs"
    else:
        return tier
    reason = (
        f"{role} pool of the prefill/decode split: a replica {what} at ~{rps:.2f} req/s "
        f"(colocated it served ~{tier.usable_rps:.2f}); {replicas} replica(s) for the peak"
    )
    return tier.model_copy(
        update={
            "usable_rps": round(rps, 3),
            "replicas_for_peak": replicas,
            "reasons": [*tier.reasons, reason],
        }
    )


def problems(service: InferenceService, settings: OperatorSettings, plan: Plan | None) -> list[Problem]:
    """`mode: on` refused where the split cannot run: no pair of tiers, or a blocker."""
    serving = service.spec.serving
    wanted = serving.disaggregation if serving is not None else None
    if wanted is None or wanted.mode != "on" or plan is None or plan.disaggregation is None:
        return []
    split = plan.disaggregation
    if not split.enabled:
        reason = split.reasons[0] if split.reasons else "no pair of tiers"
        return [Problem("spec.serving.disaggregation.mode", f"on, but there is no split to run: {reason}")]
    return blockers(service, settings, plan)
