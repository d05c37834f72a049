#!/usr/bin/env python3
"""Which of the autoscaler benchmark's dominated cases are systematic, and which luck.

One replay of an hour can hand a case to whoever had luck in a given minute.
`hack/bench/autoscale.py --seed N` replays other draws of the same traces (which requests
a scaled trace keeps or copies, and where the copies land); this reads the documents of
several seeds and says, per case (spec, trace, declaration, load, part) and definition of
"within the SLO", on how many seeds a baseline setting dominated our default, and which
settings did so on every one of them.

    for seed in 0 1 2; do
        python hack/bench/autoscale.py --traces azure --jobs 2 --seed $seed > azure-$seed.json
    done
    python hack/bench/autoscale_seeds.py azure-0.json azure-1.json azure-2.json
    python hack/bench/autoscale_seeds.py ... -o table      # one line per dominated case

The documents must come from distinct seeds of the same sweep (same cases, same operator
settings); anything else is refused with the reason.

Beside ours, the same count for each fixed margin of the perfect-foresight oracle (the
documents' `oracleDominance`): where even the oracle's best margin is dominated on some
draw, knowing every arrival does not meet the criterion either.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFINITIONS = ("ttft", "ttftAndItl")
CASE_FIELDS = ("spec", "trace", "case", "replicasAtPeak", "headroom", "part")
# Operator settings every document must share: seeds of one sweep, not two sweeps.
SHARED_SETTINGS = ("interruptionHoldMinutes", "capacitySlos", "warmUpMinutes")


class SeedsError(ValueError):
    """Documents that cannot be compared seed by seed; the message says why."""


def _case_key(frontier: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(frontier.get(name) for name in CASE_FIELDS)


def _verdicts(document: dict[str, Any], source: str) -> dict[tuple[Any, ...], dict[str, list[str]]]:
    """Per case and definition, the baseline settings that dominate our default there."""
    frontiers = document.get("frontiers")
    if not isinstance(frontiers, list):
        raise SeedsError(f"{source}: no frontiers (a document of hack/bench/autoscale.py with its sweep?)")
    verdicts: dict[tuple[Any, ...], dict[str, list[str]]] = {}
    for frontier in frontiers:
        key = _case_key(frontier)
        if key in verdicts:
            raise SeedsError(f"{source}: case {key} judged twice")
        try:
            verdicts[key] = {
                definition: list(frontier[definition]["dominatedBy"]) for definition in DEFINITIONS
            }
        except (KeyError, TypeError):
            raise SeedsError(
                f"{source}: case {key} has no dominatedBy for {', '.join(DEFINITIONS)}"
            ) from None
    return verdicts


def combine(documents: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The per-seed verdicts of `documents` (source name, document) side by side."""
    if len(documents) < 2:
        raise SeedsError("give at least two documents, each from its own --seed")
    seeds: list[int] = []
    for source, document in documents:
        seed = document.get("seed")
        if not isinstance(seed, int):
            raise SeedsError(f"{source}: no seed recorded (rerun hack/bench/autoscale.py at this commit)")
        if seed in seeds:
            raise SeedsError(f"{source}: seed {seed} twice; each document must come from its own --seed")
        seeds.append(seed)
    first_source, first = documents[0]
    for source, document in documents[1:]:
        for name in SHARED_SETTINGS:
            if document.get(name) != first.get(name):
                raise SeedsError(
                    f"{source}: {name} is {document.get(name)!r}, {first_source} has {first.get(name)!r}"
                )
    verdicts = [_verdicts(document, source) for source, document in documents]
    keys = list(verdicts[0])
    for (source, _), judged in zip(documents[1:], verdicts[1:], strict=True):
        if set(judged) != set(keys):
            differing = sorted(map(str, set(keys) ^ set(judged)))
            raise SeedsError(f"{source}: not the same cases as {first_source} ({differing[0]} differs)")
    cases = []
    for key in keys:
        entry: dict[str, Any] = dict(zip(CASE_FIELDS, key, strict=True))
        for definition in DEFINITIONS:
            by_seed = [judged[key][definition] for judged in verdicts]
            dominated_on = [seed for seed, by in zip(seeds, by_seed, strict=True) if by]
            always = set(by_seed[0]).intersection(*map(set, by_seed[1:])) if dominated_on else set()
            entry[definition] = {
                "dominatedOn": dominated_on,
                # Settings that dominate on every seed: no draw saves our default from them.
                "byOnEverySeed": sorted(always),
            }
        cases.append(entry)
    summary = {
        definition: {
            "everySeed": sum(len(case[definition]["dominatedOn"]) == len(seeds) for case in cases),
            "someSeed": sum(bool(case[definition]["dominatedOn"]) for case in cases),
        }
        for definition in DEFINITIONS
    }
    per_seed = {
        str(seed): {
            definition: sum(1 for judged_case in judged.values() if judged_case[definition])
            for definition in DEFINITIONS
        }
        for seed, judged in zip(seeds, verdicts, strict=True)
    }
    return {
        "benchmark": "autoscale-seeds",
        "seeds": seeds,
        "dominatedPerSeed": per_seed,
        "summary": summary,
        "oracle": _oracle_reach(documents, seeds),
        "cases": cases,
    }


def _oracle_reach(documents: Sequence[tuple[str, dict[str, Any]]], seeds: list[int]) -> dict[str, Any] | None:
    """The criterion put to each fixed margin of the oracle on every seed (the documents'
    `oracleDominance`): per setting, the cases a baseline setting dominates it in, per
    definition and seed; the settings with the fewest over all of them. None when the
    documents predate `oracleDominance` (all of them: a mix is refused)."""
    reaches = [document.get("oracleDominance") for _, document in documents]
    if all(reach is None for reach in reaches):
        return None
    checked: list[dict[str, Any]] = []
    for (source, _), reach in zip(documents, reaches, strict=True):
        if not isinstance(reach, dict) or any(
            not isinstance(reach.get(d), dict) or not isinstance(reach[d].get("oracle"), dict)
            for d in DEFINITIONS
        ):
            raise SeedsError(
                f"{source}: no oracleDominance for {', '.join(DEFINITIONS)} (rerun it at this commit)"
            )
        checked.append(reach)
    settings = sorted(set().union(*(reach[d]["oracle"] for reach in checked for d in DEFINITIONS)))
    per_setting = {
        setting: {d: [reach[d]["oracle"].get(setting) for reach in checked] for d in DEFINITIONS}
        for setting in settings
    }
    # A setting some seed did not run cannot be judged on every seed.
    totals = {
        setting: sum(sum(counts) for counts in by_definition.values())
        for setting, by_definition in per_setting.items()
        if all(n is not None for counts in by_definition.values() for n in counts)
    }
    fewest = min(totals.values(), default=None)
    return {
        "ours": {d: [reach[d]["ours"] for reach in checked] for d in DEFINITIONS},
        "settings": per_setting,
        "fewestOverall": fewest,
        "bestOverall": [setting for setting, total in totals.items() if total == fewest],
        "medianPerSeed": {
            d: [_median(list(reach[d]["oracle"].values())) for reach in checked] for d in DEFINITIONS
        },
        "seeds": seeds,
    }


def _median(values: list[int]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def table(combined: dict[str, Any]) -> str:
    """One line per case dominated on some seed, then the counts."""
    seeds = combined["seeds"]
    lines = [f"seeds {', '.join(map(str, seeds))}; dominated on how many of them (TTFT alone / TTFT and ITL)"]
    for entry in combined["cases"]:
        counts = [len(entry[definition]["dominatedOn"]) for definition in DEFINITIONS]
        if not any(counts):
            continue
        name = " ".join(str(entry[field]) for field in CASE_FIELDS if entry[field] is not None)
        always = sorted(set().union(*(entry[definition]["byOnEverySeed"] for definition in DEFINITIONS)))
        suffix = f"  every seed: {', '.join(always)}" if always else ""
        lines.append(f"  {counts[0]} / {counts[1]}  {name}{suffix}")
    for definition in DEFINITIONS:
        counts = combined["summary"][definition]
        every, some = counts["everySeed"], counts["someSeed"]
        lines.append(f"{definition}: {every} case{'' if every == 1 else 's'} on every seed, {some} on some")
    oracle = combined.get("oracle")
    if oracle:
        lines.append("cases dominated per seed (TTFT alone / TTFT and ITL), ours and the oracle's margins:")
        lines.append(f"  ours: {_per_seed(oracle['ours'])}")
        lines.append(f"  oracle, median margin: {_per_seed(oracle['medianPerSeed'])}")
        for setting in oracle["bestOverall"]:
            lines.append(f"  {setting} (fewest over all seeds): {_per_seed(oracle['settings'][setting])}")
    return "\n".join(lines)


def _per_seed(counts: dict[str, list[Any]]) -> str:
    """`a / b` per seed: the count under each definition."""
    return ", ".join(f"{a:g} / {b:g}" for a, b in zip(*(counts[d] for d in DEFINITIONS), strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "documents", nargs="+", type=Path, help="hack/bench/autoscale.py documents, one per seed"
    )
    parser.add_argument("-o", "--output", choices=["json", "table"], default="json")
    args = parser.parse_args(argv)
    try:
        loaded = []
        for path in args.documents:
            try:
                loaded.append((str(path), json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, json.JSONDecodeError) as error:
                raise SeedsError(f"{path}: {error}") from None
        combined = combine(loaded)
    except SeedsError as error:
        print(f"autoscale_seeds: {error}", file=sys.stderr)
        return 2
    if args.output == "table":
        print(table(combined))
    else:
        json.dump(combined, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
