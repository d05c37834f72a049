#!/usr/bin/env python3
"""Look into one case of the autoscaler benchmark: minute by minute, what each setting
held and what it cost, and why our policy moved.

hack/bench/autoscale.py says whether a baseline setting dominates our default in a case
(spec, trace, declaration, load); this says where the difference comes from. It replays
the case exactly as the benchmark does (same scaling of the trace, same declaration, same
plan) under the settings named, and prints per minute the trace's arrivals and, per
setting, each tier's desired and Ready replicas at the minute's last tick, the GPUs it
paid for and how many of the minute's arrivals missed the TTFT SLO (rejected and never
served ones included, as in the benchmark). `--why` adds every replica change our policy
made, with the signal and the reason it gives.

    python hack/bench/autoscale_case.py --spec 8b --case honest --scale 10 \\
        --setting inferfleet --setting static-peak:0.55 --setting reactive-util:0.7 \\
        --minutes 0-20 --why
    python hack/bench/autoscale_case.py ... -o json     # the same, as one JSON document

Settings: `inferfleet` (as shipped) or `inferfleet:H` (a fixed headroom H), and each
baseline at a value of its knob: `static-peak:S` (S times the replicas the peak minute
needs), `reactive-util:T` (target utilization), `queue-only:Q` (waiting requests per
replica); a baseline without a value runs as shipped. The trace is the one bundled with
the package unless `--trace` names another.
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "operator"))

from inferfleet.autoscaling.policy import POLICIES  # noqa: E402
from inferfleet.autoscaling.policy.types import Recommendation, ScalingContext, ScalingState  # noqa: E402
from inferfleet.autoscaling.simulate.engine import SimResult, simulate  # noqa: E402
from inferfleet.autoscaling.simulate.report import summarize  # noqa: E402
from inferfleet.autoscaling.simulate.setup import build_config  # noqa: E402


def _bench() -> ModuleType:
    """hack/bench/autoscale.py, whose preparation of a case this replays unchanged."""
    name = "inferfleet_bench_autoscale"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "autoscale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Decision:
    """One replica change our policy made, and why."""

    time_s: float
    tier: str
    from_replicas: int
    to_replicas: int
    signal: str
    reason: str


def parse_setting(text: str) -> tuple[str, float | None]:
    """`policy[:knob]` → (policy, knob); ValueError says what is accepted."""
    policy, _, knob = text.partition(":")
    if policy not in POLICIES:
        known = ", ".join(POLICIES)
        raise ValueError(
            f"setting {text!r}: unknown policy {policy!r} (known: {known}; the oracle is not replayed here)"
        )
    if not knob:
        return policy, None
    try:
        value = float(knob)
    except ValueError:
        raise ValueError(f"setting {text!r}: the knob must be a number, not {knob!r}") from None
    if not np.isfinite(value) or value < 0.0:
        raise ValueError(f"setting {text!r}: the knob must be a finite number of at least 0")
    return policy, value


def parse_minutes(text: str | None, span_min: int) -> range:
    """`A-B` (minutes, B excluded) → a range within the trace; None: the whole trace."""
    if text is None:
        return range(span_min)
    first, sep, last = text.partition("-")
    try:
        start, stop = int(first), int(last) if sep else int(first) + 1
    except ValueError:
        raise ValueError(f"--minutes {text!r}: expected A-B, minutes from the trace's start") from None
    if not 0 <= start < stop:
        raise ValueError(f"--minutes {text!r}: expected 0 <= A < B")
    return range(start, min(stop, span_min))


def _recording(policy: Any, decisions: list[Decision], epoch_s: float) -> Any:
    """`policy`, noting every replica change it recommends."""

    def recorded(ctx: ScalingContext, state: ScalingState | None) -> tuple[Recommendation, ScalingState]:
        recommendation, new_state = policy(ctx, state)
        for tier in recommendation.tiers:
            if tier.current is not None and tier.replicas != tier.current:
                decisions.append(
                    Decision(
                        ctx.now_s - epoch_s, tier.name, tier.current, tier.replicas, tier.signal, tier.reason
                    )
                )
        return recommendation, new_state

    return recorded


def replay(
    spec_path: Path, trace_path: Path, case: str, scale: int, settings: list[str], *, seed: int = 0
) -> dict[str, Any]:
    """Replay the case under each setting; every replay keeps its timeline and (ours) its decisions."""
    bench = _bench()
    parsed = [parse_setting(text) for text in settings]
    service, trace = bench.prepare(spec_path, trace_path, scale, seed)
    if case != "honest":
        service = bench.misdeclare(service, trace, keep_context=case == "misdeclared")
    config = build_config(bench.design_for(service), seed=seed, timeline=True)
    runs: dict[str, tuple[SimResult, dict[str, Any], list[Decision]]] = {}
    for text, (policy, knob) in zip(settings, parsed, strict=True):
        setting = bench.Setting(policy, knob)
        replay_config = bench.setting_config(setting, service, config, seed=seed, timeline=True)
        function, replay_config = bench.policy_for(setting, replay_config, trace)
        decisions: list[Decision] = []
        if policy == "inferfleet":
            function = _recording(function, decisions, trace.epoch_s)
        result = simulate(trace, replay_config, function, policy)
        runs[text] = (result, summarize(result), decisions)
    gpus = {tier.figures.name: tier.figures.gpus_per_replica for tier in config.tiers}
    return {"trace": trace, "runs": runs, "gpus": gpus, "ttft_slo_ms": config.ttft_slo_ms}


def per_minute(replayed: dict[str, Any], minutes: range) -> list[dict[str, Any]]:
    """One row per minute: the arrivals, and per setting what it held and who was late.
    Counted per minute in one pass and each minute's last tick found by bisection, so a
    14-day rate series costs what an hour does per row."""
    trace = replayed["trace"]
    minute_of = np.floor(trace.arrival_s / 60.0).astype(np.int64)
    size = max(minutes.stop, int(minute_of.max(initial=-1)) + 1)
    arrivals = np.bincount(minute_of, minlength=size)
    late = {
        text: np.bincount(minute_of[result.ttft_s * 1000.0 > result.ttft_slo_ms], minlength=size)
        for text, (result, _, _) in replayed["runs"].items()
    }
    rows = []
    for minute in minutes:
        per_s = round(float(arrivals[minute]) / 60.0, 3)
        row: dict[str, Any] = {"minute": minute, "arrivalsPerSecond": per_s}
        for text, (result, _, _) in replayed["runs"].items():
            timeline = result.timeline
            assert timeline is not None
            entry: dict[str, Any] = {"late": int(late[text][minute])}
            last = bisect.bisect_left(timeline.time_s, (minute + 1) * 60.0) - 1
            if last >= 0 and timeline.time_s[last] >= minute * 60.0:
                entry["desired"] = {name: values[last] for name, values in timeline.desired.items()}
                entry["ready"] = {name: values[last] for name, values in timeline.ready.items()}
                entry["gpus"] = sum(
                    count * replayed["gpus"][name] for name, count in entry["desired"].items()
                )
            row[text] = entry
        rows.append(row)
    return rows


def document(replayed: dict[str, Any], minutes: range, why: bool) -> dict[str, Any]:
    runs = replayed["runs"]
    out: dict[str, Any] = {
        "settings": {
            text: {
                "sloAttainment": summary["sloAttainment"],
                "sloAttainmentWithItl": summary.get("sloAttainmentWithItl"),
                "gpuHours": summary["gpuHours"],
                "scaleUps": summary["scaleUps"],
                "scaleDowns": summary["scaleDowns"],
                "rejected": summary["rejected"],
            }
            for text, (_, summary, _) in runs.items()
        },
        "minutes": per_minute(replayed, minutes),
    }
    if why:
        out["decisions"] = {
            text: [
                {
                    "timeSeconds": round(d.time_s, 1),
                    "tier": d.tier,
                    "from": d.from_replicas,
                    "to": d.to_replicas,
                    "signal": d.signal,
                    "reason": d.reason,
                }
                for d in decisions
                if minutes.start * 60.0 <= d.time_s < minutes.stop * 60.0
            ]
            for text, (_, _, decisions) in runs.items()
            if text.partition(":")[0] == "inferfleet"
        }
    return out


def table(doc: dict[str, Any]) -> str:
    """The document for a person: a summary line per setting, the minutes, the decisions."""
    lines = []
    settings = list(doc["settings"])
    for text, s in doc["settings"].items():
        both = s["sloAttainmentWithItl"]
        lines.append(
            f"{text}: within TTFT {s['sloAttainment']:.2%}"
            + ("" if both is None else f", within TTFT and ITL {both:.2%}")
            + f", {s['gpuHours']:.3f} GPU-h, {s['scaleUps']} up / {s['scaleDowns']} down"
        )
    lines.append("")
    width = 24
    lines.append("min  arr/s  " + "".join(f"{text[:width]:>{width}}" for text in settings))
    lines.append(" " * 12 + "".join(f"{'desired:ready gpus late':>{width}}" for _ in settings))
    for row in doc["minutes"]:
        cells = []
        for text in settings:
            entry = row[text]
            held = "/".join(f"{entry['desired'][n]}:{entry['ready'][n]}" for n in entry.get("desired", {}))
            cells.append(f"{held} {entry.get('gpus', '-')} {entry['late']}".rjust(width))
        lines.append(f"{row['minute']:3d} {row['arrivalsPerSecond']:6.2f}  " + "".join(cells))
    for text, decisions in doc.get("decisions", {}).items():
        lines.append("")
        lines.append(f"{text}: replica changes")
        for d in decisions:
            lines.append(
                f"  {d['timeSeconds']:7.0f} s {d['tier']} {d['from']}->{d['to']} {d['signal']}: {d['reason']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bench = _bench()
    specs = sorted(bench.SPECS.glob("*.yaml"))
    parser.add_argument("--spec", default=specs[0].stem, help="a benchmark spec (part of its file name)")
    parser.add_argument("--trace", type=Path, help="a trace file (default: the one the package bundles)")
    parser.add_argument("--case", default="honest", choices=bench.CASES)
    parser.add_argument(
        "--scale", type=int, default=bench.SCALES[0], help="replicas of the first tier at peak"
    )
    parser.add_argument("--setting", action="append", help="policy[:knob], repeatable (default: inferfleet)")
    parser.add_argument("--minutes", help="A-B: only these minutes of the trace (B excluded)")
    parser.add_argument(
        "--why", action="store_true", help="list every replica change our policy made, and why"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    chosen = [p for p in specs if args.spec in p.name]
    if len(chosen) != 1:
        parser.error(f"--spec {args.spec!r} names {len(chosen)} of {', '.join(p.stem for p in specs)}")
    trace_path = args.trace or next(iter(bench.find_traces(bench.BUNDLED_TRACES, None)))
    if not trace_path.is_file():
        parser.error(f"--trace {trace_path}: no such file")
    if args.scale < 1:
        parser.error("--scale must be at least 1")
    settings = args.setting or ["inferfleet"]
    try:
        for text in settings:
            parse_setting(text)
        parse_minutes(args.minutes, sys.maxsize)  # refuse a malformed range before replaying
        replayed = replay(chosen[0], trace_path, args.case, args.scale, settings, seed=args.seed)
        minutes = parse_minutes(args.minutes, int(replayed["trace"].span_s // 60.0) + 1)
    except ValueError as error:
        parser.error(str(error))
    doc = document(replayed, minutes, args.why)
    if args.output == "json":
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
