#!/usr/bin/env python3
"""How long the front door's shadow check takes when tenants write the largest routes
the Gateway API allows (16 hostnames, 128 matches each: its CRD's limits), against a
service with 64 adapters (65 matches in `model` mode, one otherwise). Prints one JSON object.

The operator reads each list of HTTPRoutes once (`readSeconds`: `render.route_matching.observe`,
shared by every pass for 10 s); each reconcile pass of a service on a Gateway then runs
`reconcile.frontdoor_status.shadows` over them (`passSeconds`). Times both for `--routes` such
routes.

    python hack/bench/route_shadowing.py --routes 1000 [--match path|hostname|model]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from inferfleet.api import parse
from inferfleet.config import OperatorSettings
from inferfleet.design import topology
from inferfleet.reconcile import frontdoor_status
from inferfleet.render import frontdoor
from inferfleet.render import route_matching as routes

GATEWAY_NAMESPACE, GATEWAY = "gateway-system", "shared"


def hostile_route(index: int) -> dict[str, Any]:
    """As many hostnames and matches as the API allows, none of which covers the victim's
    requests with more precedence (the check has to look at every pair)."""
    hostnames = [f"*.h{index}-{n}.example.com" for n in range(16)]
    matches = [
        {
            "path": {"type": "PathPrefix", "value": f"/t{index}/{n}"},
            "headers": [{"name": "X-Gateway-Model-Name", "value": f"m{n}"}],
        }
        for n in range(128)
    ]
    rules = [{"matches": matches[i : i + 64], "backendRefs": [{"name": "x", "port": 80}]} for i in (0, 64)]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": f"r{index}",
            "namespace": f"team-{index}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "parentRefs": [{"name": GATEWAY, "namespace": GATEWAY_NAMESPACE}],
            "hostnames": hostnames,
            "rules": rules,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--match", choices=["path", "hostname", "model"], default="model")
    args = parser.parse_args()
    settings = OperatorSettings(
        gateway_name=GATEWAY,
        gateway_namespace=GATEWAY_NAMESPACE,
        front_door_match=args.match,
        front_door_hostname="{name}.{namespace}.llm.example.com",
    )
    adapters = [{"name": f"a{n}", "source": f"hf://org/lora-{n}"} for n in range(64)]
    service = parse(
        {
            "apiVersion": "inferfleet.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": {"name": "victim", "namespace": "team-a"},
            "spec": {
                "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "adapters": adapters},
                "workload": {
                    "inputTokens": {"p50": 600, "p95": 2000, "p99": 4000},
                    "outputTokens": {"p50": 200, "p95": 600, "p99": 1000},
                    "peakRequestsPerSecond": 4,
                },
                "tiers": [{"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 2}],
            },
        }
    )
    # Only the mode and the Gateway matter to the check.
    front = topology.FrontDoor("gateway", topology.Gateway(GATEWAY, GATEWAY_NAMESPACE, None), (), None)
    listed = [hostile_route(i) for i in range(args.routes)]
    read_seconds, seconds = [], []
    found: list[Any] = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        observed = [routes.observe(route) for route in listed]  # once per list, for every pass
        read_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        found = frontdoor_status.shadows(
            service, front, settings, None, gateway_routes=observed, now="2026-02-01T00:00:00Z"
        )
        seconds.append(time.perf_counter() - start)
    print(
        json.dumps(
            {
                "routes": args.routes,
                "match": args.match,
                "victimMatches": len(frontdoor.route_shape(service, settings).matches),
                "matchesPerRoute": 128,
                "hostnamesPerRoute": 16,
                "shadowedBy": len(found),
                "readSecondsMedian": round(statistics.median(read_seconds), 3),
                "passSecondsMedian": round(statistics.median(seconds), 3),
                "passSecondsMax": round(max(seconds), 3),
                "host": {"cpus": os.cpu_count(), "loadAverage": [round(x, 2) for x in os.getloadavg()]},
            }
        )
    )


if __name__ == "__main__":
    main()
