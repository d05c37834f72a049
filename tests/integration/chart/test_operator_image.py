"""The operator image: hack/Dockerfile builds from a context that holds what it copies,
the package builds from exactly that context (pip, as the Dockerfile's first stage runs
it), and the chart, the operator's default and the Dockerfile's example tag name one
version. No Docker here: the checks are the parts of a build that can fail in this repo."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from inferfleet.config import OperatorSettings
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

DOCKERFILE = REPO_ROOT / "hack" / "Dockerfile"
IGNORE = REPO_ROOT / "hack" / "Dockerfile.dockerignore"
CHART = REPO_ROOT / "charts" / "inferfleet"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, comments and continuations folded."""
    out = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def in_context(relative: str) -> bool:
    """Whether the build context (.dockerignore: last matching pattern wins) keeps a path."""
    kept = True
    for raw in IGNORE.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = Path(relative).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        names = list(parts)
        matched = any(fnmatch.fnmatch(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(n, pattern[3:]) for n in names)
        )
        if matched:
            kept = negated
    return kept


def context_files() -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [path for path in tracked if in_context(path)]


def test_every_copy_source_is_in_the_build_context() -> None:
    copies = [args for word, args in instructions() if word == "COPY" and not args.startswith("--from")]
    sources = [source for args in copies for source in args.split()[:-1]]
    assert sources == ["pyproject.toml", "README.md", "LICENSE", "operator"]
    kept = context_files()
    for source in sources:
        assert (REPO_ROOT / source).exists(), source
        assert any(path == source or path.startswith(source + "/") for path in kept), source
    assert not [path for path in kept if "__pycache__" in path]
    # Nothing else goes into the context (no .venv, tests, or caches).
    assert {path.split("/")[0] for path in kept} == set(sources)


def test_the_image_runs_what_the_chart_expects() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    steps = instructions()
    install = next(args for word, args in steps if word == "RUN" and "pip install" in args)
    extra = re.search(r'"\.\[(\w+)\]"', install)
    assert extra and extra.group(1) in project["optional-dependencies"]
    entrypoint = next(args for word, args in steps if word == "ENTRYPOINT")
    assert entrypoint == '["inferfleet"]' and "inferfleet" in project["scripts"]
    bases = [args.split()[0] for word, args in steps if word == "FROM"]
    match = re.fullmatch(r"python:(\d+)\.(\d+)-slim", bases[-1])
    assert match and len(set(bases)) == 1
    minimum = re.search(r">=(\d+)\.(\d+)", project["requires-python"])
    assert minimum and (int(match[1]), int(match[2])) >= (int(minimum[1]), int(minimum[2]))
    user = next(args for word, args in steps if word == "USER")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    context = values["securityContext"]
    assert user == f"{context['runAsUser']}:{context['runAsGroup']}"


def test_one_version_names_the_image() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert chart["appVersion"] == project["version"]
    assert values["image"]["tag"] == ""  # the chart's appVersion
    image = f"{values['image']['repository']}:{chart['appVersion']}"
    assert OperatorSettings().operator_image == image
    assert f"docker build -f hack/Dockerfile -t {image} ." in DOCKERFILE.read_text()


def test_the_package_builds_from_the_build_context_alone(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for path in context_files():
        target = context / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / path, target)
    out = tmp_path / "wheel"
    # As the Dockerfile's first stage: pip builds the project (isolated, its declared
    # build backend), here only the wheel of the project itself.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(context)],
        check=True,
        timeout=600,
    )
    (wheel,) = out.glob("inferfleet-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "inferfleet = inferfleet.cli:main" in archive.read(entry_points).decode()
    # The package data the operator reads at run time is in it.
    for expected in ("inferfleet/render/templates/", "inferfleet/catalog/data/", "inferfleet/py.typed"):
        assert any(name.startswith(expected) for name in names), expected
