"""`inferfleet run`: the operator itself (kopf), with leader election and JSON logs.

Without `--standalone`, one coordination.k8s.io/v1 Lease named `--peering` (in the pod's
namespace) elects the replica that works: kopf's resource handlers run there only (the
others' watch streams are paused, `controller.kopf_gate`), and so do the background
loops (autoscaler, resync; `controller.leader`). kopf itself runs standalone on every
replica, without its own peering, so every replica serves the admission webhook and
/healthz. `--standalone` runs no election: one replica only.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from inferfleet.cli.app import app, fail
from inferfleet.config import OperatorSettings, SettingsInvalid

# Modules whose import registers kopf handlers. Add a feature's handlers with one line.
HANDLER_MODULES: tuple[str, ...] = ("inferfleet.handlers", "inferfleet.autoscaling.loop.kopf_handlers")
# Registered only with a webhook server (--webhook-host): kopf refuses admission
# handlers without one.
WEBHOOK_HANDLER_MODULES: tuple[str, ...] = ("inferfleet.admission_handlers",)

# Where the liveness, metrics and webhook servers listen: every interface in a pod.
DEFAULT_BIND_ADDRESS = "0.0.0.0"


@dataclass(frozen=True)
class RunOptions:
    """Everything `kopf.run` is called with, decided before anything starts."""

    clusterwide: bool
    namespaces: tuple[str, ...]
    liveness_endpoint: str
    # The leader-election Lease's name (the flag kept its name from kopf's peering).
    peering_name: str
    standalone: bool
    webhook_host: str | None
    webhook_cert_dir: Path | None
    bind_address: str
    json_logs: bool
    verbose: bool


def decide_options(
    settings: OperatorSettings,
    *,
    namespaces: list[str],
    all_namespaces: bool,
    peering: str,
    standalone: bool,
    webhook_host: str | None,
    webhook_cert_dir: Path | None,
    verbose: bool,
    bind_address: str = DEFAULT_BIND_ADDRESS,
) -> RunOptions:
    if all_namespaces and namespaces:
        raise ValueError("--all-namespaces and --namespace exclude each other")
    chosen = tuple(namespaces) or (() if all_namespaces else settings.namespaces)
    return RunOptions(
        clusterwide=not chosen,
        namespaces=chosen,
        liveness_endpoint=f"http://{bind_address}:{settings.liveness_port}/healthz",
        peering_name=peering,
        standalone=standalone,
        webhook_host=webhook_host,
        webhook_cert_dir=webhook_cert_dir,
        bind_address=bind_address,
        json_logs=settings.log_format == "json",
        verbose=verbose,
    )


def handler_modules(options: RunOptions) -> tuple[str, ...]:
    return HANDLER_MODULES + (WEBHOOK_HANDLER_MODULES if options.webhook_host else ())


def start(options: RunOptions, settings: OperatorSettings) -> None:
    import kopf

    kopf.configure(
        verbose=options.verbose,
        log_format=kopf.LogFormat.JSON if options.json_logs else kopf.LogFormat.FULL,
        log_refkey="k8s" if options.json_logs else None,
    )
    from inferfleet.controller import kopf_gate
    from inferfleet.controller.leader import LeaseConfig, memo_gate
    from inferfleet.controller.logs import log_admission_denials_as_info
    from inferfleet.handlers import WEBHOOK_IDS

    log_admission_denials_as_info(WEBHOOK_IDS)

    for module in handler_modules(options):
        importlib.import_module(module)
    memo = kopf.Memo(
        settings=settings,
        webhook_host=options.webhook_host,
        webhook_cert_dir=options.webhook_cert_dir,
        bind_address=options.bind_address,
        # The resync and autoscaler loops list InferenceServices where kopf watches them.
        namespaces=options.namespaces,
        # One replica alone needs no election.
        leader_election=None if options.standalone else LeaseConfig.from_environment(options.peering_name),
    )
    if not options.standalone:
        kopf_gate.install(memo_gate(memo))
    kopf.run(memo=memo, **kopf_run_arguments(options))


def kopf_run_arguments(options: RunOptions) -> dict[str, Any]:
    """`kopf.run`'s scope arguments: always standalone, without kopf's peering.

    A peering name would make kopf's peering mandatory, a second election beside the
    Lease (see the module docstring)."""
    return {
        "clusterwide": options.clusterwide,
        "namespaces": options.namespaces,
        "liveness_endpoint": options.liveness_endpoint,
        "peering_name": None,
        "standalone": True,
    }


@app.command("run")
def run_command(  # noqa: PLR0917 - typer maps each option to a parameter
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Namespace to watch (repeatable; globs ok).")
    ] = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Watch every namespace (cluster-wide).")
    ] = False,
    peering: Annotated[
        str, typer.Option(help="Name of the leader-election Lease the replicas share (pod's namespace).")
    ] = "inferfleet",
    priority: Annotated[
        int | None, typer.Option(hidden=True, help="Ignored: kopf's peering priorities are not used.")
    ] = None,
    standalone: Annotated[bool, typer.Option(help="No leader election: only for a single replica.")] = False,
    webhook_host: Annotated[
        str | None, typer.Option(help="DNS name the API server reaches the webhook at; none = no webhook.")
    ] = None,
    webhook_cert_dir: Annotated[
        Path | None, typer.Option(help="Directory with tls.crt/tls.key (cert-manager); else self-signed.")
    ] = None,
    bind_address: Annotated[
        str, typer.Option(help="Address the liveness, metrics and webhook servers listen on.")
    ] = DEFAULT_BIND_ADDRESS,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run the operator: reconcile InferenceServices into vLLM workloads until stopped."""
    del priority  # accepted so that older command lines still start
    try:
        settings = OperatorSettings.from_env()
        options = decide_options(
            settings,
            namespaces=namespace or [],
            all_namespaces=all_namespaces,
            peering=peering,
            standalone=standalone,
            webhook_host=webhook_host,
            webhook_cert_dir=webhook_cert_dir,
            verbose=verbose,
            bind_address=bind_address,
        )
    except (SettingsInvalid, ValueError) as error:
        fail(str(error))
    start(options, settings)
