"""`design(service, settings, observed) -> Design`: what the operator will do with a spec,
derived once (pure).

Every consumer asks this one function: the reconciler (what to render and report), the
validating webhook and `inferfleet validate` (whether to admit it), `inferfleet plan`
and `render`, the simulator (what to replay) and the autoscaler (its policy and the
front door it wakes). None of them assembles a plan, a front door or a policy itself,
so what `inferfleet simulate` replays under the operator's settings is what the
operator deploys.

The steps, in order:

1. the workload to plan for (design.replan): the declared one, or with
   `replan: auto` the one the engines reported once it drifted;
2. per tier, the vLLM image (design.images), the release it runs and its GPU record;
3. the plan (planner.plan_tier per tier, with that release and the model as read; the
   prefill/decode split where the spec asks, and whether it runs: design.pd_split),
   or the plan the cluster shows deployed when the caller is the autoscaler;
4. the verdict (design.checks): what refuses the spec, what waits for the model's
   architecture;
5. which nodes hold each tier's compile cache (caching.precache.compile_cache, from the
   pods observed and the evidence status kept), the plan as reported (measured KV
   capacity and cold starts folded in, per case; the warm-cache start where every
   eligible node has the cache), the front door's topology (design.topology; holds from
   the cold start of the case in force, lengthened by measured ones) and the scaling
   policy (design.policy_config).

`Observations` is what the cluster showed, as data: design() reads nothing itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from inferfleet import planner
from inferfleet.api import InferenceService, Plan, Problem, SpecInvalid, TierPlan, TierSpec, labels
from inferfleet.caching.precache import compile_cache
from inferfleet.caching.precache import workloads as cache_objects
from inferfleet.catalog.gpus import GpuSpec
from inferfleet.config import OperatorSettings
from inferfleet.design import checks, images, pd_split, replan, topology
from inferfleet.design.policy_config import PolicyConfig, replan_mode, resolve_policy
from inferfleet.planner.releases import Release


@dataclass(frozen=True)
class ModelReading:
    """The model's config.json as read for a spec whose model the catalog lacks: by a probe
    Job in the operator (reconcile.modelprobe), from the user's machine in the CLI.
    `pending`: a read is due and has not answered (or failed): the architecture, and with
    it which tiers are feasible, is unknown."""

    fetched: planner.FetchedModel | None = None
    problem: str | None = None
    pending: bool = False


NOT_READ = ModelReading()


@dataclass(frozen=True)
class Observations:
    """What the cluster (or the caller) showed; design() reads nothing else.

    `status`/`generation`/`now`: the service's status as read (replan keeps its
    plannedWorkload), its metadata.generation, one instant for the pass (RFC 3339).
    `deployed_plan`: the plan status says is deployed; the autoscaler designs on it (it
    scales what runs), everyone else on a plan of the spec."""

    status: Mapping[str, Any] = field(default_factory=dict)
    generation: int | None = None
    now: str = ""
    model: ModelReading = NOT_READ
    cold_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    kv_capacity: Mapping[str, planner.MeasuredKvCapacity] = field(default_factory=dict)
    deployed_plan: Plan | None = None
    # Starts that restored their node's compile cache (cold_starts: the ones that compiled).
    warm_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    # Which nodes hold each tier's compile cache (caching.precache.compile_cache.observe):
    # the pre-cache pods (current revision), the serving pods, and per tier the eligible
    # nodes the pre-cache DaemonSet counted (absent while it has not counted them).
    cache_pods: Sequence[Mapping[str, Any]] = ()
    serving_pods: Sequence[Mapping[str, Any]] = ()
    eligible_nodes: Mapping[str, int] = field(default_factory=dict)


NOTHING_OBSERVED = Observations()


@dataclass(frozen=True)
class TierDesign:
    """One tier as designed: its spec, the image it runs and that image's release, its GPU
    record (None for a GPU no catalog has) and its plan (None when nothing was planned)."""

    spec: TierSpec
    image: str | None
    release: Release
    gpu: GpuSpec | None
    plan: TierPlan | None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class PlanFailure:
    """The planner refused or failed on the spec: `message` in the reconciler's words
    (Planned=False), `problems` in the webhook's (each with its field path); `error` is
    kept for the shell to log a bug's traceback."""

    kind: Literal["invalid", "rejected", "internal"]
    message: str
    problems: tuple[Problem, ...]
    error: Exception


def internal_error_message(stage: str, error: Exception) -> str:
    """Words for an exception the pure core raised on a spec: a value validation let
    through, or a bug. The shell logs its traceback; the user gets this condition."""
    return (
        f"the operator could not {stage} this spec ({type(error).__name__}: {error}); running workloads "
        "are kept as they are. Check the values the message names; if they look sane, report it as a bug"
    )[:1024]


@dataclass(frozen=True)
class Design:
    """Every decision about one InferenceService (see the module docstring)."""

    service: InferenceService  # as planned: replan's workload in place of the declared one
    settings: OperatorSettings
    planned_for: dict[str, Any] | None  # status.plannedWorkload to write; None: declared
    tiers: tuple[TierDesign, ...]
    plan: Plan | None  # the estimates the pods are rendered from; None: the planner failed
    plan_failure: PlanFailure | None
    model: ModelReading
    # Why the operator will not deploy it (checks.refusals on the plan, or on no plan while
    # the model's architecture is pending), and what only the probe's answer can refuse.
    refusals: tuple[Problem, ...]
    deferred: tuple[Problem, ...]
    # What refuses the spec whatever its tiers' plans (checks.refusals without a plan):
    # the webhook's first answer, given before the plan is looked at.
    spec_refusals: tuple[Problem, ...]
    awaiting_source: str | None  # where a probe reads config.json, while it is due
    reported_plan: Plan | None  # the plan with the measurements folded in, for status
    front_door: topology.FrontDoor | None
    policy: PolicyConfig
    measured_cold_starts: Mapping[str, planner.MeasuredColdStart] = field(default_factory=dict)
    # Per tier whose node cache keeps compile caches: its key and the nodes that have it.
    compile_caches: Mapping[str, compile_cache.TierCompileState] = field(default_factory=dict)

    @property
    def deployable_plan(self) -> Plan | None:
        """The plan to render: none when the planner failed or the spec is refused."""
        return None if self.plan_failure is not None or self.refusals else self.plan

    @property
    def invalid(self) -> str | None:
        """Why nothing may be rendered, in words (the reconciler's InvalidSpec message)."""
        if self.plan_failure is not None:
            return self.plan_failure.message
        if self.refusals:
            return str(SpecInvalid(list(self.refusals), self.source))
        return None

    @property
    def source(self) -> str:
        return f"{self.service.namespace}/{self.service.name}"

    def tier(self, name: str) -> TierDesign | None:
        return next((tier for tier in self.tiers if tier.name == name), None)

    @property
    def tier_images(self) -> dict[str, str]:
        """The image each tier runs (tiers whose vendor has no default are left out)."""
        return {tier.name: tier.image for tier in self.tiers if tier.image is not None}

    @property
    def measured_cold_start_s(self) -> dict[str, float]:
        """Per tier, the start-to-Ready the cluster measured (the front door's holds)."""
        return _seconds(self.measured_cold_starts)


def design(
    service: InferenceService, settings: OperatorSettings, observed: Observations = NOTHING_OBSERVED
) -> Design:
    """Every decision about `service` under `settings`, given what was `observed`."""
    service, planned_for = _workload(service, settings, observed)
    tiers = _tiers(service, settings)
    plan, failure = _plan(service, settings, observed, tiers)
    if plan is not None:
        by_name = {tier_plan.name: tier_plan for tier_plan in plan.tiers}
        tiers = tuple(TierDesign(t.spec, t.image, t.release, t.gpu, by_name.get(t.name)) for t in tiers)
    refused, deferred, awaiting = _verdict(service, settings, observed.model, plan, failure)
    spec_refused = tuple(checks.refusals(service, settings, None))
    compiled = _compile_caches(service, tiers, observed)
    warm = {name: state.eligible for name, state in compiled.items() if state.warm}
    reported = _reported(service, plan, observed, warm)
    front = (
        topology.resolve(service, plan, settings, *_hold_figures(plan, observed, warm))
        if plan is not None
        else None
    )
    return Design(
        service=service,
        settings=settings,
        planned_for=planned_for,
        tiers=tiers,
        plan=plan,
        plan_failure=failure,
        model=observed.model,
        refusals=refused,
        deferred=deferred,
        spec_refusals=spec_refused,
        awaiting_source=awaiting,
        reported_plan=reported,
        front_door=front,
        policy=_policy(settings, service, plan),
        measured_cold_starts=dict(observed.cold_starts),
        compile_caches=compiled,
    )


def _policy(settings: OperatorSettings, service: InferenceService, plan: Plan | None) -> PolicyConfig:
    """Step 5c: the scaling policy, with the deployed prefill/decode split's roles."""
    policy = resolve_policy(settings, service.spec)
    roles = pd_split.roles(plan)
    return policy if roles is None else dataclasses.replace(policy, split=(roles.prefill, roles.decode))


def _workload(
    service: InferenceService, settings: OperatorSettings, observed: Observations
) -> tuple[InferenceService, dict[str, Any] | None]:
    """Step 1: the spec with the workload to plan for (replan: auto's observed one)."""
    if not observed.now:
        return service, None  # no pass, no time: the declared workload (CLI, webhook)
    spec, planned_for = replan.planned_workload(
        service.spec,
        observed.status,
        generation=observed.generation,
        replan=replan_mode(settings, service.spec),
        now=observed.now,
    )
    if planned_for is None:
        return service, None
    return service.model_copy(update={"spec": spec}), planned_for


def _tiers(service: InferenceService, settings: OperatorSettings) -> tuple[TierDesign, ...]:
    """Step 2: each tier's image, release and GPU record (its plan comes in step 3)."""
    catalogs = settings.catalogs()
    by_tier = images.tier_images(service, settings)
    designed = []
    for tier in service.spec.tiers:
        release = planner.tier_release(service.spec, tier, settings.vllm_image, by_tier)
        gpu, _ = planner.resolve_gpu(tier, catalogs)
        designed.append(TierDesign(tier, by_tier.get(tier.name), release, gpu, None))
    return tuple(designed)


def _plan(
    service: InferenceService,
    settings: OperatorSettings,
    observed: Observations,
    tiers: tuple[TierDesign, ...],
) -> tuple[Plan | None, PlanFailure | None]:
    """Step 3: every tier planned for the release its image runs, with the model as read;
    or the plan the cluster shows deployed (the autoscaler's case)."""
    if observed.deployed_plan is not None:
        return observed.deployed_plan, None
    catalogs = settings.catalogs()
    model = observed.model
    try:
        planned = [
            planner.plan_tier(
                service.spec,
                tier.spec,
                catalogs,
                release=tier.release,
                fetched=model.fetched,
                fetch_problem=model.problem,
                host_kv_default=settings.host_kv_cache,
            )
            for tier in tiers
        ]
    except SpecInvalid as error:
        problems = tuple(error.problems) or (Problem("spec", str(error)),)
        return None, PlanFailure("invalid", str(error), problems, error)
    except ValueError as error:  # the planner refuses input it cannot size
        refused = Problem("spec", f"the planner cannot size this spec: {error}")
        return None, PlanFailure("rejected", f"the planner rejected the spec: {error}", (refused,), error)
    except Exception as error:  # a value validation let through, or a bug
        failed = Problem("spec", f"the planner failed on this spec ({type(error).__name__}: {error})")
        return None, PlanFailure("internal", internal_error_message("plan", error), (failed,), error)
    # The prefill/decode split is a decision over every tier's plan; whether the operator
    # can run it, one over the front door and the tiers' releases (design.pd_split).
    split = planner.with_roles(service.spec, Plan(name=service.name, tiers=planned), settings.catalogs())
    return pd_split.resolve(service, settings, split), None


def _verdict(
    service: InferenceService,
    settings: OperatorSettings,
    model: ModelReading,
    plan: Plan | None,
    failure: PlanFailure | None,
) -> tuple[tuple[Problem, ...], tuple[Problem, ...], str | None]:
    """Step 4: the refusals (checks.refusals: judged without a plan while the architecture
    is pending, so only what holds for every tier), the tiers' own problems that wait for
    it, and the source a probe reads it from."""
    awaiting = checks.awaiting_source(service, settings)
    pending = model.pending or (awaiting is not None and model.fetched is None)
    judged = None if pending else plan
    if failure is not None and not pending:
        return (), (), awaiting
    refused = tuple(checks.refusals(service, settings, judged))
    deferred = tuple(checks.deferred(service, settings)) if pending and awaiting is not None else ()
    return refused, deferred, awaiting


def _reported(
    service: InferenceService, plan: Plan | None, observed: Observations, warm: Mapping[str, int]
) -> Plan | None:
    """Step 5a: the plan status shows, with the measured KV capacity and cold starts (the
    warm-cache start where every eligible node has the tier's compile cache)."""
    if plan is None or observed.deployed_plan is not None:
        return plan
    with_kv = planner.observe_kv_capacity(plan, service.spec, dict(observed.kv_capacity))
    return planner.observe_cold_starts(with_kv, dict(observed.cold_starts), dict(observed.warm_starts), warm)


def _compile_caches(
    service: InferenceService, tiers: tuple[TierDesign, ...], observed: Observations
) -> dict[str, compile_cache.TierCompileState]:
    """Step 5b: per tier the node cache keeps compile caches for, its key and which of its
    eligible nodes have shown it (status keeps the evidence between passes)."""
    if observed.deployed_plan is not None:
        return {}
    revision = cache_objects.revision_label(service) if cache_objects.is_cached(service) else None
    previous = {
        str(entry.get("tier")): entry
        for entry in (observed.status.get("cache") or [])
        if isinstance(entry, Mapping)
    }
    found: dict[str, compile_cache.TierCompileState] = {}
    for tier in tiers:
        ref = cache_objects.compile_cache_ref(service, tier.plan, tier.image) if tier.plan else None
        if ref is None:
            continue
        kept = previous.get(tier.name) or {}
        evidence = kept.get("compileNodes") if kept.get("compileKey") == ref.key else None
        found[tier.name] = compile_cache.observe(
            ref.key,
            [e for e in evidence or [] if isinstance(e, Mapping)],
            _of_tier(observed.cache_pods, tier.name, revision),
            _of_tier(observed.serving_pods, tier.name, None),
            observed.eligible_nodes.get(tier.name, 0),
        )
    return found


def _of_tier(pods: Sequence[Mapping[str, Any]], tier: str, revision: str | None) -> list[Mapping[str, Any]]:
    """The pods of one tier (and, given, of one pre-cache revision)."""
    out = []
    for pod in pods:
        pod_labels = (pod.get("metadata") or {}).get("labels") or {}
        if pod_labels.get(labels.LABEL_TIER) != tier:
            continue
        if revision is not None and pod_labels.get(cache_objects.LABEL_CACHE_REVISION) != revision:
            continue
        out.append(pod)
    return out


def _hold_figures(
    plan: Plan, observed: Observations, warm: Mapping[str, int]
) -> tuple[dict[str, float], dict[str, float]]:
    """Step 5c: per tier, the measured start and the estimate of the case in force for the
    front door's hold: the warm-cache start where every eligible node has the tier's
    compile cache, else the first start."""
    measured: dict[str, float] = {}
    estimated: dict[str, float] = {}
    for tier in plan.tiers:
        if tier.name in warm and tier.warm_start_seconds is not None:
            estimated[tier.name] = tier.warm_start_seconds
            found = observed.warm_starts.get(tier.name)
        else:
            found = observed.cold_starts.get(tier.name)
        if found is not None:
            measured[tier.name] = found.seconds
    return measured, estimated


def _seconds(cold_starts: Mapping[str, planner.MeasuredColdStart]) -> dict[str, float]:
    return {tier: found.seconds for tier, found in cold_starts.items()}
