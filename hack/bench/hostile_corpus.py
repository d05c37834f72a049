#!/usr/bin/env python3
"""The hostile corpus (tests/unit/security/corpus.py) through validate, plan and render.

Each entry runs as the real CLI in a child process, one process per command and file,
under a wall-clock limit and the operator pod's memory limit (512 MiB, the chart's
default; RLIMIT_AS is set a little higher since Python maps more than it touches).
Counts what the issue asks of the corpus: runs that printed a traceback, runs over
10 s, runs that died on the limits, and security-relevant entries refused with their
field path. Prints one JSON document.

    python hack/bench/hostile_corpus.py [--limit-s 10] [--jobs 2] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from tests.unit.security.corpus import entries  # noqa: E402

COMMANDS = ("validate", "plan", "render")
LIMIT_S = 10.0
# The operator container's limit in the chart; address space gets headroom over it.
MEMORY_LIMIT_BYTES = 512 * 1024 * 1024
ADDRESS_SPACE_BYTES = 4 * MEMORY_LIMIT_BYTES


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_one(command: str, path: Path, limit_s: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, "-c", "from inferfleet.cli import main; main()", command, "-f", str(path)],
            capture_output=True,
            text=True,
            timeout=limit_s * 3,
            preexec_fn=_limits,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        wall_s = time.perf_counter() - started
        output = result.stdout + result.stderr
        code: int | None = result.returncode
    except subprocess.TimeoutExpired:
        wall_s, output, code = time.perf_counter() - started, "", None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "command": command,
        "exitCode": code,
        "seconds": round(wall_s, 3),
        "traceback": "Traceback" in output,
        "output": output,
        "childMaxRssMiB": round(usage.ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit-s", type=float, default=LIMIT_S)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="only entries whose name contains this")
    args = parser.parse_args()

    corpus = [entry for entry in entries() if args.only in entry[0]]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="inferfleet-hostile-") as scratch:
        jobs = []
        for index, (name, text, path) in enumerate(corpus):
            spec = Path(scratch) / f"{index:03d}.yaml"
            spec.write_text(text, encoding="utf-8")
            jobs.extend((index, name, path, spec, command) for command in COMMANDS)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda job: run_one(job[4], job[3], args.limit_s), jobs))
        for (index, name, path, spec, _command), result in zip(jobs, results, strict=True):
            refused_with_path = None
            if path is not None and result["command"] == "validate":
                refused_with_path = result["exitCode"] == 2 and f"{spec}: {path}: " in result["output"]
            result.update(entry=index, name=name, refusedWithPath=refused_with_path)
            runs.append(result)

    seconds = sorted(run["seconds"] for run in runs)
    slowest = max(runs, key=lambda run: run["seconds"])
    security = [run for run in runs if run["refusedWithPath"] is not None]
    report = {
        "benchmark": "hostile_corpus",
        "entries": len(corpus),
        "runs": len(runs),
        "commands": list(COMMANDS),
        "limitS": args.limit_s,
        "memoryLimitMiB": MEMORY_LIMIT_BYTES // 2**20,
        "tracebacks": sum(run["traceback"] for run in runs),
        "overLimit": sum(run["seconds"] > args.limit_s or run["exitCode"] is None for run in runs),
        "crashed": sum(run["exitCode"] not in (0, 2) for run in runs),
        "exitCodes": {str(code): sum(run["exitCode"] == code for run in runs) for code in (0, 1, 2, None)},
        "securityEntries": len(security),
        "securityRefusedWithPath": sum(bool(run["refusedWithPath"]) for run in security),
        "secondsMedian": round(statistics.median(seconds), 3),
        "secondsP99": round(seconds[min(len(seconds) - 1, int(0.99 * len(seconds)))], 3),
        "secondsMax": slowest["seconds"],
        "slowest": f"{slowest['command']} {slowest['name']}",
        "childMaxRssMiB": max(run["childMaxRssMiB"] for run in runs),
        "failures": [
            {k: run[k] for k in ("name", "command", "exitCode", "seconds")}
            for run in runs
            if run["traceback"] or run["exitCode"] not in (0, 2) or run["refusedWithPath"] is False
        ],
        "host": {"cpus": os.cpu_count(), "loadAverage": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(report, indent=2))
    return 0 if report["tracebacks"] == report["overLimit"] == report["crashed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
