"""`inferfleet signals`: what the autoscaler reads from Prometheus right now.

It runs the autoscaler's own queries (the same builder, the same parsing), so when a
decision looks wrong an SRE sees exactly the numbers the policy saw.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader
from inferfleet.autoscaling.promql.queries import QueryConfig
from inferfleet.autoscaling.promql.signals import SignalSnapshot, to_document
from inferfleet.cli.app import OutputFormat, app, emit, fail, stderr, stdout


def _cell(value: object, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}{suffix}"
    return f"{value}{suffix}"


def _table(snapshot: SignalSnapshot) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("NAMESPACE", "SERVICE", "TIER", "WAITING", "RUNNING", "TTFT P99", "KV", "RATE", "READY"):
        table.add_column(column, justify="left" if column in {"NAMESPACE", "SERVICE", "TIER"} else "right")
    for service in to_document(snapshot)["services"]:
        for tier in service["tiers"]:
            kv = tier["kvCacheUsage"]
            # Label values come from whatever Prometheus scraped: text, never markup.
            table.add_row(
                escape(service["namespace"]),
                escape(service["name"]),
                escape(tier["name"]),
                _cell(tier["waiting"]),
                _cell(tier["running"]),
                _cell(tier["ttftP99Ms"], " ms"),
                "-" if kv is None else f"{kv:.0%}",
                _cell(tier["requestRateRps"], "/s"),
                _cell(tier["readyReplicas"]),
            )
    return table


@app.command()
def signals(
    *,
    prometheus: Annotated[
        str,
        typer.Option(
            "--prometheus",
            envvar="INFERFLEET_PROMETHEUS_URL",
            help="Prometheus base URL (default: the operator setting INFERFLEET_PROMETHEUS_URL).",
        ),
    ],
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="table, json or yaml.")] = (
        OutputFormat.table
    ),
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace's services.")
    ] = None,
    rate_window_s: Annotated[
        int, typer.Option("--rate-window", min=1, help="Window (s) for rates and the TTFT quantile.")
    ] = QueryConfig.rate_window_s,
    timeout_s: Annotated[float, typer.Option("--timeout", min=0.1, help="Per-query timeout (s).")] = 5.0,
    bearer_token_file: Annotated[
        Path | None, typer.Option("--bearer-token-file", help="File holding a bearer token for Prometheus.")
    ] = None,
) -> None:
    """Print each InferenceService tier's signals as the autoscaler reads them."""
    if not prometheus.startswith(("http://", "https://")):
        fail(f"--prometheus must be an http(s) URL, got {prometheus!r}")
    config = PrometheusConfig(
        url=prometheus,
        timeout_s=timeout_s,
        bearer_token_file=None if bearer_token_file is None else str(bearer_token_file),
    )
    try:
        reader = SignalReader(PrometheusClient(config), QueryConfig(rate_window_s=rate_window_s))
    except ValueError as error:
        fail(str(error))
    try:
        snapshot = reader.read(time.time())
    except OSError as error:  # the bearer token file could not be read
        fail(f"cannot read the bearer token: {error}")
    finally:
        reader.close()
    if snapshot.unavailable:
        first = next(iter(snapshot.failed.values()))
        fail(f"no signal could be read from {prometheus}: {first}")
    for signal, why in sorted(snapshot.failed.items()):
        stderr.print(f"warning: {signal} unavailable: {why}", highlight=False, markup=False)
    if namespace is not None:
        snapshot = SignalSnapshot(
            time_s=snapshot.time_s,
            tiers={key: value for key, value in snapshot.tiers.items() if key.namespace == namespace},
            failed=snapshot.failed,
        )
    if output is OutputFormat.table:
        if not snapshot.tiers:
            stderr.print("no InferenceService series found (is the PodMonitor scraped?)", highlight=False)
            return
        stdout.print(_table(snapshot))
    else:
        emit(to_document(snapshot), output)
