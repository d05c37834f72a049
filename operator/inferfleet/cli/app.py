"""The typer application and the helpers every subcommand shares.

User mistakes (missing file, invalid spec, bad flag) end with a precise message on
stderr and exit code 2; they never show a traceback.
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from inferfleet.api import InferenceService, SpecInvalid, load_all, safe_text

if TYPE_CHECKING:
    from inferfleet.config import OperatorSettings

EXIT_USAGE = 2
# A valid spec that cannot deploy (no feasible tier; any infeasible tier with --strict).
EXIT_INFEASIBLE = 1

app = typer.Typer(
    name="inferfleet",
    help="Plan, render, simulate and run right-sized vLLM fleets on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def fail(message: str) -> NoReturn:
    """Report a user error and exit 2. The message is text, never markup: it quotes paths
    and names the user chose, and `[/x]` in one must print as is, not crash Rich; control
    and bidi characters in one are written as escapes (api.safe_text)."""
    stderr.print(f"[bold red]error:[/] {escape(safe_text.escape(message))}", highlight=False, markup=True)
    raise typer.Exit(EXIT_USAGE)


def read_text(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except IsADirectoryError:
        fail(f"{path}: is a directory, expected a YAML file")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"{path}: cannot read: {error}")


def load_settings(catalog_file: Path | None = None) -> OperatorSettings:
    """The operator settings from INFERFLEET_* (as the operator reads them), optionally with
    another catalog file; exit 2 naming the variable or the file when one is bad."""
    from inferfleet.catalog import CatalogInvalid
    from inferfleet.config import OperatorSettings, SettingsInvalid

    try:
        settings = OperatorSettings.from_env()
        if catalog_file is not None:
            if not catalog_file.is_file():
                fail(f"{catalog_file}: no such file")
            settings = settings.model_copy(update={"catalog_file": str(catalog_file)})
        settings.catalogs()  # a bad catalog file fails here, with its name
    except (SettingsInvalid, CatalogInvalid, OSError) as error:
        fail(str(error))
    return settings


def load_services(path: Path) -> list[InferenceService]:
    """Every InferenceService in a file, or exit 2 listing each problem with its field path."""
    try:
        return load_all(read_text(path), source=str(path))
    except SpecInvalid as error:
        for problem in error.problems:
            stderr.print(safe_text.escape(f"{path}: {problem}"), highlight=False, markup=False)
        fail(f"{path}: invalid InferenceService ({len(error.problems)} problem(s))")


def emit(document: Any, output: OutputFormat) -> None:
    """Print plain data as JSON or YAML (tables are each command's own)."""
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False, width=100))
