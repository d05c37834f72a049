"""`inferfleet simulate`: replay a traffic trace through a policy before applying it.

The replay runs the design the operator would deploy (design.design under the operator's
settings, INFERFLEET_* as `inferfleet run` reads them, and `--catalog-file`): its plan,
its scaling policy and its front door.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

import typer
from pydantic import ValidationError

from inferfleet.api import InferenceService, Plan
from inferfleet.api.spec import Disaggregation, HostKvCache, ServingSpec
from inferfleet.autoscaling.policy import POLICIES, drift
from inferfleet.autoscaling.simulate import disaggregated
from inferfleet.autoscaling.simulate.decisions import recording
from inferfleet.autoscaling.simulate.engine import SimConfig, SimResult
from inferfleet.autoscaling.simulate.engine import simulate as run_simulation
from inferfleet.autoscaling.simulate.report import (
    COMPARE_COLUMNS,
    HOST_KV_COLUMNS,
    TABLE_COLUMNS,
    summarize,
    table_rows,
)
from inferfleet.autoscaling.simulate.setup import SetupError, build_config
from inferfleet.autoscaling.simulate.traces import FORMATS, Trace, TraceError, epoch_of
from inferfleet.autoscaling.tracefiles.read import load_trace
from inferfleet.cli.app import OutputFormat, app, emit, fail, load_services, load_settings
from inferfleet.config import OperatorSettings
from inferfleet.design import Design, Observations, design
from inferfleet.design.pd_split import roles
from inferfleet.design.replan import with_workload


def _plan_file(plan_file: Path) -> Plan:
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


def design_for_replay(
    service: InferenceService, settings: OperatorSettings, plan_file: Path | None
) -> Design:
    """The design the operator would deploy; with `plan_file`, on that plan (as the
    autoscaler designs on the plan the cluster shows deployed)."""
    deployed = _plan_file(plan_file) if plan_file is not None else None
    designed = design(service, settings, Observations(deployed_plan=deployed))
    failure = designed.plan_failure
    if failure is not None:
        fail(f"{service.name}: cannot plan: {'; '.join(problem.message for problem in failure.problems)}")
    return designed


def drift_report(designed: Design, config: SimConfig, result: SimResult) -> dict[str, Any]:
    """What the operator's WorkloadDrift condition would say after this replay: the
    policy's reading of the simulated engines' metrics against the declared workload."""
    if result.final_state is None or designed.plan is None:
        return {"drifted": None}
    service = designed.service
    spec = service.spec
    figures = {tier.figures.name: tier.figures for tier in config.tiers}
    verdict = drift.assess(
        result.final_state,
        figures,
        spec.workload.input_tokens,
        spec.workload.output_tokens,
        previously=None,
    )
    document: dict[str, Any] = {
        "drifted": verdict.drifted,
        "reason": verdict.reason,
        "message": verdict.message,
    }
    if verdict.observed is not None:
        document["observed"] = verdict.observed.to_wire()
    if verdict.drifted and verdict.implied_input_tokens and verdict.implied_output_tokens:
        implied_spec = with_workload(spec, verdict.implied_input_tokens, verdict.implied_output_tokens)
        implied = design(service.model_copy(update={"spec": implied_spec}), designed.settings).plan
        document["impliedInputTokens"] = verdict.implied_input_tokens.to_wire()
        document["impliedOutputTokens"] = verdict.implied_output_tokens.to_wire()
        if implied is not None:
            document["impliedPlan"] = drift.describe_plans(designed.plan.tiers, implied.tiers)
    return document


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
    observed_out: Annotated[
        Path | None,
        typer.Option(
            "--observed-workload-out",
            help="Write the workload the simulated engines reported (for `plan --observed-workload`).",
        ),
    ] = None,
    observed_in: Annotated[
        Path | None,
        typer.Option(
            "--observed-workload",
            help="Plan and replay for these token percentiles instead of the declared ones (replan: auto).",
        ),
    ] = None,
    catalog_file: Annotated[
        Path | None, typer.Option("--catalog-file", help="YAML with extra GPUs merged into the catalog.")
    ] = None,
    decisions_out: Annotated[
        Path | None,
        typer.Option(
            "--decisions",
            help="Write every autoscaler decision, with the signals it was taken on, as JSON lines.",
        ),
    ] = None,
    compare_disaggregated: Annotated[
        bool,
        typer.Option(
            "--compare-disaggregated",
            help="Replay the fleet colocated and split into prefill and decode pools (the planner's pair), "
            "side by side.",
        ),
    ] = False,
    compare_host_kv_cache: Annotated[
        bool,
        typer.Option(
            "--compare-host-kv-cache",
            help="Replay the fleet without and with a host-memory KV tier (a trace with prefix blocks: "
            "Mooncake hash_ids), side by side.",
        ),
    ] = False,
) -> None:
    """Replay a trace through the autoscaler and report SLO attainment, GPU-hours and cost."""
    names = _policies(policy, trace_format, arrivals, rate_scale, time_scale)
    service = load_services(file)[0]
    if observed_in is not None:
        from inferfleet.cli.plan import observed_workload

        service = service.model_copy(
            update={"spec": with_workload(service.spec, *observed_workload(observed_in))}
        )
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
    if compare_disaggregated and compare_host_kv_cache:
        fail("--compare-disaggregated and --compare-host-kv-cache are two comparisons: give one")
    if compare_disaggregated:
        compare_split(service, load_settings(catalog_file), loaded, seed=seed, output=output)
        return
    if compare_host_kv_cache:
        compare_host_tier(service, load_settings(catalog_file), loaded, seed=seed, output=output)
        return
    designed = design_for_replay(service, load_settings(catalog_file), plan_file)
    try:
        config = build_config(designed, seed=seed, timeline=plot is not None)
    except SetupError as error:
        fail(str(error))
    decisions = _open_for_writing(decisions_out) if decisions_out is not None else None
    try:
        summaries, verdict = _replay(designed, config, loaded, names, decisions=decisions, plot=plot)
    finally:
        if decisions is not None:
            decisions.close()
    _print(summaries, verdict, output, file, observed_out)
    if observed_out is not None:
        _write_observed(verdict, observed_out)


def _policies(
    policy: str, trace_format: str, arrivals: str, rate_scale: float, time_scale: float
) -> list[str]:
    """The policies to replay; exit 2 on an unknown name or a bad option."""
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
    return names


def _replay(
    designed: Design,
    config: SimConfig,
    loaded: Trace,
    names: list[str],
    *,
    decisions: TextIO | None,
    plot: Path | None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Each policy over the trace; the summaries, and the drift verdict of ours."""
    summaries = []
    verdict: dict[str, Any] | None = None
    for name in names:
        policy_config = config.policy
        if name == "static-peak":
            policy_config = dataclasses.replace(policy_config, static_peak_rps=loaded.peak_minute_rps())
        policy_function = POLICIES[name]
        if decisions is not None:
            policy_function = recording(policy_function, name, loaded.epoch_s, _json_lines(decisions))
        result = run_simulation(
            loaded,
            dataclasses.replace(config, policy=policy_config),
            policy_function,
            name,
            clock=time.perf_counter,
        )
        summaries.append(summarize(result))
        if name == "inferfleet":
            verdict = drift_report(designed, config, result)
            summaries[-1]["workloadDrift"] = verdict
        if plot is not None:
            from inferfleet.autoscaling.tracefiles.plot import plot as draw

            target = plot if len(names) == 1 else plot.with_name(f"{plot.stem}-{name}{plot.suffix}")
            draw(result, target, title=f"{designed.service.name} on {loaded.name}: {name}")
    return summaries, verdict


def _print(
    summaries: list[dict[str, Any]],
    verdict: dict[str, Any] | None,
    output: OutputFormat,
    file: Path,
    observed_out: Path | None,
) -> None:
    if output is not OutputFormat.table:
        emit(summaries[0] if len(summaries) == 1 else summaries, output)
        return
    _print_rows(summaries)
    if verdict is not None and verdict.get("drifted") is not None:
        typer.echo("")
        typer.echo(_drift_text(verdict, file, observed_out))


def _print_rows(
    summaries: list[dict[str, Any]], columns: tuple[tuple[str, str], ...] = TABLE_COLUMNS
) -> None:
    # Plain columns (like kubectl): never wrapped or cut, whatever the terminal width.
    headers = [header for _, header in columns]
    rows = table_rows(summaries, columns)
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line in [headers, *rows]:
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        typer.echo("  ".join(cells).rstrip())


def _write_observed(verdict: dict[str, Any] | None, observed_out: Path) -> None:
    if verdict is None or "observed" not in verdict:
        fail("no observed workload to write: run the inferfleet policy on a trace with traffic")
    document = {**verdict["observed"]}
    for key in ("impliedInputTokens", "impliedOutputTokens"):
        if key in verdict:
            document[key] = verdict[key]
    observed_out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _json_lines(stream: TextIO) -> Callable[[dict[str, Any]], None]:
    def write_line(record: dict[str, Any]) -> None:
        stream.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")

    return write_line


def _open_for_writing(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as error:
        fail(f"{path}: cannot write: {error.strerror or error}")


def _drift_text(verdict: dict[str, Any], spec_file: Path, observed_out: Path | None) -> str:
    if not verdict["drifted"]:
        return f"WorkloadDrift=False ({verdict['reason']}): {verdict['message']}"
    target = observed_out if observed_out is not None else Path("OBSERVED.json")
    hint = "" if observed_out is not None else " (write it with --observed-workload-out)"
    return (
        f"WorkloadDrift=True ({verdict['reason']}): {verdict['message']}.\n"
        f"The observed workload implies: {verdict.get('impliedPlan', '')}.\n"
        f"The operator sets this condition and, with spec.scaling.replan: auto, re-plans; to see the "
        f"plan: inferfleet plan -f {spec_file} --observed-workload {target}{hint}"
    )


def _with_serving_mode(
    service: InferenceService, field: Literal["disaggregation", "host_kv_cache"], mode: Literal["off", "on"]
) -> InferenceService:
    """The service with `spec.serving.<field>.mode` set to `mode`, the rest as it was."""
    spec = service.spec
    serving = spec.serving or ServingSpec()
    empty = Disaggregation() if field == "disaggregation" else HostKvCache()
    wanted = (getattr(serving, field) or empty).model_copy(update={"mode": mode})
    serving = serving.model_copy(update={field: wanted})
    return service.model_copy(update={"spec": spec.model_copy(update={"serving": serving})})


def compare_split(
    service: InferenceService, settings: OperatorSettings, loaded: Trace, *, seed: int, output: OutputFormat
) -> None:
    """The fleet replayed colocated (disaggregation off) and split on the planner's best
    pair (mode on), with the inferfleet policy: does the split pay on this traffic?"""
    colocated_design = design_for_replay(_with_serving_mode(service, "disaggregation", "off"), settings, None)
    split_design = design_for_replay(_with_serving_mode(service, "disaggregation", "on"), settings, None)
    if split_design.invalid is not None or roles(split_design.plan) is None:
        split = split_design.plan.disaggregation if split_design.plan is not None else None
        why = split_design.invalid or ("; ".join(split.reasons) if split is not None else "no split planned")
        fail(f"{service.name}: no prefill/decode split to compare: {why}")
    try:
        config = build_config(colocated_design, seed=seed, timeline=False)
        colocated = summarize(
            run_simulation(loaded, config, POLICIES["inferfleet"], "inferfleet", clock=time.perf_counter)
        )
        split_replay = disaggregated.replay(
            loaded, split_design, POLICIES["inferfleet"], seed=seed, clock=time.perf_counter
        )
    except SetupError as error:
        fail(str(error))
    split_summary = disaggregated.summarize_split(split_replay, loaded)
    assert split_design.plan is not None and split_design.plan.disaggregation is not None
    document = {
        "colocated": colocated,
        "disaggregated": split_summary,
        "verdict": disaggregated.verdict(colocated, split_summary),
        "plan": split_design.plan.disaggregation.to_wire(),
    }
    if output is not OutputFormat.table:
        emit(document, output)
        return
    _print_rows([colocated, split_summary], COMPARE_COLUMNS)
    typer.echo("")
    typer.echo(document["verdict"])
    for reason in split_design.plan.disaggregation.reasons:
        typer.echo(f"  • {reason}")


def _fleet_share(summary: dict[str, Any], key: str) -> float | None:
    """A prefix-cache share over the fleet: each tier's, weighted by its replica-hours."""
    figures: dict[str, dict[str, Any]] = summary.get("prefixCache", {})
    weights = {name: summary["meanReplicas"].get(name, 0.0) for name in figures}
    total = sum(weights.values())
    if not figures or total <= 0:
        return None
    weighted = sum(float(figures[name][key]) * float(weight) for name, weight in weights.items())
    return round(weighted / float(total), 4)


def compare_host_tier(
    service: InferenceService, settings: OperatorSettings, loaded: Trace, *, seed: int, output: OutputFormat
) -> None:
    """The fleet replayed without a host-memory KV tier (mode off) and with one (mode on,
    sized by the planner) over a trace whose prefixes are known: does the tier pay here?"""
    if loaded.prefix_blocks is None:
        fail(
            f"{loaded.name}: the trace says nothing of its prompts' prefixes; --compare-host-kv-cache "
            "needs prefix blocks (a Mooncake JSONL trace with hash_ids)"
        )
    cases = []
    tiered_design: Design | None = None
    modes: tuple[tuple[Literal["off", "on"], str], ...] = (
        ("off", "inferfleet, no host tier"),
        ("on", "inferfleet, host KV tier"),
    )
    for mode, label in modes:
        designed = design_for_replay(_with_serving_mode(service, "host_kv_cache", mode), settings, None)
        try:
            config = build_config(designed, seed=seed, timeline=False)
            summary = summarize(
                run_simulation(loaded, config, POLICIES["inferfleet"], "inferfleet", clock=time.perf_counter)
            )
        except SetupError as error:
            fail(str(error))
        summary["policy"] = label
        summary["prefilledShare"] = _fleet_share(summary, "prefilledShare")
        summary["hostHitShare"] = _fleet_share(summary, "hostHitShare")
        cases.append(summary)
        tiered_design = designed
    assert tiered_design is not None and tiered_design.plan is not None
    sized = {tier.name: tier.host_kv_cache_gi_b for tier in tiered_design.plan.tiers if tier.feasible}
    if not any(sized.values()):
        reasons = [r for tier in tiered_design.plan.tiers for r in tier.reasons if "host KV cache" in r]
        why = "; ".join(reasons) or "none planned"
        fail(f"{service.name}: no tier gets a host KV tier to compare: {why}")
    without, with_tier = cases
    document = {
        "withoutHostTier": without,
        "withHostTier": with_tier,
        "hostKvCacheGiB": sized,
        "verdict": _host_tier_verdict(without, with_tier),
    }
    if output is not OutputFormat.table:
        emit(document, output)
        return
    _print_rows(cases, HOST_KV_COLUMNS)
    typer.echo("")
    typer.echo(document["verdict"])


def _host_tier_verdict(without: dict[str, Any], with_tier: dict[str, Any]) -> str:
    """Pays: more requests within both SLOs; or as many for less money; or as many for the
    same money with a P99 TTFT at least 10% lower."""
    both_gain = with_tier["sloAttainmentWithItl"] - without["sloAttainmentWithItl"]
    cost_change = with_tier["costUsd"] - without["costUsd"]
    saved = (without["prefilledShare"] or 0.0) - (with_tier["prefilledShare"] or 0.0)
    p99_before, p99_after = without["ttftP99Ms"], with_tier["ttftP99Ms"]
    faster = p99_before is not None and p99_after is not None and p99_after <= 0.9 * p99_before
    level = both_gain >= -0.0005
    pays = both_gain > 0.0005 or (level and cost_change < 0) or (level and cost_change <= 0 and faster)
    return (
        f"The host KV tier {'pays' if pays else 'does not pay'} on this trace: "
        f"{saved:.1%} of prompt tokens no longer prefilled, {both_gain:+.2%} within both SLOs, "
        f"TTFT P99 {p99_before} -> {p99_after} ms, {cost_change:+.2f} USD."
    )
