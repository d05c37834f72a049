"""`inferfleet` command line: each subcommand lives in its own module of this package."""

from __future__ import annotations

import importlib

from inferfleet.cli.app import app

# Subcommand modules register themselves on `app` when imported.
COMMAND_MODULES = (
    "inferfleet.cli.schema",
    "inferfleet.cli.cache",
    "inferfleet.cli.signals",
    "inferfleet.cli.simulate",
    "inferfleet.cli.render",
    "inferfleet.cli.run",
    "inferfleet.cli.plan",
)


def main() -> None:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    app()


__all__ = ["app", "main"]
