"""`inferfleet render -f FILE`: the Kubernetes objects the operator would apply."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from inferfleet.api import safe_text
from inferfleet.cli.app import OutputFormat, app, fail, load_services, load_settings, stderr
from inferfleet.config import OperatorSettings


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the probe and drain scripts) as readable literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # every object spelled out: no &id001 anchors in manifests


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML in the objects' own key order (deterministic)."""
    return yaml.dump_all(objects, Dumper=_BlockDumper, sort_keys=False, width=100, explicit_start=True)


def render_file(path: Path, settings: OperatorSettings) -> list[dict[str, Any]]:
    """Design and render every InferenceService in a file as the operator would; exit 2
    when a spec cannot be served."""
    from inferfleet import render
    from inferfleet.design import design

    objects: list[dict[str, Any]] = []
    for service in load_services(path):
        designed = design(service, settings)
        plan, failure = designed.plan, designed.plan_failure
        if failure is not None or plan is None:
            words = "; ".join(problem.message for problem in failure.problems) if failure else "no plan"
            fail(f"{path}: {service.name}: {words}")
        for tier in plan.tiers:
            if not tier.feasible:
                why = f"tier {tier.name} is infeasible, not rendered: {tier.infeasible_reason}"
                stderr.print(
                    safe_text.escape(f"{service.name}: {why}"),
                    highlight=False,
                    markup=False,
                )
        if not plan.feasible_tiers:
            fail(f"{path}: {service.name}: no tier can serve the model")
        # What the webhook and the reconciler refuse (design.checks), never rendered.
        for problem in designed.refusals:
            line = safe_text.escape(f"{path}: {service.name}: {problem}")
            stderr.print(line, highlight=False, markup=False)
        if designed.refusals:
            fail(f"{path}: {service.name}: cannot be rendered ({len(designed.refusals)} problem(s))")
        try:
            objects.extend(render.render(designed))
        except Exception as error:
            fail(f"{path}: {service.name}: cannot render this spec ({type(error).__name__}: {error})")
    return objects


@app.command("render")
def render_command(
    file: Annotated[Path, typer.Option("--file", "-f", help="InferenceService YAML ('-' for stdin).")],
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="yaml (multi-document) or json.")] = (
        OutputFormat.yaml
    ),
) -> None:
    """Print the Deployments/LeaderWorkerSets, Services, PDBs and PodMonitor for each service."""
    objects = render_file(file, load_settings())
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    else:
        sys.stdout.write(to_yaml(objects))
