"""Property tests over hostile inputs: specs, metric values, source listings, revision ids.

Each property states what must hold for *every* input hypothesis can find, not for a
chosen few: a spec either validates and then plans and renders, or is refused with
paths; any metric values leave replicas within the spec's bounds; a listing either is
refused or lands entirely inside its revision; a revision the API admits is one the
cache can store.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import PurePosixPath
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from inferfleet import planner
from inferfleet.api import SpecInvalid, parse
from inferfleet.api.source_paths import revision_problem, source_problem
from inferfleet.autoscaling.loop.runner import Autoscaler
from inferfleet.autoscaling.policy.readings import TierReadings
from inferfleet.autoscaling.promql.parse import TierKey
from inferfleet.autoscaling.promql.queries import Signal
from inferfleet.autoscaling.promql.signals import assemble
from inferfleet.caching.precache.fetch_errors import UnsafeSource
from inferfleet.caching.precache.layout import listing_revision_id, ref_name, safe_revision_id
from inferfleet.caching.precache.names import check_listing, fold
from inferfleet.cluster import InMemoryCluster
from inferfleet.config import OperatorSettings
from tests.conftest import EXAMPLES_DIR
from tests.toolkit import a_scaled_service
from tests.toolkit import reconciled as tk
from tests.toolkit.design import render
from tests.toolkit.prometheus import a_vector
from tests.unit.autoscaler.conftest import ScriptedReader

SETTINGS = OperatorSettings()
BASE = yaml.safe_load((EXAMPLES_DIR / "llama-8b-chat.yaml").read_text(encoding="utf-8"))

# What an attacker reaches for first, beside whatever hypothesis invents.
HOSTILE_SCALARS = st.one_of(
    st.sampled_from(
        [
            1e308,
            -1e308,
            1e8,
            10**20,
            -1,
            0,
            float("nan"),
            float("inf"),
            True,
            "",
            "../../etc/passwd",
            "/etc/shadow",
            "pvc://claim/../../etc",
            "a\x00b",
            "..\\..\\x",
            "[/x]",
            "--trust-remote-code",
            "é" * 300,
            "e\u0301",
            "99 99 99 99 99",
            "Mars/Olympus",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(max_size=40),
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found.extend(_paths(child, (*prefix, index)))
    return found


# Fields the corpus must reach even where the example leaves them out.
EXTRA_PATHS = [
    ("spec", "model", "config"),
    ("spec", "model", "source"),
    ("spec", "model", "revision"),
    ("spec", "model", "adapters"),
    ("spec", "tiers", 0, "affinity"),
    ("spec", "tiers", 0, "maxReplicas"),
    ("spec", "cache", "pvcName"),
    ("spec", "serving", "servedModelName"),
]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_specs_are_refused_with_paths_or_plan_and_render(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(_paths(doc["spec"], ("spec",)) + EXTRA_PATHS))
        parent: Any = doc
        for key in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.setdefault(key, {})
            elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
                parent = parent[key]
            else:
                break
        else:
            if isinstance(parent, dict) or (
                isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent)
            ):
                parent[path[-1]] = data.draw(HOSTILE_VALUES)
    try:
        service = parse(doc, "hostile")
    except SpecInvalid as error:
        assert error.problems and all(problem.path for problem in error.problems), error
        return
    try:
        plan = planner.plan_service(service, SETTINGS.catalogs())
    except ValueError:
        return  # the planner's own refusal: a message for the user (CLI exit 2, a condition)
    if plan.feasible_tiers:
        objects = render(service, plan, SETTINGS)
        assert objects and all(isinstance(obj, dict) for obj in objects)


READINGS = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, -1.0, 0.0, 1e308]),
)


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(st.sampled_from(list(Signal)), READINGS, max_size=len(Signal)))
def test_assembled_signals_are_finite_non_negative_or_missing(values: dict[Signal, float | None]) -> None:
    key = TierKey("ns", "svc", "l4")
    vectors = {signal: a_vector({key: value}) for signal, value in values.items()}
    tier = assemble(0.0, vectors).tiers.get(key, TierReadings())
    for name in (
        "waiting",
        "running",
        "ttft_p99_s",
        "kv_cache_usage",
        "request_rate_rps",
        "prompt_tokens_rps",
    ):
        value = getattr(tier, name)
        assert value is None or (math.isfinite(value) and value >= 0), (name, value)


@settings(max_examples=120, deadline=None)
@given(
    bounds=st.tuples(st.integers(1, 8), st.integers(0, 12)).map(lambda b: (b[0], b[0] + b[1])),
    current=st.integers(0, 40),
    ready=st.integers(0, 40),
    readings=st.fixed_dictionaries(
        {
            "waiting": READINGS,
            "running": READINGS,
            "request_rate_rps": READINGS,
            "ttft_p99_s": READINGS,
            "prompt_tokens_rps": READINGS,
        }
    ),
    metrics_down=st.booleans(),
)
def test_any_metric_values_keep_replicas_within_the_specs_bounds(
    bounds: tuple[int, int], current: int, ready: int, readings: dict[str, Any], metrics_down: bool
) -> None:
    low, high = bounds
    cluster, reader = InMemoryCluster(), ScriptedReader()
    try:
        service = a_scaled_service("svc", "ns").only_tier("l4", "L4", min_replicas=low, max_replicas=high)
        tk.install(cluster, service, replicas={"l4": current}, ready={"l4": min(ready, current)})
        reader.set("ns", "svc", "l4", ready_replicas=min(ready, current), **readings)
        reader.down = metrics_down
        autoscaler = Autoscaler(cluster, reader, OperatorSettings(predictive_enabled=False))
        for tick in range(3):
            report = autoscaler.run_once(1_800_000_000.0 + 15 * tick)
            assert report.errors == []
            assert low <= tk.replicas(cluster, "ns", "svc", "l4") <= high
    finally:
        reader.close()


NAME_PIECES = st.sampled_from([*list("ab./\\\x00\n-_A"), "é", "é", "É", ".inferfleet", "..", ".part"])
NAMES = st.lists(st.lists(NAME_PIECES, min_size=1, max_size=8).map("".join), min_size=1, max_size=6)


@settings(max_examples=400)
@given(names=NAMES)
def test_a_listing_is_refused_or_lands_entirely_inside_its_revision(names: list[str]) -> None:
    try:
        check_listing("s3://b/p", names)
    except UnsafeSource:
        return
    root = "/cache/model/.partial/rev"
    folded = [fold(name) for name in names]
    assert len(set(folded)) == len(folded)  # no two names are one file anywhere
    for name in names:
        resolved = os.path.normpath(os.path.join(root, name))
        assert resolved.startswith(root + "/") and resolved == f"{root}/{name}"
        assert "\x00" not in name and "\\" not in name and not name.endswith(".part")
        assert not name.startswith(".inferfleet/")
    for one in folded:
        assert not any(other.startswith(one + "/") for other in folded)


@settings(max_examples=500)
@given(revision=st.text(max_size=30))
def test_a_revision_the_api_admits_is_one_the_cache_can_store(revision: str) -> None:
    assume(revision)
    if revision_problem(revision) is not None:
        return
    assert not revision.startswith("-")
    name = ref_name(revision)
    assert "/" not in name and name not in {".", ".."}
    safe_revision_id(listing_revision_id(revision, [("config.json", 2, "etag")]))


@settings(max_examples=500)
@given(revision_id=st.text(max_size=30))
def test_a_safe_revision_id_is_one_directory_below_revisions(revision_id: str) -> None:
    try:
        safe_revision_id(revision_id)
    except UnsafeSource:
        return
    path = PurePosixPath("/cache/model/revisions") / revision_id
    assert os.path.normpath(str(path)) == str(path) and path.parent == PurePosixPath("/cache/model/revisions")


@settings(max_examples=300)
@given(
    rest=st.text(alphabet=st.sampled_from(list("ab./\\%2e\x00-_")), max_size=20),
    scheme=st.sampled_from(["hf", "s3", "gs", "pvc", "file"]),
)
def test_an_admitted_source_has_no_way_out(rest: str, scheme: str) -> None:
    uri = f"{scheme}://{'/' if scheme == 'file' else 'bucket-1/'}{rest}"
    if source_problem(uri) is not None:
        return
    path = uri.partition("://")[2]
    assert ".." not in path.split("/") and "\\" not in path and "\x00" not in path
