#!/usr/bin/env python3
"""Weight fetcher throughput on loopback, against a plain `cp` of the same files.

Generates a model directory of a few GiB (safetensors shards plus config/tokenizer),
then in one run and on one filesystem:

- `cp -r` of the directory, and `cp -r` followed by `sync` (the fetcher fsyncs every file
  and directory before a revision becomes visible, so `cp && sync` is the like-for-like
  baseline; plain `cp` is reported too);
- `fetch(hf://...)` from a loopback hub (tests/integration/fetcher/hub_server.py, in its own
  process, sendfile), including huggingface_hub's metadata call, SHA-256 of every shard
  computed while writing and checked, resume bookkeeping, fsync and the atomic rename
  (shards written with O_DIRECT where the filesystem takes it, as in production);
- `fetch(file://...)` (the pvc:// path): copy_file_range, sizes checked, fsync, rename.

Every output is deleted after it is measured. Prints one JSON document; the target is
a throughput ratio to `cp && sync` of at least 0.8. `cpuSeconds` (user + system, per
run) says where the time went: `cp` and `sync` are the child processes, `hf`/`file`
this process during the fetch, `hfServer` the loopback hub. `loadAverage` at start and
end tells a quiet machine from a busy one (the ratios move with it). The kernel's
writeback threads (what `sync` waits for) are not counted anywhere.

    python hack/bench/cache_fetch.py                     # 3 GiB in 6 shards
    python hack/bench/cache_fetch.py --size-gib 1 --shards 4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from tests.integration.fetcher.hub_server import tiny_model_files  # noqa: E402

from inferfleet.caching.fetcher.fetch import FetchOptions, fetch  # noqa: E402

GIB = 1024**3
BLOCK_BYTES = 64 * 1024 * 1024
TARGET_RATIO = 0.8


def generate(root: Path, size_gib: float, shards: int) -> int:
    """A model directory: `shards` valid safetensors files totalling size_gib, plus configs."""
    root.mkdir(parents=True)
    for name, data in tiny_model_files().items():
        if not name.endswith(".safetensors"):
            (root / name).write_bytes(data)
    block = os.urandom(BLOCK_BYTES)  # incompressible; repeated to keep generation fast
    per_shard = int(size_gib * GIB) // shards // 8 * 8
    for index in range(shards):
        header = json.dumps(
            {"weight": {"dtype": "F32", "shape": [per_shard // 4], "data_offsets": [0, per_shard]}}
        ).encode()
        header += b" " * (-len(header) % 8)
        with (root / f"model-{index + 1:05d}-of-{shards:05d}.safetensors").open("wb") as handle:
            handle.write(len(header).to_bytes(8, "little") + header)
            left = per_shard
            while left > 0:
                chunk = block[: min(left, BLOCK_BYTES)]
                handle.write(chunk)
                left -= len(chunk)
    subprocess.run(["sync"], check=True)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_s(pid: int) -> float | None:
    """User + system seconds of another process (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, the child's CPU seconds)."""
    cpu = _cpu_s(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - start, _cpu_s(resource.RUSAGE_CHILDREN) - cpu


def start_hub(src: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = work / "hub-endpoint"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.fetcher.hub_server",
            str(src),
            "bench/model",
            str(port_file),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    deadline = time.monotonic() + 300  # the server hashes every shard once before serving
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the loopback hub did not start")
        time.sleep(0.1)
    return process, port_file.read_text().strip()


def measure_fetch(source: str, dest: Path, parallel: int, server_pid: int) -> dict[str, Any]:
    cpu = _cpu_s(resource.RUSAGE_SELF)
    server_cpu = _process_cpu_s(server_pid)
    start = time.perf_counter()
    result = fetch(source, dest, FetchOptions(parallel=parallel, progress_interval_s=3600))
    seconds = time.perf_counter() - start
    cpu = _cpu_s(resource.RUSAGE_SELF) - cpu
    server_after = _process_cpu_s(server_pid)
    server_s = server_after - server_cpu if server_cpu is not None and server_after is not None else None
    checks = sorted({check for entry in result.manifest.files for check in entry.verified})
    return {
        "seconds": round(seconds, 3),
        "cpuSeconds": round(cpu, 2),
        "serverCpuSeconds": round(server_s, 2) if server_s is not None else None,
        "bytes": result.manifest.total_bytes,
        "checks": checks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gib", type=float, default=3.0)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each method; the best is kept")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()

    needed = int(args.size_gib * GIB * 2.2)
    free = shutil.disk_usage(args.workdir).free
    if free < needed:
        raise SystemExit(f"need {needed / GIB:.1f} GiB free in {args.workdir}, have {free / GIB:.1f}")

    work = Path(tempfile.mkdtemp(prefix="inferfleet-bench-", dir=args.workdir))
    hub = None
    try:
        src = work / "src"
        total = generate(src, args.size_gib, args.shards)
        hub, endpoint = start_hub(src, work)
        os.environ["HF_ENDPOINT"] = endpoint
        runs: dict[str, list[float]] = {"cp": [], "cp+sync": [], "hf": [], "file": []}
        cpu: dict[str, list[float | None]] = {"cp": [], "sync": [], "hf": [], "hfServer": [], "file": []}
        details: dict[str, Any] = {}
        load_start = os.getloadavg()
        for attempt in range(args.repeat):
            out = work / f"out-{attempt}"
            cp_s, cp_cpu_s = timed(["cp", "-r", str(src), str(out)])
            sync_s, sync_cpu_s = timed(["sync"])
            runs["cp"].append(cp_s)
            runs["cp+sync"].append(cp_s + sync_s)
            cpu["cp"].append(round(cp_cpu_s, 2))
            cpu["sync"].append(round(sync_cpu_s, 2))
            shutil.rmtree(out)
            subprocess.run(["sync"], check=True)
            for name, source in (("hf", "hf://bench/model"), ("file", f"file://{src}")):
                dest = work / f"{name}-{attempt}" / "model"
                details[name] = measure_fetch(source, dest, args.parallel, hub.pid)
                runs[name].append(details[name]["seconds"])
                cpu[name].append(details[name]["cpuSeconds"])
                if name == "hf":
                    cpu["hfServer"].append(details[name]["serverCpuSeconds"])
                shutil.rmtree(dest.parent)
                subprocess.run(["sync"], check=True)
        best = {name: min(values) for name, values in runs.items()}
        rate = {name: total / seconds for name, seconds in best.items()}
        report = {
            "benchmark": "cache_fetch",
            "sizeBytes": total,
            "sizeGiB": round(total / GIB, 3),
            "shards": args.shards,
            "parallel": args.parallel,
            "repeat": args.repeat,
            "workdir": str(args.workdir),
            "host": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
            "secondsBest": {k: round(v, 3) for k, v in best.items()},
            "secondsAll": {k: [round(x, 3) for x in v] for k, v in runs.items()},
            "cpuSeconds": cpu,
            "loadAverage": {
                "start": [round(x, 2) for x in load_start],
                "end": [round(x, 2) for x in os.getloadavg()],
            },
            "bytesPerSecond": {k: round(v) for k, v in rate.items()},
            "checks": {name: details[name]["checks"] for name in ("hf", "file")},
            "ratioToCpSync": {name: round(rate[name] / rate["cp+sync"], 3) for name in ("hf", "file")},
            "ratioToCp": {name: round(rate[name] / rate["cp"], 3) for name in ("hf", "file")},
            "target": TARGET_RATIO,
        }
        report["meetsTarget"] = all(v >= TARGET_RATIO for v in report["ratioToCpSync"].values())
        print(json.dumps(report, indent=2))
    finally:
        if hub is not None:
            hub.terminate()
            hub.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
