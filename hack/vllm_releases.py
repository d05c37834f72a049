#!/usr/bin/env python3
"""Read what the planner needs to know about each vLLM release from that release itself.

Downloads each release's sdist from PyPI (or, for the releases published without one,
only the needed members of its wheel, through HTTP range requests), reads a handful of
its source files and writes operator/inferfleet/catalog/data/vllm_releases.json: per release,
each fact with the file (and line) it was read from. No vLLM code is imported or copied:
facts are found by parsing (Python's `ast`) and by patterns, and a fact that a release's
source does not show is recorded as null, never guessed.

Facts per release:
- `gpuMemoryUtilization`: the `--gpu-memory-utilization` default.
- `batchDefaults`: `--max-num-seqs` / `--max-num-batched-tokens` per GPU class and entry
  point (`api_server` = `vllm serve`, `llm_class` = `LLM(...)`), found by walking the
  release's default-picking function with each class's device name and memory.
- `samplerWarmup`: whether the V1 worker warms the sampler up after the KV cache is sized
  (`compile_or_warm_up_model`), with how many rows, and whether the profile also runs it.
- `cudaGraphs`: the largest captured batch (as the release's expression and its cap), and
  whether the graph pool is estimated and taken out of the budget before KV sizing
  (`profile_cudagraph_memory` in `determine_available_memory`, and the env default).
- `profiling`: how the worker counts non-KV memory (increase-only, or the free-memory
  drop plus the transient peak), and vLLM's own suggested redundancy buffer.
- `hybridKv`: the hybrid KV-cache manager's rules: which page kinds exist (sliding
  window, chunked local, MLA), how layers are grouped (the smaller count, or the larger
  when within a ratio) and how many tokens a sliding-window request holds.
- `blockSize`: the CUDA platform's default KV block.
- `kvOffload`: the CPU KV-cache tier: whether `--kv-offloading-size` exists (GiB, summed
  over the TP ranks), whether the OffloadingConnector exists for `--kv-transfer-config`
  and what its CPU spec is sized by (`num_cpu_blocks` per worker, or `cpu_bytes_to_use`),
  and whether the connector keeps the hybrid KV-cache manager on (`SupportsHMA`; without
  it, vLLM turns that manager off and sliding-window layers hold full-length KV).
- `compileCache`: where the engine keeps what it compiles: the `VLLM_CACHE_ROOT` variable,
  the `torch_compile_cache` directory under it (torch.compile's Inductor artifacts, absent
  before vLLM-compile existed), whether the release keeps a Triton cache directory the
  caller set (`TRITON_CACHE_DIR`; older releases point it into the compile directory
  themselves) and the switch that turns the cache off (`VLLM_DISABLE_COMPILE_CACHE`).
- `loadFormats`: the `--load-format` values the release's model loader registry accepts
  (`_LOAD_FORMAT_TO_MODEL_LOADER`, or the older `LoadFormat` enum).
- `modelRunnerV2`: which models Model Runner V2 (vllm/v1/worker/gpu/) runs by default
  (every model, dense models plus a list, or only a list of architectures), whether its
  `profile_cudagraph_memory` estimates the graph pool before KV sizing or returns 0, and
  the per-(sequence × vocabulary entry) bytes of the penalty state it keeps allocated
  for every sequence slot (`output_bin_counts`, `prompt_bin_mask`).

Usage:
  hack/vllm_releases.py                  # every minor's newest patch + the releases the
                                         # catalog names, cached under ~/.cache
  hack/vllm_releases.py --releases 0.34.0 --merge   # add one release to the table
  hack/vllm_releases.py --check          # exit 1 when a release the catalog names is
                                         # missing from the committed table
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import re
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "operator" / "inferfleet" / "catalog" / "data" / "vllm_releases.json"
CACHE = Path.home() / ".cache" / "inferfleet" / "vllm-releases"
INDEX_URL = "https://pypi.org/pypi/vllm/json"
OLDEST_MINOR = 2

# Source files facts are read from (paths inside the package; they moved between
# releases, so every candidate is listed).
WANTED = (
    "vllm/engine/arg_utils.py",
    "vllm/config.py",
    "vllm/config/__init__.py",
    "vllm/config/cache.py",
    "vllm/config/scheduler.py",
    "vllm/config/compilation.py",
    "vllm/config/vllm.py",
    "vllm/envs.py",
    "vllm/utils.py",
    "vllm/utils/__init__.py",
    "vllm/utils/mem_utils.py",
    "vllm/worker/worker.py",
    "vllm/v1/worker/gpu_worker.py",
    "vllm/v1/worker/gpu_model_runner.py",
    "vllm/v1/worker/gpu/model_runner.py",
    "vllm/v1/worker/gpu/sample/penalties.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/kv_cache_planning.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/sample/sampler.py",
    "vllm/platforms/cuda.py",
    "vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py",
    "vllm/v1/kv_offload/cpu.py",
    "vllm/compilation/backends.py",
    "vllm/compilation/compiler_interface.py",
    "vllm/model_executor/model_loader/__init__.py",
)

# Representative devices for the batch defaults: (class, device name as CUDA/ROCm report
# it, total memory in GiB as vLLM logs it, ROCm). A tier's GPU is mapped to the class
# by name (planner.releases).
DEVICES = (
    ("B200", "nvidia b200", 178.4, False),
    ("H200", "nvidia h200", 139.8, False),
    ("H100", "nvidia h100 80gb hbm3", 79.18, False),
    ("A100-80GB", "nvidia a100-sxm4-80gb", 79.15, False),
    ("A100-40GB", "nvidia a100-sxm4-40gb", 39.39, False),
    ("L40S", "nvidia l40s", 44.39, False),
    ("L4", "nvidia l4", 22.05, False),
    ("MI300X", "amd instinct mi300x", 191.45, True),
)
GIB = 1 << 30


# --- fetching -------------------------------------------------------------------------


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=300) as response:
        data: bytes = response.read()
        return data


def pypi_index() -> dict[str, Any]:
    CACHE.mkdir(parents=True, exist_ok=True)
    data = _get(INDEX_URL)
    (CACHE / "index.json").write_bytes(data)
    loaded: dict[str, Any] = json.loads(data)
    return loaded


def _version_key(text: str) -> tuple[int, ...]:
    release = text.split("rc", maxsplit=1)[0].split("post", maxsplit=1)[0]
    return tuple(int(part) for part in re.findall(r"\d+", release)[:4])


def stable_releases(index: dict[str, Any]) -> list[str]:
    return sorted(
        (v for v, files in index["releases"].items() if files and re.fullmatch(r"\d+\.\d+(\.\d+)*", v)),
        key=_version_key,
    )


def newest_per_minor(releases: Iterable[str]) -> list[str]:
    newest: dict[tuple[int, int], str] = {}
    for version in releases:
        key = _version_key(version)
        if key[0] == 0 and key[1] >= OLDEST_MINOR:
            newest[key[:2]] = version  # releases are sorted: the last one wins
    return list(newest.values())


class _RangeFile(io.RawIOBase):
    """A seekable read-only view of a remote file, fetched with HTTP range requests."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = _get(self.url, {"Range": f"bytes={self.pos}-{end - 1}"})
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _wanted(name: str) -> str | None:
    """The package-relative path of an archive member we read, else None."""
    for path in WANTED:
        if name.endswith("/" + path) or name == path:
            return path
    return None


def release_sources(index: dict[str, Any], version: str) -> tuple[dict[str, str], str]:
    """({package path: source text}, the artifact read)."""
    files = index["releases"][version]
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    out: dict[str, str] = {}
    if sdists:
        meta = sdists[0]
        url = urllib.parse.urljoin(INDEX_URL, meta["url"])
        cached = CACHE / meta["filename"]
        if not cached.exists() or cached.stat().st_size != meta["size"]:
            cached.write_bytes(_get(url))
        with tarfile.open(cached) as archive:
            for member in archive.getmembers():
                path = _wanted(member.name)
                handle = archive.extractfile(member) if path else None
                if path and handle is not None:
                    out[path] = handle.read().decode("utf-8", "replace")
        return out, meta["filename"]
    wheels = sorted((f for f in files if f["packagetype"] == "bdist_wheel"), key=lambda f: f["size"])
    meta = wheels[0]
    url = urllib.parse.urljoin(INDEX_URL, meta["url"])
    with zipfile.ZipFile(io.BufferedReader(_RangeFile(url, meta["size"]), 1 << 20)) as archive:
        for name in archive.namelist():
            path = _wanted(name)
            if path:
                out[path] = archive.read(name).decode("utf-8", "replace")
    return out, meta["filename"] + " (members read by HTTP range)"


# --- fact extraction ------------------------------------------------------------------


def _fact(value: Any, path: str, line: int | None, note: str = "") -> dict[str, Any]:
    fact: dict[str, Any] = {"value": value, "file": path}
    if line is not None:
        fact["line"] = line
    if note:
        fact["note"] = note
    return fact


def _search(
    sources: dict[str, str], paths: Iterable[str], pattern: str, flags: int = 0
) -> tuple[re.Match[str], str, int] | None:
    for path in paths:
        text = sources.get(path)
        if text is None:
            continue
        match = re.search(pattern, text, flags)
        if match:
            return match, path, text.count("\n", 0, match.start()) + 1
    return None


CONFIG_FILES = (
    "vllm/config/cache.py",
    "vllm/config/__init__.py",
    "vllm/config.py",
    "vllm/engine/arg_utils.py",
)


def gpu_memory_utilization(sources: dict[str, str]) -> dict[str, Any] | None:
    found = _search(
        sources,
        CONFIG_FILES,
        r"gpu_memory_utilization\s*:\s*float\s*=\s*(?:Field\(\s*default\s*=\s*)?([0-9.]+)",
    )
    if found is None:
        return None
    match, path, line = found
    return _fact(float(match.group(1)), path, line)


class _Unknown(Exception):
    """A condition the walker cannot decide for a device."""


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id == "GiB_bytes":
            return GIB
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr == "GiB_bytes":
            return GIB
        raise _Unknown(ast.unparse(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _evaluate(node.left, env) * _evaluate(node.right, env)
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v, env) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, env)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right, op = _evaluate(node.left, env), _evaluate(node.comparators[0], env), node.ops[0]
        ops: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
            ast.GtE: lambda a, b: a >= b,
            ast.Gt: lambda a, b: a > b,
            ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b,
            ast.Eq: lambda a, b: a == b,
            ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b,
        }
        if type(op) in ops:
            return ops[type(op)](left, right)
        raise _Unknown(ast.unparse(node))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = node.func.attr
        if name.startswith("is_"):  # current_platform.is_cuda(), .is_tpu(), ...
            platform = env["__platform__"]
            return (
                name
                in {"is_cuda": ("cuda",), "is_cuda_alike": ("cuda", "rocm"), "is_rocm": ("rocm",)}.get(
                    name, ()
                )
                and platform
                in {"is_cuda": ("cuda",), "is_cuda_alike": ("cuda", "rocm"), "is_rocm": ("rocm",)}[name]
            )
        if name == "lower":
            return _evaluate(node.func.value, env).lower()
    raise _Unknown(ast.unparse(node))


_ENTRY = {"OPENAI_API_SERVER": "api_server", "LLM_CLASS": "llm_class"}


def _usage_dict(node: ast.expr, env: dict[str, Any]) -> dict[str, int] | None:
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, int] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Attribute) and key.attr in _ENTRY:
            try:
                out[_ENTRY[key.attr]] = int(_evaluate(value, env))
            except _Unknown:
                return None
    return out or None


def _assigns_defaults(stmts: list[ast.stmt]) -> bool:
    return any(
        isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Store)
        and node.id.startswith("default_max_num")
        for stmt in stmts
        for node in ast.walk(stmt)
    )


def _walk(body: list[ast.stmt], env: dict[str, Any], found: dict[str, Any]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not _assigns_defaults(stmt.body) and not _assigns_defaults(stmt.orelse):
                continue  # a branch about something else (pooling models, prefix caching)
            if _evaluate(stmt.test, env):
                _walk(stmt.body, env, found)
            else:
                _walk(stmt.orelse, env, found)
        elif isinstance(stmt, ast.Try):
            # The device queries live in a try; its handler's constant fallbacks give
            # the names the walker was not seeded with (`is_gb10 = False`).
            for handler in stmt.handlers:
                for fallback in handler.body:
                    if (
                        isinstance(fallback, ast.Assign)
                        and isinstance(fallback.targets[0], ast.Name)
                        and isinstance(fallback.value, ast.Constant)
                    ):
                        env.setdefault(fallback.targets[0].id, fallback.value.value)
            _walk(stmt.body, env, found)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and value is not None
                    and target.id.startswith("default_max_num")
                ):
                    parsed = _usage_dict(value, env)
                    if parsed is not None:
                        found[target.id] = (parsed, stmt.lineno)


def _defaults_function(tree: ast.Module) -> ast.FunctionDef | None:
    best: ast.FunctionDef | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            text = ast.unparse(node)
            picks = all(
                word in text for word in ("default_max_num_batched_tokens", "UsageContext", "GiB_bytes")
            )
            if picks and (best is None or len(text) < len(ast.unparse(best))):
                best = node
    return best


def _field_default(sources: dict[str, str], name: str) -> tuple[int, str, int] | None:
    found = _search(
        sources,
        ("vllm/engine/arg_utils.py", "vllm/config/scheduler.py", "vllm/config.py"),
        rf"^\s+{name}\s*:\s*(?:Optional\[int\]|int)\s*=\s*(\d+)",
        re.MULTILINE,
    )
    if found is None:
        return None
    match, path, line = found
    return int(match.group(1)), path, line


def batch_defaults(sources: dict[str, str]) -> dict[str, Any] | None:
    """Per device class and entry point, as the release's V1 default-picking function
    decides them (None before V1 picked them by device)."""
    path = "vllm/engine/arg_utils.py"
    text = sources.get(path)
    if text is None:
        return None
    function = _defaults_function(ast.parse(text))
    if function is None:
        seqs = _field_default(sources, "max_num_seqs")
        if seqs is None:
            return None
        value, where, line = seqs
        return {
            "byDevice": None,
            "maxNumSeqs": _fact(value, where, line, "one default for every device and entry point"),
        }
    per_device: dict[str, Any] = {}
    for label, name, memory_gib, rocm in DEVICES:
        env = {
            "device_memory": int(memory_gib * GIB),
            "device_name": name,
            "__platform__": "rocm" if rocm else "cuda",
        }
        found: dict[str, Any] = {}
        try:
            _walk(function.body, env, found)
        except _Unknown as unknown:
            per_device[label] = {"unresolved": str(unknown)}
            continue
        tokens = found.get("default_max_num_batched_tokens")
        seqs_found = found.get("default_max_num_seqs")
        entry: dict[str, Any] = {}
        for entry_point in ("api_server", "llm_class"):
            entry[entry_point] = {
                "maxNumBatchedTokens": tokens[0].get(entry_point) if tokens else None,
                "maxNumSeqs": seqs_found[0].get(entry_point) if seqs_found else None,
            }
        entry["lines"] = [x[1] for x in (tokens, seqs_found) if x]
        per_device[label] = entry
    if all(
        v.get("api_server", {}).get("maxNumSeqs") is None
        for v in per_device.values()
        if "unresolved" not in v
    ):
        seqs = _field_default(sources, "max_num_seqs")
        if seqs is not None:
            for v in per_device.values():
                for entry_point in ("api_server", "llm_class"):
                    if entry_point in v:
                        v[entry_point]["maxNumSeqs"] = seqs[0]
    return {"byDevice": per_device, "file": path, "function": function.name, "line": function.lineno}


def _function_source(text: str, name: str) -> tuple[str, int] | None:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            segment = ast.get_source_segment(text, node) or ""
            return segment, node.lineno
    return None


def sampler_warmup(sources: dict[str, str]) -> dict[str, Any] | None:
    path = "vllm/v1/worker/gpu_worker.py"
    text = sources.get(path)
    if text is None:
        return None
    # 0.33 wraps the warm-up in `_compile_or_warm_up_model`.
    found = _function_source(text, "_compile_or_warm_up_model") or _function_source(
        text, "compile_or_warm_up_model"
    )
    if found is None:
        return None
    body, line = found
    after = "_dummy_sampler_run" in body
    rows = re.search(r"max_num_reqs\s*=\s*(min\([^)]*\))", body, re.DOTALL)
    runner = sources.get("vllm/v1/worker/gpu_model_runner.py", "")
    profile = _function_source(runner, "profile_run") if runner else None
    sampler = sources.get("vllm/v1/sample/sampler.py", "")
    float32 = re.search(r"logits\s*=\s*logits\.to\(torch\.float32\)", sampler)
    v2_path = "vllm/v1/worker/gpu/model_runner.py"
    v2_runner = sources.get(v2_path, "")
    v2_sampler = _function_source(v2_runner, "_dummy_sampler_run") if v2_runner else None
    config = sources.get("vllm/config/vllm.py", "")
    v2_switch = _function_source(config, "use_v2_model_runner") if config else None
    v2_default = bool(v2_switch and v2_switch[0].rstrip().endswith("return True"))
    return {
        "afterKvSizing": _fact(
            after, path, line, "the worker's warm-up runs after the KV cache is allocated"
        ),
        "modelRunnerV2Default": _fact(
            v2_default,
            "vllm/config/vllm.py",
            v2_switch[1] if v2_switch else None,
            "Model Runner V2 unless the model needs a feature it lacks",
        ),
        "v2ProfilePaysFp32Logits": _fact(
            bool(v2_sampler and "for_sampler_warmup" in v2_sampler[0]),
            v2_path,
            v2_sampler[1] if v2_sampler else None,
            "the profile's sampler pass also runs the fp32 logits pipeline the warm-up runs",
        )
        if v2_runner
        else None,
        "rows": _fact(
            re.sub(r"\s+", " ", rows.group(1)).replace("self.scheduler_config.", "") if rows else None,
            path,
            line,
        ),
        "profiledToo": _fact(
            bool(profile and "_dummy_sampler_run" in profile[0]),
            "vllm/v1/worker/gpu_model_runner.py",
            profile[1] if profile else None,
            "profile_run also samples, so its peak is inside the activation reserve",
        ),
        "logitsFloat32": _fact(
            bool(float32),
            "vllm/v1/sample/sampler.py",
            sampler.count("\n", 0, float32.start()) + 1 if float32 else None,
        ),
    }


def cuda_graphs(sources: dict[str, str]) -> dict[str, Any]:
    files = ("vllm/config/vllm.py", "vllm/config/__init__.py", "vllm/config.py", "vllm/config/scheduler.py")
    found = _search(sources, files, r"min\(\s*max_num_seqs\s*\*\s*(?:[\w.]+\s*\*\s*)?2\s*,\s*(\w+|\d+)\s*\)")
    largest = None
    if found is not None:
        match, path, line = found
        cap: Any = match.group(1)
        if not cap.isdigit():
            cap_match = re.search(rf"{cap}\s*=\s*\(?\s*(\d+)\s+if\s+[^\n]*?else\s+(\d+)", sources[path])
            cap = (
                {"blackwell": int(cap_match.group(1)), "other": int(cap_match.group(2))} if cap_match else cap
            )
        else:
            cap = int(cap)
        largest = _fact({"expression": re.sub(r"\s+", " ", match.group(0)), "cap": cap}, path, line)
    worker = sources.get("vllm/v1/worker/gpu_worker.py", "")
    determine = _function_source(worker, "determine_available_memory") if worker else None
    estimated = bool(determine and "profile_cudagraph_memory" in determine[0])
    env = _search(
        sources,
        ("vllm/envs.py",),
        r'"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"[^\n]*\n?[^\n]*?getenv\([^,]+,\s*"(\d)"',
    )
    default_on = None
    if env is not None:
        default_on = _fact(env[0].group(1) == "1", env[1], env[2])
    return {
        "largestCaptured": largest,
        "estimatedBeforeKv": _fact(
            estimated,
            "vllm/v1/worker/gpu_worker.py",
            determine[1] if determine else None,
            "determine_available_memory profiles the graph pool",
        ),
        "estimateDefaultOn": default_on,
    }


def profiling(sources: dict[str, str]) -> dict[str, Any]:
    files = ("vllm/utils/mem_utils.py", "vllm/utils/__init__.py", "vllm/utils.py")
    transient = _search(sources, files, r"transient_peak_headroom\s*=")
    increase = _search(sources, files, r"non_torch_increase\s*=")
    if transient:
        kind, where = "free-memory drop since start + transient torch peak", transient
    elif increase:
        kind, where = "weights + torch peak increase + non-torch increase", increase
    else:
        kind, where = "drop in free memory over the profile (no memory_profiling helper)", None
    redundancy = _search(
        sources,
        ("vllm/v1/worker/gpu_worker.py",),
        r"redundancy_buffer_memory\s*=\s*(\d+)\s*\*\s*\(1\s*<<\s*20\)",
    )
    return {
        "nonKvAccounting": _fact(kind, where[1] if where else "", where[2] if where else None),
        "redundancyBufferMib": _fact(int(redundancy[0].group(1)), redundancy[1], redundancy[2])
        if redundancy
        else None,
    }


def hybrid_kv(sources: dict[str, str]) -> dict[str, Any] | None:
    interface = sources.get("vllm/v1/kv_cache_interface.py")
    if interface is None:
        return None
    specs = sorted(set(re.findall(r"^class (\w+Spec)\(", interface, re.MULTILINE)))
    grouping = _search(
        sources,
        ("vllm/v1/core/kv_cache_planning.py", "vllm/v1/core/kv_cache_utils.py"),
        r"group_size\s*=\s*min(?:_num_layers\b|\()",
    )
    ratio = _search(
        sources,
        ("vllm/v1/core/kv_cache_planning.py", "vllm/v1/core/kv_cache_utils.py"),
        r"max_num_layers\s*<\s*min_num_layers\s*\*\s*([0-9.]+)",
    )
    window = re.search(r"class SlidingWindowSpec\(.*?(?=\nclass )", interface, re.DOTALL)
    window_tokens = None
    if window:
        body = window.group(0)
        expr = re.search(r"min\(\s*(self\.sliding_window\s*-\s*1\s*\+[^,]+),", body)
        if expr:
            line = interface.count("\n", 0, window.start() + expr.start()) + 1
            window_tokens = _fact(
                re.sub(r"\s+", " ", expr.group(1)).strip(), "vllm/v1/kv_cache_interface.py", line
            )
    return {
        "specs": _fact(specs, "vllm/v1/kv_cache_interface.py", None),
        "slidingWindowPages": "SlidingWindowSpec" in specs,
        "chunkedLocalPages": "ChunkedLocalAttentionSpec" in specs,
        "groupSizeIsSmallerCount": _fact(bool(grouping), grouping[1], grouping[2]) if grouping else None,
        "largerCountWithinRatio": _fact(float(ratio[0].group(1)), ratio[1], ratio[2]) if ratio else None,
        "slidingRequestTokens": window_tokens,
    }


_DTYPE_BYTES = {"int32": 4, "int64": 8, "float32": 4, "int16": 2, "bool": 1, "uint8": 1, "int8": 1}


def model_runner_v2(sources: dict[str, str]) -> dict[str, Any] | None:
    v2_path = "vllm/v1/worker/gpu/model_runner.py"
    runner = sources.get(v2_path)
    if runner is None:
        return None
    config_path = "vllm/config/vllm.py"
    config = sources.get(config_path, "")
    switch = _function_source(config, "use_v2_model_runner") if config else None
    default_fn = _function_source(config, "_is_default_v2_model_runner_model") if config else None
    listed = re.search(
        r"DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES\s*=\s*(?:frozenset\(\s*)?[\[{(]([^\]})]*)[\]})]",
        config,
        re.DOTALL,
    )
    scope: str | None = None
    if switch is not None:
        if "_is_default_v2_model_runner_model" not in switch[0]:
            scope = "all"
        elif default_fn is not None and re.search(r"or\s+not\s+model_config\.is_moe", default_fn[0]):
            scope = "dense-or-listed"
        elif default_fn is not None and "not model_config.is_quantized" in default_fn[0]:
            scope = "listed-dense-unquantized"
        else:
            scope = "listed"
    graphs = _function_source(runner, "profile_cudagraph_memory")
    returns_zero = bool(graphs and re.search(r"^\s*return 0\s*$", graphs[0], re.MULTILINE))
    penalties_path = "vllm/v1/worker/gpu/sample/penalties.py"
    penalties = sources.get(penalties_path, "")
    per_entry = 0.0
    first_line: int | None = None
    for name, divisor in (
        ("output_bin_counts", r"(?:self\.)?vocab_size"),
        ("prompt_bin_mask", r"cdiv\(\s*(?:self\.)?vocab_size\s*,\s*(\d+)\s*\)"),
    ):
        match = re.search(
            rf"self\.{name}\s*=\s*torch\.zeros\(\s*max_num_reqs\s*,\s*{divisor}\s*,\s*dtype=torch\.(\w+)",
            penalties,
        )
        if match is None:
            continue
        groups = match.groups()
        dtype = groups[-1]
        packed = int(groups[0]) if len(groups) > 1 else 1
        per_entry += _DTYPE_BYTES.get(dtype, 0) / packed
        line = penalties.count("\n", 0, match.start()) + 1
        first_line = line if first_line is None else min(first_line, line)
    return {
        "defaultFor": _fact(
            {
                "scope": scope,
                "architectures": sorted(re.findall(r'"(\w+)"', listed.group(1))) if listed else [],
            },
            config_path,
            switch[1] if switch else None,
            "all: every model unless it needs a feature V2 lacks; dense-or-listed: models without "
            "MoE layers plus the listed architectures; listed(-dense-unquantized): only those",
        ),
        "graphEstimate": _fact(
            bool(graphs) and not returns_zero,
            v2_path,
            graphs[1] if graphs else None,
            "profile_cudagraph_memory estimates the graph pool (false: it returns 0)",
        ),
        "penaltyStateBytesPerLogit": _fact(
            per_entry,
            penalties_path,
            first_line,
            "bytes kept per sequence slot and vocabulary entry (output_bin_counts, prompt_bin_mask)",
        ),
    }


def block_size(sources: dict[str, str]) -> dict[str, Any] | None:
    found = _search(
        sources,
        ("vllm/platforms/cuda.py", "vllm/config/cache.py", "vllm/config.py", "vllm/engine/arg_utils.py"),
        r"block_size\s*(?::\s*[\w\[\] |]+)?=\s*(16)\b",
    )
    return _fact(16, found[1], found[2]) if found else None


def kv_offload(sources: dict[str, str]) -> dict[str, Any]:
    """The CPU KV-cache tier a release offers (see the module docstring)."""
    connector_path = "vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py"
    size_flag = _search(sources, ("vllm/engine/arg_utils.py",), r"[\"']--kv-offloading-size[\"']")
    connector = _search(sources, (connector_path,), r"^class OffloadingConnector\(([^)]*)\)", re.MULTILINE)
    sized_by = _search(
        sources,
        ("vllm/v1/kv_offload/cpu.py",),
        r"extra_config\.get\(\s*[\"'](num_cpu_blocks|cpu_bytes_to_use)[\"']",
    )
    return {
        "sizeFlag": _fact(True, size_flag[1], size_flag[2]) if size_flag else None,
        "connector": _fact(True, connector[1], connector[2]) if connector else None,
        "connectorSizedBy": _fact(sized_by[0].group(1), sized_by[1], sized_by[2]) if sized_by else None,
        "keepsHybridKv": _fact("SupportsHMA" in connector[0].group(1), connector[1], connector[2])
        if connector
        else None,
    }


def compile_cache(sources: dict[str, str]) -> dict[str, Any]:
    """Where the engine keeps its compile artifacts (see the module docstring)."""
    root = _search(sources, ("vllm/envs.py",), r"[\"']VLLM_CACHE_ROOT[\"']\s*:")
    compile_dir = _search(
        sources,
        ("vllm/compilation/backends.py", "vllm/compilation/decorators.py"),
        r"[\"']torch_compile_cache[\"']",
    )
    interface = ("vllm/compilation/compiler_interface.py", "vllm/compilation/backends.py")
    keeps = _search(sources, interface, r"os\.environ\.get\(\s*[\"']TRITON_CACHE_DIR[\"']\s*\)")
    sets = _search(sources, interface, r"os\.environ\[\s*[\"']TRITON_CACHE_DIR[\"']\s*\]\s*=")
    disable = _search(sources, ("vllm/envs.py",), r"[\"']VLLM_DISABLE_COMPILE_CACHE[\"']\s*:")
    triton: dict[str, Any] | None = None
    if keeps:
        triton = _fact(True, keeps[1], keeps[2], "a TRITON_CACHE_DIR the caller set is kept")
    elif sets:
        triton = _fact(False, sets[1], sets[2], "TRITON_CACHE_DIR is pointed into the compile directory")
    return {
        "cacheRootEnv": _fact("VLLM_CACHE_ROOT", root[1], root[2]) if root else None,
        "torchCompileDir": _fact("torch_compile_cache", compile_dir[1], compile_dir[2])
        if compile_dir
        else None,
        "keepsCallerTritonDir": triton,
        "disableEnv": _fact("VLLM_DISABLE_COMPILE_CACHE", disable[1], disable[2]) if disable else None,
    }


def load_formats(sources: dict[str, str]) -> dict[str, Any] | None:
    """The `--load-format` values the release accepts (see the module docstring)."""
    registry = _search(
        sources,
        ("vllm/model_executor/model_loader/__init__.py",),
        r"_LOAD_FORMAT_TO_MODEL_LOADER[^=]*=\s*\{([^}]*)\}",
        re.DOTALL,
    )
    if registry:
        names = sorted(set(re.findall(r"[\"'](\w+)[\"']\s*:", registry[0].group(1))))
        return _fact(names, registry[1], registry[2], "keys of _LOAD_FORMAT_TO_MODEL_LOADER")
    enum = _search(
        sources,
        ("vllm/config/load.py", "vllm/config/__init__.py", "vllm/config.py"),
        r"class LoadFormat\([^)]*\):\s*\n((?:[ \t]+.*\n|\s*\n)+)",
    )
    if enum:
        member = r"^\s+[A-Z_0-9]+\s*=\s*[\"'](\w+)[\"']"
        names = sorted(set(re.findall(member, enum[0].group(1), re.MULTILINE)))
        return _fact(names, enum[1], enum[2], "values of the LoadFormat enum")
    return None


def facts(version: str, sources: dict[str, str], artifact: str) -> dict[str, Any]:
    return {
        "release": version,
        "artifact": artifact,
        "files": sorted(sources),
        "gpuMemoryUtilization": gpu_memory_utilization(sources),
        "batchDefaults": batch_defaults(sources),
        "samplerWarmup": sampler_warmup(sources),
        "cudaGraphs": cuda_graphs(sources) if "vllm/v1/worker/gpu_worker.py" in sources else None,
        "profiling": profiling(sources),
        "hybridKv": hybrid_kv(sources),
        "blockSize": block_size(sources),
        "modelRunnerV2": model_runner_v2(sources),
        "kvOffload": kv_offload(sources),
        "compileCache": compile_cache(sources),
        "loadFormats": load_formats(sources),
    }


# --- what the catalog names -----------------------------------------------------------


def named_releases() -> list[str]:
    """Releases the operator names: its default images and the benchmark's runs."""
    sys.path.insert(0, str(ROOT / "operator"))
    from inferfleet.config import OperatorSettings
    from inferfleet.planner.releases import version_from_image

    settings = OperatorSettings()
    names: list[str] = []
    for image in (settings.vllm_image, settings.vllm_image_amd):
        version = version_from_image(image)
        if version is not None:
            names.append(str(version))
    with (ROOT / "hack" / "bench" / "data" / "vllm_startup_logs.csv").open(encoding="utf-8") as handle:
        names.extend(row["vllm_version"] for row in csv.DictReader(handle))
    return sorted(set(names), key=_version_key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", nargs="*", help="only these releases (default: see the usage)")
    parser.add_argument("--merge", action="store_true", help="keep the table's other releases")
    parser.add_argument("--check", action="store_true", help="only check the table covers the named releases")
    parser.add_argument("--out", type=Path, default=TABLE)
    args = parser.parse_args()
    existing: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {"releases": {}}
    if args.check:
        missing = [v for v in named_releases() if v not in existing["releases"]]
        sys.stdout.write(json.dumps({"missing": missing}) + "\n")
        return 1 if missing else 0
    index = pypi_index()
    available = stable_releases(index)
    wanted = args.releases or sorted(
        set(newest_per_minor(available)) | {v for v in named_releases() if v in index["releases"]},
        key=_version_key,
    )
    table = dict(existing["releases"]) if args.merge else {}
    for version in wanted:
        sources, artifact = release_sources(index, version)
        table[version] = facts(version, sources, artifact)
        sys.stderr.write(f"{version}: {len(sources)} files from {artifact}\n")
    ordered = {v: table[v] for v in sorted(table, key=_version_key)}
    document = {
        "generatedBy": "hack/vllm_releases.py",
        "source": "each release's sdist (or wheel) on PyPI, read without importing or copying vLLM",
        "newestOnPyPI": available[-1],
        "releases": ordered,
    }
    args.out.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
