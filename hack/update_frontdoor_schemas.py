#!/usr/bin/env python3
"""Write the front door's pinned schemas to tests/schemas/ from the pinned Go modules.

The versions are the `require` lines of hack/controlplane/crds/go.mod (the same pins the
e2e control plane installs the CRDs from). A module is read from its zip, found in the Go
module cache's download cache ($GOMODCACHE, else $GOPATH/pkg/mod, else ~/go/pkg/mod), else
in this script's own cache (~/.cache/inferfleet/gomod; INFERFLEET_GOMOD_CACHE moves it),
else fetched from the Go module proxy ($GOPROXY's first URL, proxy.golang.org by default)
into that cache. Whatever its origin, a zip is used only when its h1: hash is the one
go.sum pins (Go's dirhash), so neither a Go toolchain nor trust in a cache is needed.

Written: the served version's openAPIV3Schema of InferencePool and HTTPRoute
(descriptions dropped: the tests need the structure, the CEL rules and the bounds), and
the endpoint picker's EndpointPickerConfig as a JSON schema of the Inference Extension's Go
types (json names; every object closed, because the picker's loader decodes strictly and
refuses a field it does not know).

    python hack/update_frontdoor_schemas.py          # rewrite tests/schemas/
    python hack/update_frontdoor_schemas.py --check  # exit 1 when stale, 2 when a module cannot be had
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
MODULE_DIR = REPO / "hack" / "controlplane" / "crds"
SCHEMAS = REPO / "tests" / "schemas"
DEFAULT_PROXY = "https://proxy.golang.org"
FETCH_TIMEOUT_S = 120.0
# (module, CRD file inside it, served version, output file)
CRDS: tuple[tuple[str, str, str, str], ...] = (
    (
        "sigs.k8s.io/gateway-api-inference-extension",
        "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
        "v1",
        "inferencepool-v1.yaml",
    ),
    (
        "sigs.k8s.io/gateway-api",
        "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml",
        "v1",
        "httproute-v1.yaml",
    ),
)
# The endpoint picker's configuration: (module, package directory, Go file, output file).
PICKER_CONFIG = (
    "sigs.k8s.io/gateway-api-inference-extension",
    "apix/config/v1alpha1",
    "endpointpickerconfig_types.go",
    "endpointpickerconfig-v1alpha1.json",
)


class ModuleUnavailable(RuntimeError):
    """A pinned module could not be had (no cache holds it and the proxy could not be reached)."""


class ModuleMismatch(RuntimeError):
    """A module zip whose hash is not the one go.sum pins."""


def pinned_versions() -> dict[str, str]:
    """module path -> version, from go.mod's require block."""
    versions: dict[str, str] = {}
    inside = False
    for line in (MODULE_DIR / "go.mod").read_text().splitlines():
        stripped = line.split("//")[0].strip()
        if stripped.startswith("require ("):
            inside = True
        elif inside and stripped == ")":
            inside = False
        elif inside and stripped:
            module, version = stripped.split()[:2]
            versions[module] = version
    return versions


def pinned_hashes(go_sum: Path = MODULE_DIR / "go.sum") -> dict[tuple[str, str], str]:
    """(module, version) -> the h1: hash go.sum pins for its zip (not its go.mod)."""
    hashes: dict[tuple[str, str], str] = {}
    for line in go_sum.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and not parts[1].endswith("/go.mod"):
            hashes[(parts[0], parts[1])] = parts[2]
    return hashes


def escape(path: str) -> str:
    """A module path or version as the module cache and the proxy spell it (an upper-case
    letter becomes '!' and its lower case)."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


def zip_hash(data: bytes) -> str:
    """Go's dirhash.Hash1 of a module zip: the SHA-256 of the sorted lines
    "<sha256 hex>  <file name>" over its files, base64, prefixed "h1:"."""
    summary = hashlib.sha256()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in sorted(info.filename for info in archive.infolist()):
            if "\n" in name:
                raise ModuleMismatch(f"file name with a newline in the zip: {name!r}")
            summary.update(f"{hashlib.sha256(archive.read(name)).hexdigest()}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def go_module_cache() -> Path:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return Path(gopath) / "pkg" / "mod" if gopath else Path.home() / "go" / "pkg" / "mod"


def own_cache() -> Path:
    if os.environ.get("INFERFLEET_GOMOD_CACHE"):
        return Path(os.environ["INFERFLEET_GOMOD_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "inferfleet" / "gomod"


def proxies() -> list[str]:
    """The HTTP(S) proxies of $GOPROXY, in order ("direct" and "off" fetch nothing here)."""
    setting = os.environ.get("GOPROXY", DEFAULT_PROXY)
    return [
        entry.rstrip("/") for entry in re.split(r"[,|]", setting) if entry.startswith(("https://", "http://"))
    ]


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
        data: bytes = answer.read()
    return data


@dataclass(frozen=True)
class Module:
    """One pinned module's zip, checked against go.sum."""

    path: str
    version: str
    data: bytes
    origin: str

    def read(self, relative: str) -> str:
        with zipfile.ZipFile(io.BytesIO(self.data)) as archive:
            return archive.read(f"{self.path}@{self.version}/{relative}").decode()


def module(
    path: str,
    version: str,
    expected_hash: str,
    *,
    fetch: Callable[[str], bytes] = _download,
) -> Module:
    """The module's zip from a cache or the proxy, refused unless its hash is `expected_hash`."""
    relative = Path(escape(path)) / "@v" / f"{escape(version)}.zip"
    for cache in (go_module_cache() / "cache" / "download", own_cache()):
        candidate = cache / relative
        if candidate.is_file():
            data = candidate.read_bytes()
            if zip_hash(data) == expected_hash:
                return Module(path, version, data, str(candidate))
    failures = []
    for proxy in proxies():
        url = f"{proxy}/{escape(path)}/@v/{escape(version)}.zip"
        try:
            data = fetch(url)
        except (urllib.error.URLError, OSError) as error:
            failures.append(f"{url}: {error}")
            continue
        found = zip_hash(data)
        if found != expected_hash:
            raise ModuleMismatch(f"{url} has {found}, go.sum pins {expected_hash}")
        target = own_cache() / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
            out.write(data)
        Path(out.name).chmod(0o644)
        Path(out.name).replace(target)  # atomic: a reader never sees half a zip
        return Module(path, version, data, url)
    reason = "; ".join(failures) or f"GOPROXY={os.environ.get('GOPROXY', '')!r} names no HTTP(S) proxy"
    raise ModuleUnavailable(
        f"{path}@{version} is in no module cache ({go_module_cache()}, {own_cache()}) and could not be "
        f"fetched: {reason}"
    )


def pinned_module(path: str) -> Module:
    version = pinned_versions()[path]
    expected = pinned_hashes().get((path, version))
    if expected is None:
        raise ModuleMismatch(f"go.sum has no hash for {path} {version}")
    return module(path, version, expected)


# --- the CRD schemas ----------------------------------------------------------------------


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _strip(value) for key, value in node.items() if key != "description"}
    if isinstance(node, list):
        return [_strip(item) for item in node]
    return node


def extracted(source: Module, path: str, served: str) -> str:
    crd = yaml.safe_load(source.read(path))
    entry = next(v for v in crd["spec"]["versions"] if v["name"] == served)
    schema = _strip(entry["schema"]["openAPIV3Schema"])
    header = (
        f"# {crd['spec']['group']}/{served} {crd['spec']['names']['kind']}: the openAPIV3Schema of\n"
        f"# {source.path}@{source.version} {path}\n"
        "# (descriptions dropped). Generated by hack/update_frontdoor_schemas.py; do not edit.\n"
    )
    return header + yaml.safe_dump(schema, sort_keys=True, width=100)


# --- the endpoint picker's configuration, from its Go types -------------------------------

# A resource.Quantity (the Kubernetes OpenAPI pattern) and a Go time.Duration string.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
_SCALARS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "int32": {"type": "integer"},
    "int64": {"type": "integer"},
    "float64": {"type": "number"},
    "json.RawMessage": {},
    "resource.Quantity": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]},
    "metav1.Duration": {"type": "string", "pattern": DURATION_PATTERN},
}
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
_SLICE = re.compile(r"^type (\w+) \[\](\S+)$", re.MULTILINE)
_FIELD = re.compile(r"^\s+(\w+(?:\.\w+)?)\s*(\S*)\s+`json:\"([^\"]*)\"`", re.MULTILINE)


def go_type_schemas(source: str) -> dict[str, dict[str, Any]]:
    """Each struct (and slice type) of a Go file as a closed JSON schema of its json fields."""
    structs = dict(_STRUCT.findall(source))
    slices = dict(_SLICE.findall(source))
    schemas: dict[str, dict[str, Any]] = {}

    def of(go_type: str) -> dict[str, Any]:
        go_type = go_type.lstrip("*")
        if go_type.startswith("[]"):
            return {"type": "array", "items": of(go_type[2:])}
        if go_type in _SCALARS:
            return dict(_SCALARS[go_type])
        if go_type in slices:
            return {"type": "array", "items": of(slices[go_type])}
        if go_type in structs:
            return struct(go_type)
        raise ValueError(f"no JSON schema for the Go type {go_type!r}")

    def struct(name: str) -> dict[str, Any]:
        if name not in schemas:
            properties: dict[str, Any] = {}
            for field_name, go_type, tag in _FIELD.findall(structs[name]):
                json_name = tag.split(",")[0]
                if json_name == "-":
                    continue
                if ",inline" in tag and field_name == "metav1.TypeMeta":
                    properties.update(apiVersion={"type": "string"}, kind={"type": "string"})
                    continue
                properties[json_name or field_name] = of(go_type)
            schemas[name] = {"type": "object", "properties": properties, "additionalProperties": False}
        return schemas[name]

    for name in structs:
        struct(name)
    return schemas


def picker_config_schema(source: Module) -> str:
    """The EndpointPickerConfig JSON schema, with its apiVersion and kind pinned."""
    _module, package, go_file, _output = PICKER_CONFIG
    types = go_type_schemas(source.read(f"{package}/{go_file}"))
    register = source.read(f"{package}/zz_generated.register.go")
    group = re.search(r'const GroupName = "([^"]+)"', register)
    version = package.rsplit("/", 1)[-1]
    if group is None:
        raise ValueError(f"no GroupName in {package}/zz_generated.register.go")
    schema = dict(types["EndpointPickerConfig"])
    schema["properties"] = {
        **schema["properties"],
        "apiVersion": {"const": f"{group.group(1)}/{version}"},
        "kind": {"const": "EndpointPickerConfig"},
    }
    schema["required"] = ["apiVersion", "kind"]
    document = {
        "$comment": (
            f"The Go types of {source.path}@{source.version} {package}/{go_file} (json names; "
            "closed objects: the picker's loader decodes strictly). Generated by "
            "hack/update_frontdoor_schemas.py; do not edit."
        ),
        **schema,
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def outputs() -> dict[str, str]:
    """Output file name -> its text, from the pinned modules."""
    texts: dict[str, str] = {}
    modules: dict[str, Module] = {}
    for path, crd_file, served, output in CRDS:
        modules.setdefault(path, pinned_module(path))
        texts[output] = extracted(modules[path], crd_file, served)
    path, *_rest, output = PICKER_CONFIG
    modules.setdefault(path, pinned_module(path))
    texts[output] = picker_config_schema(modules[path])
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare with the checked-in files")
    args = parser.parse_args(argv)
    try:
        texts = outputs()
    except (ModuleUnavailable, ModuleMismatch) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stale = []
    for output, text in texts.items():
        target = SCHEMAS / output
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target.relative_to(REPO)))
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(REPO)}")
    if stale:
        print("stale (run hack/update_frontdoor_schemas.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
