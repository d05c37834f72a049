#!/usr/bin/env python3
"""One autoscaler loop over many InferenceServices against a real Prometheus.

Starts Debian's `prometheus` on loopback scraping the vLLM metrics emulator, which
exposes one emulated pod per tier for N InferenceServices x 3 tiers in a single
scrape target (series labelled as the PodMonitor relabelling would). Installs the N
services in the in-memory cluster as the reconciler would leave them, then times
`Autoscaler.run_once` (signals for every service, decide() per service, status
writes, scale calls, events) for each N. Prints one JSON document.

Targets (issue 8): at 500 services x 3 tiers a loop takes <= 2 s, and the number of
Prometheus queries per loop is the same for every N.

    python hack/bench/autoscaler_loop.py                    # N = 50 and 500
    python hack/bench/autoscaler_loop.py --services 500 --loops 5
    # Decisions a sync period apart (Prometheus still read at the real time): after
    # some 300 requests per service the request mix is judged (WorkloadDrift), as in an
    # operator that has run for minutes; the last loops show what a steady mix costs.
    python hack/bench/autoscaler_loop.py --services 500 --loops 40 --period-s 15
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from tests.toolkit import a_scaled_service, a_small_tier_plan  # noqa: E402
from tests.toolkit import reconciled as tk  # noqa: E402

from inferfleet.autoscaling.loop.runner import Autoscaler  # noqa: E402
from inferfleet.autoscaling.prometheus.reader import PrometheusClient, PrometheusConfig, SignalReader  # noqa: E402
from inferfleet.autoscaling.prometheus.testkit import EmulatedPod, PrometheusServer, VllmEmulator  # noqa: E402
from inferfleet.autoscaling.promql.queries import QueryConfig  # noqa: E402
from inferfleet.autoscaling.promql.signals import SignalSnapshot  # noqa: E402
from inferfleet.cluster import InMemoryCluster  # noqa: E402
from inferfleet.config import OperatorSettings  # noqa: E402

TIERS = ("l4", "a100", "h100")
SCRAPE_INTERVAL_S = 2.0
QUERIES = QueryConfig(rate_window_s=10, max_sample_age_s=10)
TARGET_LOOP_S = 2.0


def namespace_of(index: int) -> str:
    return f"team-{index % 10}"


def add_pods(emulator: VllmEmulator, services: int) -> None:
    now = time.time()
    for index in range(services):
        for tier_index, tier in enumerate(TIERS):
            pod = emulator.add_pod(
                EmulatedPod(f"svc-{index}-{tier}-0", namespace_of(index), f"svc-{index}", tier)
            )
            # A spread of loads: most services idle, every seventh one queueing.
            waiting = 20.0 if index % 7 == 0 and tier_index == 0 else 0.0
            pod.set(
                now_s=now,
                waiting=waiting,
                running=2.0 + tier_index,
                kv_cache_usage=0.3,
                rps=0.5 + (index % 5) * 0.2,
                ttft_mix=[(0.08, 0.95), (0.6, 0.05)],
            )


def serve_emulator(services: int, conn: Connection) -> None:
    """Child process: the emulator renders ~45k lines per scrape, which must not compete
    with the measured loop for the parent's interpreter lock."""
    with VllmEmulator() as emulator:
        add_pods(emulator, services)
        conn.send((emulator.address, len(emulator.pods)))
        conn.recv()  # blocks until the parent is done


def install(cluster: InMemoryCluster, services: int) -> None:
    tiers = [{"name": tier, "gpu": "L4", "minReplicas": 1, "maxReplicas": 8} for tier in TIERS]
    for index in range(services):
        service = a_scaled_service(f"svc-{index}", namespace_of(index)).tiers(*tiers)
        tk.install(cluster, service, plans=[a_small_tier_plan(tier) for tier in TIERS])


class RealTimeReader(SignalReader):
    """Reads Prometheus at the real time whatever time the loop decides at (--period-s)."""

    def read(self, now_s: float) -> SignalSnapshot:
        return super().read(time.time())


def measure(url: str, services: int, loops: int, period_s: float = 0.0) -> dict[str, Any]:
    cluster = InMemoryCluster()
    install(cluster, services)
    reader = (RealTimeReader if period_s > 0 else SignalReader)(
        PrometheusClient(PrometheusConfig(url, timeout_s=10)), QUERIES, history_retention_s=14 * 86_400
    )
    autoscaler = Autoscaler(cluster, reader, OperatorSettings())
    start_s = time.time()
    walls: list[float] = []
    queries: list[int] = []
    ranges: list[int] = []
    decided: list[int] = []
    writes: list[int] = []
    scaled = 0
    first: dict[str, Any] = {}
    try:
        for loop in range(loops + 1):
            started = time.perf_counter()
            if period_s > 0:
                report = autoscaler.run_once(start_s + loop * period_s)
            else:
                report = autoscaler.run_once(force=True)
            wall_s = time.perf_counter() - started
            if report.metrics_unavailable or report.errors:
                raise RuntimeError(f"loop failed: {report.errors or 'metrics unavailable'}")
            tiers_with_data = sum(1 for _ in reader.read(time.time()).tiers) if loop == 0 else None
            if loop == 0:
                # The first loop also backfills the two-week rate history (chunked range queries).
                first = {
                    "wallS": round(wall_s, 3),
                    "queries": report.queries,
                    "historyRangeQueries": report.range_queries,
                    "scaleCalls": report.scaled,
                    "tiersWithSignals": tiers_with_data,
                }
                continue
            walls.append(wall_s)
            queries.append(report.queries - report.range_queries)
            ranges.append(report.range_queries)
            decided.append(report.decided)
            writes.append(report.status_writes)
            scaled += report.scaled
    finally:
        autoscaler.close()
    return {
        "services": services,
        "tiers": services * len(TIERS),
        "firstLoop": first,
        "loops": loops,
        "wallPerLoopS": {
            "median": round(statistics.median(walls), 3),
            "max": round(max(walls), 3),
        },
        # Instant queries (the signals): the same count whatever the number of services.
        "instantQueriesPerLoop": sorted(set(queries)),
        # History: one small range query when a minute has completed since the last loop.
        "historyRangeQueriesPerLoop": sorted(set(ranges)),
        "servicesDecidedPerLoop": sorted(set(decided)),
        # Status PATCHes: only decisions that changed something (or the 5-minute heartbeat).
        "statusWritesPerLoop": sorted(set(writes)),
        "scaleCalls": scaled,
        **(
            {
                "periodS": period_s,
                "statusWritesByLoop": writes,
                # Services whose request mix has been judged, by verdict.
                "workloadDrift": dict(
                    Counter(
                        f"{c['status']} {c['reason']}"
                        for obj in cluster.kinds("InferenceService")
                        for c in (obj.get("status") or {}).get("conditions") or []
                        if c.get("type") == "WorkloadDrift"
                    )
                ),
            }
            if period_s > 0
            else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--loops", type=int, default=5, help="timed loops after the first (warm-up) loop")
    parser.add_argument(
        "--period-s",
        type=float,
        default=0.0,
        help="decide each loop this much later than the last (default: back to back, every service forced)",
    )
    args = parser.parse_args()
    binary = shutil.which("prometheus")
    if binary is None:
        print(json.dumps({"error": "prometheus binary not found (apt-get install prometheus)"}))
        return 2
    largest = max(args.services)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=serve_emulator, args=(largest, child), daemon=True)
    process.start()
    try:
        address, pods = parent.recv()
        scrape = {
            "job_name": "vllm-all",
            "honor_labels": True,
            "scrape_interval": f"{SCRAPE_INTERVAL_S:g}s",
            "scrape_timeout": f"{SCRAPE_INTERVAL_S:g}s",
            "static_configs": [{"targets": [address]}],
        }
        with PrometheusServer([scrape], binary=binary, scrape_interval_s=SCRAPE_INTERVAL_S) as prometheus:
            prometheus.wait_for_targets(1, timeout_s=60)
            # Two rate windows of scrapes so every rate is defined.
            time.sleep(2 * QUERIES.rate_window_s)
            results = [
                measure(prometheus.url, count, args.loops, args.period_s) for count in sorted(args.services)
            ]
    finally:
        parent.send("stop")
        process.join(timeout=10)
    big = results[-1]
    document = {
        "benchmark": "autoscaler_loop",
        "prometheus": "real (Debian package), loopback, scrape interval 2s",
        "emulatedPods": pods,
        "results": results,
        "targets": {
            "loopWallS": TARGET_LOOP_S,
            "loopWithinTarget": big["wallPerLoopS"]["max"] <= TARGET_LOOP_S,
            "constantQueries": len({tuple(r["instantQueriesPerLoop"]) for r in results}) == 1
            and all(max(r["historyRangeQueriesPerLoop"]) <= 1 for r in results),
        },
    }
    print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
