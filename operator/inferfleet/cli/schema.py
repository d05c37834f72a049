"""`inferfleet crd` and `inferfleet validate`: the API surface."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferfleet.api.crd import crd_yaml
from inferfleet.cli.app import app, load_services, stdout


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
) -> None:
    """Validate InferenceService documents; exit 2 naming each bad field and the rule it breaks."""
    for service in load_services(file):
        stdout.print(f"{file}: {service.name}: valid", highlight=False, markup=False)
