"""`inferfleet simulate`: replay a traffic trace through a policy before applying it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from inferfleet.api import InferenceService, Plan
from inferfleet.cli.app import OutputFormat, app, emit, fail, load_services
from inferfleet.scaling import POLICIES
from inferfleet.simulate.engine import simulate as run_simulation
from inferfleet.simulate.report import TABLE_COLUMNS, summarize, table_rows
from inferfleet.simulate.setup import SetupError, build_config
from inferfleet.simulate.traces import FORMATS, TraceError, epoch_of, load_trace


def _plan(service: InferenceService, plan_file: Path | None) -> Plan:
    if plan_file is not None:
        try:
            document: Any = json.loads(plan_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            fail(f"{plan_file}: no such file")
        except (OSError, ValueError) as error:
            fail(f"{plan_file}: not a plan JSON document: {error}")
        try:
            return Plan.model_validate(document)
        except ValidationError as error:
            fail(f"{plan_file}: not a plan (`inferfleet plan -o json`): {error.error_count()} problem(s)")
    try:
        from inferfleet.planner import plan_service  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        fail("the planner is not available in this build; pass --plan PLAN.json")
    try:
        planned: Plan = plan_service(service)
    except ValueError as error:
        fail(f"{service.name}: cannot plan: {error}")
    return planned


@app.command()
def simulate(
    *,
    file: Annotated[Path, typer.Option("--file", "-f", help="InferenceService YAML (the first document).")],
    trace: Annotated[Path, typer.Option("--trace", help="Trace: Azure/BurstGPT CSV, Mooncake JSONL, rates.")],
    policy: Annotated[
        str, typer.Option("--policy", "-p", help=f"One of {', '.join(POLICIES)}, or 'all'.")
    ] = "inferfleet",
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")] = (
        OutputFormat.table
    ),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG of demand, replicas, TTFT.")
    ] = None,
    rate_scale: Annotated[float, typer.Option("--rate-scale", help="Multiply the load.")] = 1.0,
    time_scale: Annotated[
        float, typer.Option("--time-scale", help="Stretch time (2 = half the rate).")
    ] = 1.0,
    trace_format: Annotated[str, typer.Option("--format", help=f"{', '.join(FORMATS)}.")] = "auto",
    plan_file: Annotated[
        Path | None, typer.Option("--plan", help="Plan JSON (`inferfleet plan -o json`) instead of planning.")
    ] = None,
    arrivals: Annotated[
        str, typer.Option("--arrivals", help="Rate series only: poisson or gamma (uses the file's CV).")
    ] = "poisson",
    start: Annotated[
        str | None, typer.Option("--start", help="ISO time of the trace start (cron windows, calendar).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for synthesized arrivals and routing.")] = 0,
) -> None:
    """Replay a trace through the autoscaler and report SLO attainment, GPU-hours and cost."""
    names = list(POLICIES) if policy == "all" else [policy]
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        fail(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}, all")
    if trace_format not in FORMATS:
        fail(f"unknown trace format {trace_format!r}; known: {', '.join(FORMATS)}")
    if arrivals not in ("poisson", "gamma"):
        fail(f"--arrivals must be poisson or gamma, got {arrivals!r}")
    if rate_scale <= 0 or time_scale <= 0:
        fail("--rate-scale and --time-scale must be > 0")
    service = load_services(file)[0]
    spec = service.spec
    try:
        loaded = load_trace(
            trace,
            trace_format=trace_format,
            input_tokens=spec.workload.input_tokens,
            output_tokens=spec.workload.output_tokens,
            rate_scale=rate_scale,
            time_scale=time_scale,
            seed=seed,
            arrivals="gamma" if arrivals == "gamma" else "poisson",
            epoch_s=None if start is None else epoch_of(start),
        )
    except TraceError as error:
        fail(str(error))
    if len(loaded) == 0:
        fail(f"{trace}: the trace has no requests")
    try:
        config = build_config(spec, _plan(service, plan_file), seed=seed, timeline=plot is not None)
    except SetupError as error:
        fail(str(error))
    summaries = []
    for name in names:
        policy_config = config.policy
        if name == "static-peak":
            policy_config = dataclasses.replace(policy_config, static_peak_rps=loaded.peak_minute_rps())
        result = run_simulation(
            loaded, dataclasses.replace(config, policy=policy_config), POLICIES[name], name
        )
        summaries.append(summarize(result))
        if plot is not None:
            from inferfleet.simulate.plot import plot as draw

            target = plot if len(names) == 1 else plot.with_name(f"{plot.stem}-{name}{plot.suffix}")
            draw(result, target, title=f"{service.name} on {loaded.name}: {name}")
    if output is OutputFormat.table:
        # Plain columns (like kubectl): never wrapped or cut, whatever the terminal width.
        headers = [header for _, header in TABLE_COLUMNS]
        rows = table_rows(summaries)
        widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
        for line in [headers, *rows]:
            cells = [
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ]
            typer.echo("  ".join(cells).rstrip())
    else:
        emit(summaries[0] if len(summaries) == 1 else summaries, output)
