"""What `inferfleet simulate` replays is what the operator deploys, under any settings.

For every bundled example and a matrix of operator settings (the default; an older vLLM
image, so another release's memory accounting; a catalog file that changes every GPU's
figures; a platform Gateway with scaling defaults of the SRE's), the design the
reconciler renders from (its compute step on the in-memory cluster) and the design the
simulator replays (the CLI's path, with the settings read from INFERFLEET_* and
`--catalog-file` as `inferfleet run` reads them) give the same replay: the same tiers
and figures, the same policy, the same front door. One CLI run per setting checks the
wiring end to end: its JSON is a replay of the operator's design.
"""

from __future__ import annotations

import copy
import importlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from inferfleet.api import load_all
from inferfleet.autoscaling.policy import POLICIES
from inferfleet.autoscaling.simulate.engine import simulate
from inferfleet.autoscaling.simulate.report import summarize
from inferfleet.autoscaling.simulate.setup import build_config
from inferfleet.autoscaling.tracefiles.read import load_trace
from inferfleet.cli import COMMAND_MODULES
from inferfleet.cli.app import app, load_settings
from inferfleet.cli.simulate import design_for_replay
from inferfleet.config import ENV_PREFIX, OperatorSettings
from inferfleet.design import Design
from inferfleet.reconcile import compute
from tests.conftest import example_paths
from tests.unit.reconcile.fixtures import Control

for _module in COMMAND_MODULES:  # register every subcommand, as main() does
    importlib.import_module(_module)

GPU_DATA = Path(__file__).resolve().parents[3] / "operator" / "inferfleet" / "catalog" / "data" / "gpus.yaml"

# Operator settings as INFERFLEET_* variables (what the chart sets), by case.
SETTINGS_CASES: dict[str, dict[str, str]] = {
    "default": {},
    "older-image": {"vllm_image": "vllm/vllm-openai:v0.11.0"},
    "platform-gateway-and-scaling-defaults": {
        "gateway_name": "shared",
        "gateway_namespace": "gateways",
        "headroom": "0.35",
        "predictive_enabled": "false",
        "scale_down_stabilization_s": "120",
        "cold_start_margin_s": "90",
        "queue_depth_per_replica": "6",
    },
    "slower-catalog": {},  # plus --catalog-file (below)
}


@pytest.fixture(scope="module")
def slower_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bundled GPU again, with 60 % of its memory bandwidth and compute: the same
    names, so the file replaces the built-in records."""
    document = yaml.safe_load(GPU_DATA.read_text(encoding="utf-8"))
    for gpu in document["gpus"]:
        for key in ("bandwidthTBs", "bf16Tflops", "fp8Tflops", "int8Tops"):
            if isinstance(gpu.get(key), int | float):
                gpu[key] = round(gpu[key] * 0.6, 3)
    path = tmp_path_factory.mktemp("catalog") / "slower-gpus.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _env(case: str) -> dict[str, str]:
    return {ENV_PREFIX + name.upper(): value for name, value in SETTINGS_CASES[case].items()}


def _catalog(case: str, slower_catalog: Path) -> Path | None:
    return slower_catalog if case == "slower-catalog" else None


def operators_design(body: Mapping[str, Any], settings: OperatorSettings) -> Design:
    """The design the reconciler renders from: its read, then its compute."""
    control = Control()
    namespace = str(body["metadata"]["namespace"])
    if namespace != "ml-serving":
        control.cluster.add_namespace(namespace)
    control.settings = settings
    control.restart()
    control.submit(copy.deepcopy(dict(body)))
    read = control.memo["reconciler"].read(namespace, str(body["metadata"]["name"]))
    assert read is not None
    designed = compute.compute(read[1]).design
    assert designed is not None and designed.deployable_plan is not None, designed and designed.invalid
    return designed


@pytest.mark.parametrize("case", sorted(SETTINGS_CASES))
@pytest.mark.parametrize("example", example_paths(), ids=lambda path: path.stem)
def test_the_simulator_replays_the_design_the_operator_deploys(
    example: Path, case: str, slower_catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _env(case).items():
        monkeypatch.setenv(name, value)
    settings = load_settings(_catalog(case, slower_catalog))  # as `inferfleet simulate` reads them
    body = yaml.safe_load(example.read_text(encoding="utf-8"))
    deployed = operators_design(body, settings)
    replayed = design_for_replay(load_all(example.read_text(encoding="utf-8"))[0], settings, None)
    assert replayed.plan == deployed.plan
    assert replayed.tier_images == deployed.tier_images
    assert replayed.front_door == deployed.front_door
    assert replayed.policy == deployed.policy
    assert build_config(replayed) == build_config(deployed)


def test_the_settings_cases_really_change_the_design(slower_catalog: Path) -> None:
    """Each non-default case moves something the replay reads, so the test above would
    catch a simulator that ignored it."""
    example = next(path for path in example_paths() if path.stem == "llama-8b-chat")
    service = load_all(example.read_text(encoding="utf-8"))[0]
    default = design_for_replay(service, OperatorSettings(), None)
    for case in sorted(set(SETTINGS_CASES) - {"default"}):
        environ = _env(case)
        settings = OperatorSettings.from_env(environ)
        catalog = _catalog(case, slower_catalog)
        if catalog is not None:
            settings = settings.model_copy(update={"catalog_file": str(catalog)})
        other = design_for_replay(service, settings, None)
        assert build_config(other) != build_config(default), case


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three minutes of chat-sized requests in the Azure format."""
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for index in range(540):
        seconds = index / 3
        stamp = f"2023-11-16 18:{17 + int(seconds // 60):02d}:{seconds % 60:09.6f}"
        lines.append(f"{stamp},{600 + index % 900},120")
    path = tmp_path_factory.mktemp("trace") / "short.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(SETTINGS_CASES))
def test_the_cli_replays_the_operators_design(case: str, slower_catalog: Path, short_trace: Path) -> None:
    example = next(path for path in example_paths() if path.stem == "llama-70b-chat")
    command = ["simulate", "-f", str(example), "--trace", str(short_trace), "-p", "inferfleet", "-o", "json"]
    catalog = _catalog(case, slower_catalog)
    if catalog is not None:
        command += ["--catalog-file", str(catalog)]
    result = CliRunner().invoke(app, command, env=_env(case))
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)

    settings = OperatorSettings.from_env(_env(case))
    if catalog is not None:
        settings = settings.model_copy(update={"catalog_file": str(catalog)})
    deployed = operators_design(yaml.safe_load(example.read_text(encoding="utf-8")), settings)
    workload = deployed.service.spec.workload
    trace = load_trace(short_trace, input_tokens=workload.input_tokens, output_tokens=workload.output_tokens)
    config = build_config(deployed, seed=0, timeline=False)
    replay = summarize(simulate(trace, config, POLICIES["inferfleet"], "inferfleet", clock=time.perf_counter))
    for document in (printed, replay):
        document.pop("wallSeconds", None)
        document.pop("workloadDrift", None)
    assert printed == replay
