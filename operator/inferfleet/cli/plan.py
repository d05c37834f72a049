"""`inferfleet plan -f FILE [-o table|json|yaml]`: the sizing plan of each tier.

`-o json` prints exactly `{"name": ..., "tiers": [...]}` for a file with one
InferenceService (a contract other tools rely on; docs/concepts/planning.md); a file
with several prints a JSON list of such objects, in file order. YAML follows the same shapes.

`--observed-workload FILE` plans for the traffic the engines really serve instead of
the declared one: FILE holds token percentiles as `inputTokens`/`outputTokens` (the
keys of spec.workload), or is the autoscaler's `status.observedWorkload` (`kubectl get
ifs NAME -o jsonpath='{.status.observedWorkload}'`, or `inferfleet simulate
--observed-workload-out`), whose `impliedInputTokens`/`impliedOutputTokens` are used
when present (they account for prompts rejected beyond max-model-len).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from inferfleet.api import InferenceService, safe_text
from inferfleet.api.plan import Plan, TierPlan
from inferfleet.api.spec import TokenPercentiles
from inferfleet.caching.fetcher.modelconfig import ModelConfigCache
from inferfleet.caching.precache.probe import needs_fetch, source_uri
from inferfleet.catalog import Catalogs
from inferfleet.cli.app import (
    EXIT_INFEASIBLE,
    OutputFormat,
    app,
    fail,
    load_services,
    load_settings,
    read_text,
    stderr,
    stdout,
)
from inferfleet.design.replan import with_workload
from inferfleet.planner import FetchedModel


def observed_workload(path: Path) -> tuple[TokenPercentiles, TokenPercentiles]:
    """Token percentiles from an observed-workload file (see the module docstring)."""
    try:
        document = yaml.safe_load(read_text(path))
    except yaml.YAMLError as error:
        fail(f"{path}: not YAML or JSON: {error}")
    if not isinstance(document, dict):
        fail(f"{path}: expected a mapping with inputTokens and outputTokens")
    picked: list[TokenPercentiles] = []
    for implied, plain in (("impliedInputTokens", "inputTokens"), ("impliedOutputTokens", "outputTokens")):
        key = implied if implied in document else plain
        if key not in document:
            fail(f"{path}: {plain}: missing (percentiles p50, p95, p99)")
        try:
            picked.append(TokenPercentiles.model_validate(document[key]))
        except ValidationError as error:
            problem = error.errors(include_url=False)[0]
            where = ".".join(str(part) for part in (key, *problem["loc"]))
            fail(f"{path}: {where}: {problem['msg']}")
    return picked[0], picked[1]


def _for_observed(
    service: InferenceService, observed: tuple[TokenPercentiles, TokenPercentiles]
) -> InferenceService:
    spec = with_workload(service.spec, *observed)
    return service.model_copy(update={"spec": spec})


def plan_document(plan: Plan) -> dict[str, Any]:
    """The JSON contract of one service's plan."""
    document: dict[str, Any] = {"name": plan.name, "tiers": [tier.to_wire() for tier in plan.tiers]}
    if plan.disaggregation is not None:
        document["disaggregation"] = plan.disaggregation.to_wire()
    return document


def _rows(tier: TierPlan) -> list[tuple[str, str]]:
    m = tier.memory_gi_b
    perf = tier.performance
    cost = tier.cost_per_million_tokens_usd
    layout = f"TP {tier.tensor_parallel_size} × PP {tier.pipeline_parallel_size}"
    if tier.nodes_per_replica > 1:
        layout += f" ({tier.nodes_per_replica} nodes)"
    return [
        # An inline GPU's name is the user's text: control and bidi characters written as
        # escapes (api.safe_text), then escaped for Rich, which prints it rather than parsing it.
        ("GPU", escape(safe_text.escape(tier.gpu))),
        ("feasible", "[green]yes[/]" if tier.feasible else "[bold red]no[/]"),
        ("layout", f"{layout} = {tier.gpus_per_replica} GPU"),
        ("quantization / KV", f"{tier.quantization} / {tier.kv_cache_dtype}"),
        ("gpu-memory-utilization", f"{tier.gpu_memory_utilization:g}"),
        ("max-model-len", f"{tier.max_model_len:,}"),
        ("max-num-seqs", str(tier.max_num_seqs)),
        ("max-num-batched-tokens", f"{tier.max_num_batched_tokens:,}"),
        ("weights GiB/GPU", f"{m.weights:.2f}"),
        ("activations GiB/GPU", f"{m.activations:.2f}"),
        ("non-torch GiB/GPU", f"{m.overhead:.2f}"),
        ("KV cache GiB/GPU", f"{m.kv_cache:.2f}"),
        ("KV tokens / replica", f"{tier.kv_cache_tokens:,}"),
        ("max concurrency", f"{tier.max_concurrency:.2f}×"),
        ("concurrency at P95", f"{tier.concurrency_at_p95:.1f}"),
        ("prefill tokens/s", f"{perf.prefill_tokens_per_second:,.0f}" if perf else "-"),
        (
            "decode step ms",
            f"{perf.decode_step_base_ms:.1f} + {perf.decode_step_per_seq_ms:.3f}·b" if perf else "-",
        ),
        ("usable req/s / replica", f"{tier.usable_rps:.2f}"),
        ("replicas for peak", str(tier.replicas_for_peak)),
        ("cold start", f"{tier.cold_start_seconds:.0f} s"),
        ("$ / M tokens", f"{cost:.3f}" if cost is not None else "-"),
    ]


def print_table(plan: Plan) -> None:
    title = f"plan: {escape(safe_text.escape(plan.name))}"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("", style="bold")
    for tier in plan.tiers:
        table.add_column(tier.name, justify="right")
    rows = [_rows(tier) for tier in plan.tiers]
    for index, (label, _) in enumerate(rows[0]):
        table.add_row(label, *(tier_rows[index][1] for tier_rows in rows))
    stdout.print(table)
    for tier in plan.tiers:
        stdout.print(f"[bold]{tier.name}[/] — why:", highlight=False)
        for position, reason in enumerate(tier.reasons):
            style = "red" if position == 0 and not tier.feasible else ""
            shown = safe_text.escape(reason)  # reasons quote the spec's names and sources' errors
            line = f"  • {escape(shown) if style else shown}"
            stdout.print(f"[{style}]{line}[/]" if style else line, highlight=False, markup=bool(style))
    split = plan.disaggregation
    if split is not None:
        state = "deployed" if split.deployed else "planned, not deployed" if split.enabled else "not split"
        stdout.print(f"[bold]prefill/decode split[/] ({state}) — why:", highlight=False)
        for reason in split.reasons:
            stdout.print(f"  • {safe_text.escape(reason)}", highlight=False, markup=False)
    stdout.print()


def fetched_model(
    service: Any, catalogs: Catalogs, offline: bool, deadline_s: float = 60.0
) -> tuple[FetchedModel | None, str | None]:
    """config.json of a model the catalog lacks, from its source with this machine's own
    credentials (HF_TOKEN, the AWS and Google default chains), within the probe's deadline
    and caps (caching.fetcher.modelconfig.bounded_read); (None, why) otherwise."""
    from inferfleet.caching.fetcher.modelconfig import Access, ReadLimits, bounded_read

    if not needs_fetch(service, catalogs):
        return (None, None)
    if offline:
        return (None, "--offline: the source was not read")
    model = service.spec.model
    limits = ReadLimits(deadline_s=deadline_s)

    def read(uri: str, revision: str, access: Access, need_parameters: bool) -> FetchedModel:
        return bounded_read(uri, revision, access, need_parameters=need_parameters, limits=limits)

    cache = _CACHE.setdefault("cache", ModelConfigCache(read))
    revision = model.revision or "main"
    need_parameters = model.parameters_billion is None
    return cache.get(source_uri(service), revision, Access(), need_parameters=need_parameters)


# One cache per process: a file with several services of one model reads it once.
_CACHE: dict[str, ModelConfigCache] = {}


@app.command("plan")
def plan_command(  # noqa: PLR0917 - typer maps each option to a parameter
    file: Annotated[Path, typer.Option("--file", "-f", help="InferenceService YAML ('-' for stdin).")],
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")] = (
        OutputFormat.table
    ),
    catalog_file: Annotated[
        Path | None, typer.Option("--catalog-file", help="YAML with extra GPUs merged into the catalog.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when any tier is infeasible, not only when all are.")
    ] = False,
    offline: Annotated[
        bool,
        typer.Option("--offline", help="Never read config.json of uncatalogued models from their source."),
    ] = False,
    source_deadline_s: Annotated[
        float,
        typer.Option(
            "--source-deadline-s",
            min=1.0,
            max=3600.0,
            help="Total deadline for reading one uncatalogued model's config.json and headers.",
        ),
    ] = 60.0,
    observed_workload_file: Annotated[
        Path | None,
        typer.Option(
            "--observed-workload",
            help="Plan for these token percentiles (status.observedWorkload) instead of the declared ones.",
        ),
    ] = None,
) -> None:
    """Plan each tier: TP/PP, quantization, vLLM memory settings, capacity, replicas and cost.

    The memory figures model the vLLM release of each tier's image (spec.serving.image, or
    INFERFLEET_VLLM_IMAGE like the operator); a model the catalog lacks is read from its
    source (config.json and safetensors headers) unless --offline.

    Exit 1 when a service has no feasible tier (with --strict: any infeasible tier), after
    printing the plan; exit 2 for an invalid file."""
    from inferfleet.cli.app import emit
    from inferfleet.design import ModelReading, Observations, design

    # The operator's settings (INFERFLEET_*): its catalogs, and the image each tier runs,
    # whose vLLM release the memory figures model; the design is the operator's.
    settings = load_settings(catalog_file)
    catalogs = settings.catalogs()
    services = load_services(file)
    if observed_workload_file is not None:
        observed = observed_workload(observed_workload_file)
        services = [_for_observed(service, observed) for service in services]
    plans = []
    for service in services:
        fetched, problem = fetched_model(service, catalogs, offline, source_deadline_s)
        designed = design(service, settings, Observations(model=ModelReading(fetched, problem)))
        refused = designed.plan_failure
        if refused is not None or designed.plan is None:
            # ValueError: the planner's refusal; anything else a bug
            error = refused.error if refused is not None else None
            words = str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
            fail(f"{file}: {service.name}: the planner cannot plan this spec: {words}")
        plans.append(designed.plan)
    if output is OutputFormat.table:
        if observed_workload_file is not None:
            stdout.print(f"planned for the observed workload in {observed_workload_file}", highlight=False)
        for plan in plans:
            print_table(plan)
    else:
        documents = [plan_document(plan) for plan in plans]
        emit(documents[0] if len(documents) == 1 else documents, output)
    failures = infeasibility(plans, strict=strict)
    for failure in failures:
        stderr.print(f"[bold red]error:[/] {escape(safe_text.escape(f'{file}: {failure}'))}", highlight=False)
    if failures:
        raise typer.Exit(EXIT_INFEASIBLE)


def infeasibility(plans: list[Plan], *, strict: bool) -> list[str]:
    """Why the plans cannot deploy: services with no feasible tier; with `strict`, every
    infeasible tier (its first reason says why)."""
    failures: list[str] = []
    for plan in plans:
        infeasible = [tier for tier in plan.tiers if not tier.feasible]
        if len(infeasible) == len(plan.tiers):
            failures.append(f"{plan.name}: no tier can serve the model")
        if strict or len(infeasible) == len(plan.tiers):
            failures.extend(f"{plan.name}: tier {tier.name}: {tier.infeasible_reason}" for tier in infeasible)
    return failures
