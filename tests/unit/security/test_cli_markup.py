"""User-controlled text never reaches Rich as markup: a path or a name with `[/x]` is printed as is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.unit.api.samples import base_spec, document

MARKUP = "[/x]"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from inferfleet.cli import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_missing_file_whose_path_holds_markup_is_reported_verbatim(tmp_path: Path) -> None:
    path = tmp_path / f"odd{MARKUP}" / "nope.yaml"
    result = _run("validate", "-f", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"odd{MARKUP}/nope.yaml: no such file" in result.stderr


def test_valid_file_whose_path_holds_markup_is_reported_verbatim(tmp_path: Path) -> None:
    folder = tmp_path / f"a{MARKUP}[bold]"
    folder.mkdir(parents=True)
    path = folder / "ok.yaml"
    path.write_text(yaml.safe_dump(document(base_spec())), encoding="utf-8")
    result = _run("validate", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert f"{path}: sample: valid" in result.stdout


def test_plan_table_prints_an_inline_gpu_name_holding_markup(tmp_path: Path) -> None:
    spec = base_spec()
    spec["tiers"] = [
        {
            "name": "odd",
            "gpu": {"name": f"GPU{MARKUP}[red]", "memoryGiB": 80, "bf16Tflops": 900, "memoryBandwidthTBs": 3},
        }
    ]
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(document(spec)), encoding="utf-8")
    result = _run("plan", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"GPU{MARKUP}[red]" in result.stdout
