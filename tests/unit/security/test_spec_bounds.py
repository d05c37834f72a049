"""Hostile values in path-like, numeric and schedule fields are refused with their field path."""

from __future__ import annotations

import time
from typing import Any

import pytest

from inferfleet.api import SpecInvalid, parse
from inferfleet.api.source_paths import revision_problem, source_problem
from inferfleet.catalog import default_catalogs
from tests.unit.api.samples import base_spec, document

INLINE = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}


def problems_of(spec: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecInvalid) as caught:
        parse(document(spec))
    return {problem.path: problem.message for problem in caught.value.problems}


def with_config(**keys: Any) -> dict[str, Any]:
    spec = base_spec()
    spec["model"].update(config={**INLINE, **keys}, parametersBillion=8)
    return spec


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_hidden_layers", 1e8),
        ("hidden_size", 1e308),
        ("num_attention_heads", 10**12),
        ("vocab_size", -1),
        ("intermediate_size", float("nan")),
        ("max_position_embeddings", float("inf")),
        ("num_hidden_layers", True),
        ("hidden_size", "4096"),
        ("num_hidden_layers", 31.5),
        ("num_local_experts", 10**6),
    ],
)
def test_absurd_architecture_numbers_are_refused_at_their_key(key: str, value: Any) -> None:
    problems = problems_of(with_config(**{key: value}))
    assert f"spec.model.config.{key}" in problems, problems


def test_absurd_numbers_nested_in_text_config_and_rope_scaling_are_refused() -> None:
    spec = with_config(
        text_config={"hidden_size": 1e308}, rope_scaling={"rope_type": "yarn", "factor": 1e300}
    )
    problems = problems_of(spec)
    assert {"spec.model.config.text_config.hidden_size", "spec.model.config.rope_scaling.factor"} <= set(
        problems
    )


def test_a_refused_architecture_costs_no_planning_time() -> None:
    started = time.perf_counter()
    problems_of(with_config(num_hidden_layers=1e8, hidden_size=1e308))
    assert time.perf_counter() - started < 1.0


def test_every_catalog_architecture_fits_the_bounds() -> None:
    """The bounds come from the largest published models: every real one must pass."""
    catalogs = default_catalogs()
    assert len(catalogs.models) >= 30  # parse_hf_config checks the same bounds while loading


@pytest.mark.parametrize(
    "uri",
    [
        "pvc://claim/../../etc",
        "pvc://claim/a/./b",
        "pvc://Claim_Upper/x",
        "s3://bucket/a//b",
        "s3://bucket/%2e%2e/x",
        "s3://b/x",
        "gs://bucket/a\\..\\b",
        "hf://org/repo/../other",
        "hf://../repo",
        "file://relative",
        "file:///data/../etc",
        "hf://org/re\x00po",
    ],
)
def test_sources_that_could_escape_are_refused(uri: str) -> None:
    assert source_problem(uri) is not None
    spec = base_spec()
    spec["model"]["source"] = uri
    spec["model"]["adapters"] = [{"name": "a", "source": uri}]
    problems = problems_of(spec)
    assert {"spec.model.source", "spec.model.adapters[0].source"} <= set(problems), problems


@pytest.mark.parametrize(
    "uri",
    [
        "hf://meta-llama/Llama-3.1-8B-Instruct",
        "hf://gpt2",
        "hf://org/repo/sub/folder",
        "s3://my-bucket.example/models/llama/",
        "gs://bucket_1/x",
        "pvc://weights.team-a/llama-8b",
        "file:///data/models/llama",
    ],
)
def test_ordinary_sources_pass(uri: str) -> None:
    assert source_problem(uri) is None


@pytest.mark.parametrize(
    "revision",
    ["../../../../outside/EVILREV", "a..b", "/abs", "x/", "x.lock", ".hidden", "a b", "a\\b", "@{-1}"],
)
def test_revisions_follow_git_ref_rules(revision: str) -> None:
    assert revision_problem(revision) is not None
    spec = base_spec()
    spec["model"]["revision"] = revision
    assert "spec.model.revision" in problems_of(spec)


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/12", "release/2025-01", "a" * 40, "0" * 40])
def test_real_revisions_pass(revision: str) -> None:
    assert revision_problem(revision) is None


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("schedule", "99 99 99 99 99", "outside"),
        ("schedule", "0 8 * * mon-fri/x", "bad step"),
        ("schedule", "٣ 8 * * *", "not a number"),
        ("schedule", "*/0 8 * * *", "bad step"),
        ("timeZone", "Mars/Olympus", "not an IANA time zone"),
        ("timeZone", "../../etc/passwd", "not an IANA time zone"),
        ("timeZone", "/etc/localtime", "not an IANA time zone"),
    ],
)
def test_prewarm_schedule_and_zone_are_checked_at_admission(field: str, value: str, expected: str) -> None:
    window = {"schedule": "0 8 * * 1-5", "durationMinutes": 60, "replicas": 2, "timeZone": "Europe/Berlin"}
    spec = base_spec()
    spec["scaling"] = {"prewarm": [{**window, field: value}]}
    problems = problems_of(spec)
    assert expected in problems[f"spec.scaling.prewarm[0].{field}"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("workload", "peakRequestsPerSecond"), float("nan")),
        (("workload", "peakRequestsPerSecond"), float("inf")),
        (("workload", "slo", "ttftP99Ms"), float("-inf")),
        (("workload", "routing"), {"l4": float("nan")}),
    ],
)
def test_non_finite_numbers_are_refused(path: tuple[str, ...], value: Any) -> None:
    spec = base_spec()
    target = spec
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    problems = problems_of(spec)
    assert any(found.startswith("spec." + ".".join(path)) for found in problems), problems


def test_decoded_documents_nested_past_the_limit_are_refused_without_recursion() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    spec = base_spec()
    spec["tiers"][0]["affinity"] = deep
    problems = problems_of(spec)
    (path,) = problems
    assert path.startswith("spec.tiers[0].affinity.x.x") and "nested deeper" in problems[path]
