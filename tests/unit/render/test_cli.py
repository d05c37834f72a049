"""`inferfleet render` and the decisions `inferfleet run` makes before starting kopf."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from inferfleet.cli import app
from inferfleet.cli import render as render_cli  # noqa: F401 - registers the commands
from inferfleet.cli import run as run_cli
from inferfleet.config import OperatorSettings
from tests.conftest import EXAMPLES_DIR
from tests.unit.render.validation import validate

RUNNER = CliRunner()


def test_render_prints_valid_multi_document_yaml() -> None:
    result = RUNNER.invoke(app, ["render", "-f", str(EXAMPLES_DIR / "llama-70b-chat.yaml")])
    assert result.exit_code == 0, result.output
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    # The example names a Gateway: its front door comes with it.
    assert {d["kind"] for d in documents} == {
        "Service",
        "PodDisruptionBudget",
        "PodMonitor",
        "Deployment",
        "DaemonSet",
        "InferencePool",
        "HTTPRoute",
        "ServiceAccount",
        "Role",
        "RoleBinding",
    }
    for document in documents:
        validate(document)


def test_render_exits_2_when_no_tier_can_serve(tmp_path: Path) -> None:
    body = yaml.safe_load((EXAMPLES_DIR / "llama-8b-chat.yaml").read_text())
    for tier in body["spec"]["tiers"]:
        tier["gpu"], tier["gpusPerNode"] = {"name": "tiny", "memoryGiB": 2}, 1
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(body))
    result = RUNNER.invoke(app, ["render", "-f", str(path)])
    assert result.exit_code == 2
    assert "no tier can serve" in result.output


def test_render_refuses_a_cache_path_outside_the_allowed_root(tmp_path: Path) -> None:
    body = yaml.safe_load((EXAMPLES_DIR / "llama-8b-chat.yaml").read_text())
    body["spec"]["cache"]["nodePath"] = "/srv/models"
    path = tmp_path / "outside.yaml"
    path.write_text(yaml.safe_dump(body))
    result = RUNNER.invoke(app, ["render", "-f", str(path)])
    assert result.exit_code == 2
    assert "spec.cache.nodePath" in result.output and "cannot be rendered" in result.output


def test_render_reports_a_bad_file_without_a_traceback(tmp_path: Path) -> None:
    result = RUNNER.invoke(app, ["render", "-f", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "Traceback" not in result.output


def options(**overrides: object) -> run_cli.RunOptions:
    arguments: dict[str, object] = {
        "namespaces": [],
        "all_namespaces": False,
        "peering": "inferfleet",
        "standalone": False,
        "webhook_host": None,
        "webhook_cert_dir": None,
        "verbose": False,
    }
    arguments.update(overrides)
    return run_cli.decide_options(OperatorSettings(namespaces=("from-env",)), **arguments)  # type: ignore[arg-type]


def test_kopf_never_runs_its_own_peering() -> None:
    # One election (the Lease, controller.kopf_gate): kopf's peering would be a second
    # one, and kopf.run(peering_name=...) makes it mandatory.
    for chosen in (options(standalone=True), options(peering="ha")):
        arguments = run_cli.kopf_run_arguments(chosen)
        assert arguments["standalone"] is True and arguments["peering_name"] is None
    assert options(peering="ha").peering_name == "ha" and not options(peering="ha").standalone


def test_run_namespaces_flags_win_over_settings() -> None:
    assert options().namespaces == ("from-env",) and not options().clusterwide
    assert options(namespaces=["a", "b"]).namespaces == ("a", "b")
    everywhere = options(all_namespaces=True)
    assert everywhere.clusterwide and everywhere.namespaces == ()
    with pytest.raises(ValueError, match="exclude"):
        options(all_namespaces=True, namespaces=["a"])


def test_run_peering_liveness_and_json_logs() -> None:
    chosen = options()
    assert chosen.liveness_endpoint == "http://0.0.0.0:8080/healthz"
    assert chosen.json_logs and chosen.peering_name == "inferfleet" and not chosen.standalone
    # Off a pod (the e2e suite, a laptop) the servers stay on loopback.
    local = options(bind_address="127.0.0.1")
    assert local.liveness_endpoint == "http://127.0.0.1:8080/healthz" and local.bind_address == "127.0.0.1"
    assert "inferfleet.handlers" in run_cli.HANDLER_MODULES
    # kopf refuses to run admission handlers without a webhook server: only with one.
    assert "inferfleet.admission_handlers" not in run_cli.handler_modules(chosen)
    assert "inferfleet.admission_handlers" in run_cli.handler_modules(options(webhook_host="op.svc"))
