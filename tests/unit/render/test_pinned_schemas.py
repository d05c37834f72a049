"""The front door's schemas come from the pinned Go modules, say which, and are checked
against them on every run: the modules are fetched (and verified against go.sum) when no
cache holds them, so a fresh machine needs no Go toolchain and skips nothing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

SCRIPT = REPO_ROOT / "hack" / "update_frontdoor_schemas.py"


def _script() -> ModuleType:
    return load_script(str(SCRIPT.relative_to(REPO_ROOT)), "update_frontdoor_schemas")


def test_each_schema_names_the_module_version_go_mod_pins() -> None:
    script = _script()
    versions = script.pinned_versions()
    assert {"sigs.k8s.io/gateway-api", "sigs.k8s.io/gateway-api-inference-extension"} <= set(versions)
    for module, _path, _served, output in script.CRDS:
        header = (REPO_ROOT / "tests" / "schemas" / output).read_text().splitlines()[1]
        assert f"{module}@{versions[module]} " in header, output
    module, package, go_file, output = script.PICKER_CONFIG
    comment = json.loads((REPO_ROOT / "tests" / "schemas" / output).read_text())["$comment"]
    assert f"{module}@{versions[module]} {package}/{go_file}" in comment


def test_go_sum_holds_every_pinned_module() -> None:
    script = _script()
    hashes = script.pinned_hashes()
    for module, version in script.pinned_versions().items():
        assert hashes[(module, version)].startswith("h1:")


def test_schemas_match_the_pinned_modules() -> None:
    # No skip: the script reads the Go module cache or its own, else fetches the modules
    # through the Go module proxy; offline with neither it fails with the reason.
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False, timeout=600
    )
    assert result.returncode == 0, result.stderr


def _zip(module: str, version: str, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{module}@{version}/{name}", data)
    return buffer.getvalue()


@pytest.fixture
def empty_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomodcache"))
    monkeypatch.setenv("INFERFLEET_GOMOD_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("GOPROXY", "https://proxy.example/,direct")
    return tmp_path


def test_a_fetched_zip_is_cached_only_when_go_sum_pins_its_hash(empty_caches: Path) -> None:
    script = _script()
    good = _zip("example.com/m", "v1.0.0", {"a.txt": b"pinned"})
    bad = _zip("example.com/m", "v1.0.0", {"a.txt": b"replaced"})
    pinned = script.zip_hash(good)
    fetched: list[str] = []

    def serve(data: bytes) -> Callable[[str], bytes]:
        def fetch(url: str) -> bytes:
            fetched.append(url)
            return data

        return fetch

    with pytest.raises(script.ModuleMismatch, match=r"go\.sum pins"):
        script.module("example.com/m", "v1.0.0", pinned, fetch=serve(bad))
    assert not (empty_caches / "own").exists()
    found = script.module("example.com/m", "v1.0.0", pinned, fetch=serve(good))
    assert found.read("a.txt") == "pinned"
    assert fetched == ["https://proxy.example/example.com/m/@v/v1.0.0.zip"] * 2
    # Next time from the cache, without the proxy; a cached zip that does not match is not used.
    assert script.module("example.com/m", "v1.0.0", pinned, fetch=serve(bad)).origin.startswith(
        str(empty_caches / "own")
    )
    (empty_caches / "own" / "example.com" / "m" / "@v" / "v1.0.0.zip").write_bytes(bad)
    with pytest.raises(script.ModuleMismatch):
        script.module("example.com/m", "v1.0.0", pinned, fetch=serve(bad))


def test_the_go_module_cache_is_read_with_its_escaped_paths(empty_caches: Path) -> None:
    script = _script()
    data = _zip("github.com/Example/M", "v1.0.0", {"a.txt": b"x"})
    cached = empty_caches / "gomodcache" / "cache" / "download" / "github.com" / "!example" / "!m" / "@v"
    cached.mkdir(parents=True)
    (cached / "v1.0.0.zip").write_bytes(data)

    def no_network(url: str) -> bytes:
        raise AssertionError(f"fetched {url}")

    found = script.module("github.com/Example/M", "v1.0.0", script.zip_hash(data), fetch=no_network)
    assert found.read("a.txt") == "x"


def test_offline_and_uncached_the_check_fails_and_says_why(
    empty_caches: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOPROXY", "off")
    assert _script().main(["--check"]) == 2
    message = capsys.readouterr().err
    assert "sigs.k8s.io/" in message and "could not be fetched" in message and "GOPROXY='off'" in message
