"""A hostile corpus of InferenceService files, for the no-traceback test and the benchmark.

Each entry is `(name, yaml text, field path that must be named or None)`: wrong types,
huge numbers, NaN/inf, unicode, aliases, nesting, traversal in every path-like field,
bad schedules and duplicate keys. Entries with a field path are security-relevant: they
must be refused at validation, naming that path. The rest must simply never produce a
traceback, and no run may take long (hack/bench/hostile_corpus.py times them).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import yaml

Entry = tuple[str, str, str | None]


def _base() -> dict[str, Any]:
    return {
        "apiVersion": "inferfleet.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "hostile", "namespace": "team"},
        "spec": {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
            "workload": {
                "inputTokens": {"p50": 500, "p95": 2000, "p99": 4000},
                "outputTokens": {"p50": 100, "p95": 400, "p99": 800},
                "peakRequestsPerSecond": 10,
            },
            "tiers": [
                {"name": "l4", "gpu": "L4", "minReplicas": 1, "maxReplicas": 4},
                {"name": "a100", "gpu": "A100-SXM-80GB", "minReplicas": 1},
            ],
        },
    }


def _with(path: str, value: Any) -> dict[str, Any]:
    """The base document with `value` at a dotted path ('spec.tiers.0.gpu'), made as needed."""
    doc = _base()
    node: Any = doc
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


INLINE = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}


def _inline(**config: Any) -> dict[str, Any]:
    """spec.model with an inline architecture (and the parametersBillion it needs)."""
    return {"name": "acme/custom-8b", "config": {**INLINE, **config}, "parametersBillion": 8}


# Where a path can hide, and what each must be refused as (field path).
TRAVERSAL: list[tuple[str, Any, str]] = [
    ("spec.model.source", "pvc://claim/../../etc", "spec.model.source"),
    ("spec.model.source", "file:///models/../../etc/shadow", "spec.model.source"),
    ("spec.model.source", "s3://bucket/../../x", "spec.model.source"),
    ("spec.model.source", "gs://bucket/a\\..\\b", "spec.model.source"),
    ("spec.model.source", "hf://org/repo/%2e%2e/x", "spec.model.source"),
    ("spec.model.source", "hf://../../etc", "spec.model.source"),
    ("spec.model.source", "pvc://claim/x\x00y", "spec.model.source"),
    ("spec.model.revision", "../../../../outside/EVILREV", "spec.model.revision"),
    ("spec.model.revision", "--trust-remote-code", "spec.model.revision"),
    ("spec.model.name", "--trust-remote-code", "spec.model.name"),
    ("spec.model.servedModelName", "-x", "spec.model.servedModelName"),
    (
        "spec.model.adapters",
        [{"name": "a", "source": "pvc://claim/../../etc"}],
        "spec.model.adapters[0].source",
    ),
    (
        "spec.model.credentialsSecretRef",
        {"name": "../other-ns", "key": "token"},
        "spec.model.credentialsSecretRef.name",
    ),
    (
        "spec.model.credentialsSecretRef",
        {"name": "hf", "key": "../../token"},
        "spec.model.credentialsSecretRef.key",
    ),
    ("spec.cache", {"mode": "pvc", "pvcName": "../etc"}, "spec.cache.pvcName"),
    (
        "spec.scaling.prewarm",
        [{"schedule": "0 8 * * *", "durationMinutes": 5, "replicas": 1, "timeZone": "../../../etc/passwd"}],
        "spec.scaling.prewarm[0].timeZone",
    ),
]

ABSURD: list[tuple[str, Any, str]] = [
    ("spec.model", _inline(num_hidden_layers=1e8), "spec.model.config.num_hidden_layers"),
    ("spec.model", _inline(hidden_size=1e308), "spec.model.config.hidden_size"),
    ("spec.model", _inline(vocab_size=float("inf")), "spec.model.config.vocab_size"),
    ("spec.model", _inline(num_local_experts=10**9), "spec.model.config.num_local_experts"),
    (
        "spec.model",
        _inline(rope_scaling={"type": "yarn", "factor": 1e300}),
        "spec.model.config.rope_scaling.factor",
    ),
    (
        "spec.model",
        _inline(text_config={"hidden_size": -5}),
        "spec.model.config.text_config.hidden_size",
    ),
    ("spec.workload.peakRequestsPerSecond", float("nan"), "spec.workload.peakRequestsPerSecond"),
    ("spec.workload.peakRequestsPerSecond", float("inf"), "spec.workload.peakRequestsPerSecond"),
    ("spec.workload.peakRequestsPerSecond", 1e308, "spec.workload.peakRequestsPerSecond"),
    ("spec.tiers.0.maxReplicas", 10**12, "spec.tiers[0].maxReplicas"),
    ("spec.tiers.0.gpu", {"name": "huge", "memoryGiB": 1e308}, "spec.tiers[0].gpu.memoryGiB"),
    (
        "spec.scaling.prewarm",
        [{"schedule": "99 99 99 99 99", "durationMinutes": 5, "replicas": 1}],
        "spec.scaling.prewarm[0].schedule",
    ),
    (
        "spec.scaling.prewarm",
        [{"schedule": "0 8 * * 1-5", "durationMinutes": 5, "replicas": 1, "timeZone": "Mars/Olympus"}],
        "spec.scaling.prewarm[0].timeZone",
    ),
]

WRONG_TYPES: list[tuple[str, Any]] = [
    ("spec", []),
    ("spec", "a string"),
    ("spec.model", 5),
    ("spec.tiers", "l4"),
    ("spec.tiers", []),
    ("spec.tiers.0", None),
    ("spec.tiers.0.minReplicas", "many"),
    ("spec.tiers.0.gpu", ["L4"]),
    ("spec.tiers.0.gpu", ""),
    ("spec.tiers.0.affinity", "anything"),
    ("spec.tiers.0.nodeSelector", {"a": {"b": 1}}),
    ("spec.workload.inputTokens", {"p50": True, "p95": 2, "p99": 3}),
    ("spec.workload.routing", {"l4": "half"}),
    ("spec.model.config", ["not", "a", "mapping"]),
    ("spec.model.config", {"num_hidden_layers": "32", "hidden_size": 4096, "num_attention_heads": 32}),
    ("spec.serving.extraArgs", "--flag"),
    ("spec.serving.env", [{"name": "X", "value": {"nested": 1}}]),
    ("metadata", []),
    ("metadata.name", 12),
]

UNICODE: list[tuple[str, Any]] = [
    ("metadata.name", "h\u202eostile"),
    ("spec.tiers.0.name", "l4\u200b"),
    ("spec.model.name", "meta-llama/Llama\u2010 3"),
    ("spec.model.servedModelName", "cafe\u0301"),
    ("spec.model.servedModelName", "😀" * 100),
    ("spec.tiers.0.gpu", "L4" + "\u0301" * 50),
    ("spec.tiers.0.gpu", {"name": "GPU[/x][bold]", "memoryGiB": 24}),
    ("spec.serving.env", [{"name": "X", "value": "\u0000\u202e" * 100}]),
    ("spec.model.name", "x" * 100_000),
]


def _alias_bomb(levels: int = 9) -> str:
    lines = ['  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  a{n}: &a{n} [{','.join(f'*a{n - 1}' for _ in range(10))}]" for n in range(1, levels + 1)]
    return "\n".join(lines)


def _raw_entries() -> Iterator[Entry]:
    """Entries that only exist as text (aliases, nesting, duplicate keys, YAML tags)."""
    base = _dump(_base())
    bomb = "\n".join("      " + line for line in _alias_bomb().splitlines())
    yield (
        "alias bomb in affinity",
        base.replace("  - name: l4\n", f"  - name: l4\n    affinity:\n{bomb}\n", 1),
        None,
    )
    config_bomb = "\n".join("    " + line for line in _alias_bomb().splitlines())
    yield (
        "alias bomb in model.config",
        base.replace("  model:\n", f"  model:\n    config:\n{config_bomb}\n", 1),
        None,
    )
    yield (
        "1000-deep flow nesting",
        base.replace("  - name: l4\n", "  - name: l4\n    affinity: " + "[" * 1000 + "]" * 1000 + "\n", 1),
        None,
    )
    deep_block = "".join("  " * (i + 2) + f"k{i}:\n" for i in range(1000)) + "  " * 1002 + "v: 1\n"
    yield (
        "1000-deep block nesting",
        base.replace("  - name: l4\n", "  - name: l4\n    affinity:\n" + deep_block, 1),
        None,
    )
    sixty = "{a: " * 40 + "1" + "}" * 40
    yield (
        "40-deep affinity (allowed depth)",
        base.replace("  - name: l4\n", f"  - name: l4\n    affinity: {sixty}\n", 1),
        None,
    )
    yield (
        "duplicate key",
        base.replace("    minReplicas: 1\n", "    minReplicas: 1\n    minReplicas: 500\n", 1),
        None,
    )
    yield (
        "python object tag",
        base.replace("  model:\n", "  model: !!python/object/apply:os.system ['true']\n", 1),
        None,
    )
    yield "binary tag", base.replace("    name: meta", "    name: !!binary aGVsbG8=\n    x: meta", 1), None
    yield (
        "YAML .nan and .inf",
        base.replace("peakRequestsPerSecond: 10", "peakRequestsPerSecond: .nan", 1),
        None,
    )
    yield "many documents", "---\n".join([base] * 50), None
    yield "not YAML", "spec: [unclosed\n  - {", None
    yield "empty", "", None
    yield "a list", "- 1\n- 2\n", None
    yield (
        "huge integer literal",
        base.replace("peakRequestsPerSecond: 10", "peakRequestsPerSecond: " + "9" * 5000, 1),
        None,
    )


def entries() -> list[Entry]:
    """The whole corpus, in a fixed order."""
    found: list[Entry] = []
    for path, value, expected in TRAVERSAL:
        found.append(
            (f"traversal {path}={value!r}"[:120], _dump(_with(path, copy.deepcopy(value))), expected)
        )
    for path, value, expected in ABSURD:
        found.append((f"absurd {path}={value!r}"[:120], _dump(_with(path, copy.deepcopy(value))), expected))
    for path, value in WRONG_TYPES:
        found.append((f"wrong type {path}={value!r}"[:120], _dump(_with(path, copy.deepcopy(value))), None))
    for path, value in UNICODE:
        found.append((f"unicode {path}={value!r}"[:120], _dump(_with(path, copy.deepcopy(value))), None))
    found.extend(_raw_entries())
    return found
