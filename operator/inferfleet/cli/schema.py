"""`inferfleet crd` and `inferfleet validate`: the API surface."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferfleet.api import safe_text
from inferfleet.api.crd import crd_yaml
from inferfleet.cli.app import app, fail, load_services, load_settings, stderr, stdout


@app.command()
def crd(
    output_file: Annotated[
        Path | None, typer.Option("--output-file", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Print the InferenceService CustomResourceDefinition generated from the API models."""
    text = crd_yaml()
    if output_file is None:
        typer.echo(text, nl=False)
    else:
        output_file.write_text(text, encoding="utf-8")


@app.command()
def validate(
    file: Annotated[Path, typer.Option("--file", "-f", help="InferenceService YAML ('-' for stdin).")],
    catalog_file: Annotated[
        Path | None, typer.Option("--catalog-file", help="YAML with extra GPUs merged into the catalog.")
    ] = None,
) -> None:
    """Validate InferenceService documents; exit 2 naming each bad field and the rule it breaks.

    The webhook's verdict (the reconciler refuses the same specs): beyond the schema, GPU
    names the catalogs lack, a model the catalog lacks with no source a probe can read, a
    spec no tier can serve, a cache path outside the operator's allowed root
    (INFERFLEET_CACHE_ALLOWED_ROOT), tiers without a placement, one serving.image for GPUs
    of several vendors, a Gateway in another namespace the operator does not allow
    (INFERFLEET_ALLOWED_GATEWAYS). A model read by a probe Job is valid, with a warning:
    nothing here reads its source."""
    from inferfleet.design import design
    from inferfleet.design.verdict import judge

    settings = load_settings(catalog_file)
    services = load_services(file)
    found = 0
    judged = [(service, judge(design(service, settings))) for service in services]
    for service, judgement in judged:
        for problem in judgement.problems:
            found += 1
            line = safe_text.escape(f"{file}: {service.name}: {problem}")
            stderr.print(line, highlight=False, markup=False)
    if found:
        fail(f"{file}: cannot be deployed ({found} problem(s))")
    for service, judgement in judged:
        for warning in judgement.warnings:
            stderr.print(
                safe_text.escape(f"{file}: {service.name}: warning: {warning}"), highlight=False, markup=False
            )
        stdout.print(f"{file}: {service.name}: valid", highlight=False, markup=False)
