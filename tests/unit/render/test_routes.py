"""Which route takes a request on a shared Gateway, tried as another tenant would.

The victim is a service the operator rendered; the attacker writes any HTTPRoute its
namespace may hold, attached to the same Gateway. Every way the Gateway API lets that
route take some of the victim's requests (an older copy, a longer path, an exact path, a
header or method more, a more specific hostname, a regular expression) must be reported;
a route that cannot take one (disjoint paths, another model name, another listener,
another Gateway, refused by the Gateway) must not be. A reference router written from
the Gateway API's text, independent of the code under test, checks the decision on
generated routes and requests.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferfleet.api import InferenceService
from inferfleet.config import OperatorSettings
from inferfleet.render import frontdoor
from inferfleet.render import route_matching as routes
from tests.toolkit.design import render
from tests.unit.render import plans
from tests.unit.render.validation import validate

GW_NS, GW = "gateway-system", "shared"
PATH = OperatorSettings(gateway_name=GW, gateway_namespace=GW_NS)
HOSTNAME = OperatorSettings(
    gateway_name=GW,
    gateway_namespace=GW_NS,
    front_door_match="hostname",
    front_door_hostname="{name}.{namespace}.llm.example.com",
)
MODEL = OperatorSettings(gateway_name=GW, gateway_namespace=GW_NS, front_door_match="model")
MODES = {"path": PATH, "hostname": HOSTNAME, "model": MODEL}
PARENT = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GW, "namespace": GW_NS}
LATER = "2026-03-01T00:00:00Z"
EARLIER = "2026-01-01T00:00:00Z"


def a_service(namespace: str = "team-a", name: str = "llama", model: str | None = None) -> InferenceService:
    builder = plans.a_service(name).named(name, namespace)
    if model is not None:
        builder = builder.model(servedModelName=model)
    return builder.service()


def rendered_route(service: InferenceService, mode: OperatorSettings) -> dict[str, Any]:
    plan = plans.plan(plans.tier_plan("l4"), name=service.name)
    (route,) = [obj for obj in render(service, plan, mode) if obj["kind"] == "HTTPRoute"]
    return route


def as_route(obj: Mapping[str, Any], created: str = LATER) -> routes.Route:
    live = {**obj, "metadata": {**obj["metadata"], "creationTimestamp": created}}
    found = routes.route_of(live, GW_NS, GW)
    assert found is not None
    return found


def hand_made(
    namespace: str,
    name: str,
    *,
    matches: Sequence[Mapping[str, Any]] | None = None,
    hostnames: Sequence[str] = (),
    created: str = EARLIER,
    parent: Mapping[str, Any] = PARENT,
    status: Mapping[str, Any] | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parentRefs": [dict(parent)],
        "rules": [{"backendRefs": [{"name": "attacker", "port": 8000}]}],
    }
    if matches is not None:
        spec["rules"][0]["matches"] = [dict(m) for m in matches]
    if hostnames:
        spec["hostnames"] = list(hostnames)
    obj = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": created,
            "generation": generation,
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = dict(status)
    return obj


def prefix(value: str) -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}}


def shadowed(victim: routes.Route, attacker: Mapping[str, Any]) -> routes.Shadow | None:
    other = routes.route_of(attacker, GW_NS, GW)
    return None if other is None else routes.shadows(victim, other)


VICTIM = a_service("team-a", "llama", model="llama-3-8b")


# --- what the operator renders -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
def test_every_mode_renders_a_valid_route_with_a_match_of_its_own(mode: str) -> None:
    route = rendered_route(VICTIM, MODES[mode])
    validate(route)  # the pinned HTTPRoute schema, CEL rules included (URLRewrite needs one PathPrefix)
    (rule,) = route["spec"]["rules"]
    assert rule["timeouts"]["request"].endswith("s")
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama"}
    ]
    assert rule["matches"] != [prefix("/")] or route["spec"].get("hostnames"), (
        "a catch-all takes everyone's requests"
    )


def test_path_mode_takes_the_services_own_prefix_and_gives_vllm_its_own_paths() -> None:
    route = rendered_route(VICTIM, PATH)
    (rule,) = route["spec"]["rules"]
    assert "hostnames" not in route["spec"]
    assert rule["matches"] == [prefix("/team-a/llama")]
    assert rule["filters"] == [
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
        }
    ]


def test_hostname_mode_takes_the_services_own_hostname() -> None:
    route = rendered_route(VICTIM, HOSTNAME)
    assert route["spec"]["hostnames"] == ["llama.team-a.llm.example.com"]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [prefix("/")] and "filters" not in rule


def test_model_mode_matches_each_served_name_on_the_header_a_body_based_router_sets() -> None:
    service = (
        plans.a_service("llama")
        .named("llama", "team-a")
        .model(servedModelName="llama-3-8b", adapters=[{"name": "sql", "source": "hf://org/sql-lora"}])
        .service()
    )
    route = rendered_route(service, MODEL)
    validate(route)
    (rule,) = route["spec"]["rules"]
    assert [m["headers"] for m in rule["matches"]] == [
        [{"type": "Exact", "name": "X-Gateway-Model-Name", "value": "llama-3-8b"}],
        [{"type": "Exact", "name": "X-Gateway-Model-Name", "value": "sql"}],
    ]


def test_weighted_backends_keep_one_rule_per_match_set() -> None:
    shape = frontdoor.route_shape(VICTIM, MODEL)
    backends = [{"name": "a", "weight": 700}, {"name": "b", "weight": 300}]
    many = frontdoor.RouteShape((), shape.matches * 70, False)
    rules = frontdoor.route_rules(many, backends, "300s")
    assert [len(rule["matches"]) for rule in rules] == [64, 6]
    assert all(rule["backendRefs"] == backends and rule["timeouts"] == {"request": "300s"} for rule in rules)


names = st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    first=st.tuples(names, names),
    second=st.tuples(names, names),
    mode=st.sampled_from(["path", "hostname"]),
    first_older=st.booleans(),
)
def test_no_rendered_route_takes_a_request_of_another_service(
    first: tuple[str, str], second: tuple[str, str], mode: str, first_older: bool
) -> None:
    """By construction: the operator's own routes never shadow each other, whatever their
    names (`a-b` in `c` against `a` in `b-c`) and whichever is older."""
    if first == second:
        return
    a = as_route(rendered_route(a_service(*first), MODES[mode]), EARLIER if first_older else LATER)
    b = as_route(rendered_route(a_service(*second), MODES[mode]), LATER if first_older else EARLIER)
    assert routes.shadows(a, b) is None
    assert routes.shadows(b, a) is None


# --- an attacker's routes --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
def test_an_older_copy_of_the_victims_match_shadows_it_and_a_younger_one_does_not(mode: str) -> None:
    victim_obj = rendered_route(VICTIM, MODES[mode])
    victim = as_route(victim_obj, LATER)
    copy_spec = victim_obj["spec"]
    older = hand_made(
        "team-c", "steal", matches=copy_spec["rules"][0]["matches"], hostnames=copy_spec.get("hostnames", ())
    )
    found = shadowed(victim, older)
    assert found is not None and found.route == "team-c/steal" and "older" in found.reason
    younger = {**older, "metadata": {**older["metadata"], "creationTimestamp": "2026-06-01T00:00:00Z"}}
    assert shadowed(victim, younger) is None


def test_same_second_ties_go_to_the_first_namespace_and_name() -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    first = hand_made("team-0", "x", matches=[prefix("/team-a/llama")], created=LATER)
    last = hand_made("team-z", "x", matches=[prefix("/team-a/llama")], created=LATER)
    assert shadowed(victim, first) is not None
    assert shadowed(victim, last) is None


@pytest.mark.parametrize(
    ("why", "attack"),
    [
        ("a longer prefix", {"matches": [prefix("/team-a/llama/v1")]}),
        ("a trailing slash counts as a character", {"matches": [prefix("/team-a/llama/")]}),
        (
            "an exact path",
            {"matches": [{"path": {"type": "Exact", "value": "/team-a/llama/v1/chat/completions"}}]},
        ),
        (
            "an exact path as long as the prefix",
            {"matches": [{"path": {"type": "Exact", "value": "/team-a/llama"}}]},
        ),
        ("a method", {"matches": [{**prefix("/team-a/llama"), "method": "POST"}]}),
        (
            "a header every client sends",
            {
                "matches": [
                    {
                        **prefix("/team-a/llama"),
                        "headers": [{"name": "authorization", "type": "RegularExpression", "value": ".*"}],
                    }
                ]
            },
        ),
        (
            "a query parameter",
            {"matches": [{**prefix("/team-a/llama"), "queryParams": [{"name": "stream", "value": "true"}]}]},
        ),
        ("the Gateway's own hostname", {"hostnames": ["gw.example.com"], "matches": [prefix("/team-a")]}),
        ("a wildcard hostname", {"hostnames": ["*.example.com"], "matches": [prefix("/")]}),
        ("a regular expression", {"matches": [{"path": {"type": "RegularExpression", "value": "/.*"}}]}),
    ],
)
def test_a_younger_route_that_is_more_specific_shadows_the_victim_in_path_mode(
    why: str, attack: dict[str, Any]
) -> None:
    victim = as_route(rendered_route(VICTIM, PATH), EARLIER)
    found = shadowed(victim, hand_made("team-c", "steal", created=LATER, **attack))
    assert found is not None, why


@pytest.mark.parametrize(
    ("why", "attack"),
    [
        ("the old operator's catch-all, older", {"matches": [prefix("/")]}),
        ("the namespace's prefix", {"matches": [prefix("/team-a")]}),
        ("a sibling whose name extends the victim's", {"matches": [prefix("/team-a/llama-2")]}),
        ("the same characters, not a path element", {"matches": [prefix("/team-a/llamas")]}),
        (
            "an exact path outside the prefix",
            {"matches": [{"path": {"type": "Exact", "value": "/team-a/llam"}}]},
        ),
        (
            "a wildcard hostname, shorter path",
            {"hostnames": ["*.example.com"], "matches": [prefix("/team-b")]},
        ),
    ],
)
def test_routes_that_cannot_take_the_victims_requests_are_not_reported(
    why: str, attack: dict[str, Any]
) -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    assert shadowed(victim, hand_made("team-c", "other", **attack)) is None, why


def test_in_hostname_mode_only_the_same_host_and_a_more_specific_match_shadow() -> None:
    victim = as_route(rendered_route(VICTIM, HOSTNAME), EARLIER)
    host = "llama.team-a.llm.example.com"
    # A wildcard over the victim's host loses to its exact hostname, whatever the path.
    assert (
        shadowed(
            victim,
            hand_made("c", "w", hostnames=["*.llm.example.com"], matches=[prefix("/v1")], created=LATER),
        )
        is None
    )
    # No hostname at all (any host) loses too: hostname precedence comes first.
    assert shadowed(victim, hand_made("c", "any", matches=[prefix("/v1/chat")], created=LATER)) is None
    # The same hostname with a longer path takes those requests.
    assert (
        shadowed(victim, hand_made("c", "h", hostnames=[host], matches=[prefix("/v1")], created=LATER))
        is not None
    )
    # Another service's hostname never meets the victim's.
    other = "llama.team-b.llm.example.com"
    assert shadowed(victim, hand_made("c", "o", hostnames=[other], matches=[prefix("/v1")])) is None


def test_in_model_mode_another_model_name_is_disjoint_and_the_same_name_older_shadows() -> None:
    victim = as_route(rendered_route(VICTIM, MODEL), LATER)
    header = {"name": "x-gateway-model-name", "value": "llama-3-8b"}  # names are case-insensitive
    assert shadowed(victim, hand_made("c", "same", matches=[{"headers": [header]}])) is not None
    other = {**header, "value": "mistral"}
    assert shadowed(victim, hand_made("c", "other", matches=[{"headers": [other]}], created=EARLIER)) is None
    # A longer path without the header wins on path before headers count.
    assert (
        shadowed(victim, hand_made("c", "v1", matches=[prefix("/v1")], created="2026-09-01T00:00:00Z"))
        is not None
    )


def test_only_routes_that_compete_on_the_same_gateway_and_listener_count() -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    copy = [prefix("/team-a/llama")]
    elsewhere = hand_made("c", "x", matches=copy, parent={**PARENT, "name": "other-gateway"})
    assert routes.route_of(elsewhere, GW_NS, GW) is None
    same_namespace_default = hand_made("gateway-system", "x", matches=copy, parent={"name": GW})
    assert shadowed(victim, same_namespace_default) is not None  # parentRef namespace defaults to the route's
    other_namespace = hand_made("c", "x", matches=copy, parent={"name": GW})  # means c/shared
    assert routes.route_of(other_namespace, GW_NS, GW) is None
    on_listener = hand_made("c", "x", matches=copy, parent={**PARENT, "sectionName": "https"})
    assert shadowed(victim, on_listener) is not None  # the victim attaches to every listener
    narrow = routes.Route(victim.namespace, victim.name, LATER, (), victim.matches, frozenset({"http"}))
    other = routes.route_of(on_listener, GW_NS, GW)
    assert other is not None and routes.shadows(narrow, other) is None


def refused(generation: int, observed: int, answer: str = "False") -> dict[str, Any]:
    condition = {
        "type": "Accepted",
        "status": answer,
        "reason": "NotAllowedByListeners",
        "observedGeneration": observed,
    }
    return {"parents": [{"parentRef": PARENT, "controllerName": "example.com/gw", "conditions": [condition]}]}


def test_a_route_the_gateway_refused_takes_nothing_until_its_owner_changes_it() -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    copy = [prefix("/team-a/llama")]
    assert shadowed(victim, hand_made("c", "x", matches=copy, status=refused(1, 1))) is None
    # Edited since the answer: the Gateway may accept it now.
    assert shadowed(victim, hand_made("c", "x", matches=copy, generation=2, status=refused(2, 1))) is not None
    assert shadowed(victim, hand_made("c", "x", matches=copy, status=refused(1, 1, "True"))) is not None


def test_malformed_routes_are_read_with_the_api_servers_defaults() -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    bare = hand_made("c", "x")  # no matches: PathPrefix /, which loses to the victim's prefix
    assert shadowed(victim, bare) is None
    junk = {**bare, "spec": {"parentRefs": [PARENT], "rules": "nonsense", "hostnames": [7]}}
    assert shadowed(victim, junk) is None
    no_metadata = {
        "spec": {
            "parentRefs": [{"name": GW, "namespace": GW_NS}],
            "rules": [{"matches": [prefix("/team-a/llama/v1")]}],
        }
    }
    assert shadowed(victim, no_metadata) is not None


def test_hostname_specificity_follows_the_gateway_api() -> None:
    assert routes.host_rank((), "a.example.com") == (0, 0)
    assert routes.host_rank(("*.example.com",), "a.example.com") == (0, 13)
    assert routes.host_rank(("*.example.com",), "example.com") is None
    assert routes.host_rank(("*.example.com",), "a.example.org") is None
    assert routes.host_rank(("*.example.com", "a.example.com"), "a.example.com") == (13, 13)
    assert routes.host_rank(("*.b.example.com", "*.example.com"), "a.b.example.com") == (0, 15)


def test_shadowing_lists_every_route_that_wins_oldest_first() -> None:
    victim = as_route(rendered_route(VICTIM, PATH), LATER)
    others = [
        routes.route_of(
            hand_made("c", "young", matches=[prefix("/team-a/llama/v1")], created="2026-02-01T00:00:00Z"),
            GW_NS,
            GW,
        ),
        routes.route_of(hand_made("c", "old", matches=[prefix("/team-a/llama")], created=EARLIER), GW_NS, GW),
        routes.route_of(hand_made("c", "harmless", matches=[prefix("/team-b")], created=EARLIER), GW_NS, GW),
        victim,  # a route never shadows itself
    ]
    found = routes.shadowing(victim, [o for o in others if o is not None])
    assert [s.route for s in found] == ["c/old", "c/young"]


# --- a reference router from the Gateway API's text ----------------------------------------


@dataclass(frozen=True)
class Request:
    host: str
    path: str
    method: str
    headers: tuple[tuple[str, str], ...]
    query: tuple[tuple[str, str], ...]


def ref_host_score(hostnames: tuple[str, ...], host: str) -> tuple[int, int] | None:
    if not hostnames:
        return (0, 0)
    matching = [h for h in hostnames if h == host or (h.startswith("*.") and host.endswith(h[1:]))]
    if not matching:
        return None
    return (max((len(h) for h in matching if not h.startswith("*")), default=0), max(map(len, matching)))


def ref_path_ok(kind: str, value: str, path: str) -> bool:
    if kind == "Exact":
        return path == value
    trimmed = value.rstrip("/") or "/"
    return trimmed in {"/", path} or path.startswith(trimmed + "/")


def ref_values_ok(
    wanted: tuple[routes.ValueMatch, ...], got: tuple[tuple[str, str], ...], fold: bool
) -> bool:
    have = {(k.lower() if fold else k): v for k, v in got}
    return all(have.get(w.name) == w.value for w in wanted)


def ref_winner(candidates: Sequence[routes.Route], request: Request) -> str | None:
    """The route a conformant Gateway gives `request` to (Exact values only)."""
    best: tuple[Any, ...] | None = None
    winner = None
    for route in candidates:
        host = ref_host_score(route.hostnames, request.host)
        if host is None:
            continue
        for m in route.matches:
            if not ref_path_ok(m.path_type, m.path, request.path):
                continue
            if m.method is not None and m.method != request.method:
                continue
            if not ref_values_ok(m.headers, request.headers, True) or not ref_values_ok(
                m.query, request.query, False
            ):
                continue
            exact = m.path_type == "Exact"
            key = (host, exact, len(m.path), m.method is not None, len(m.headers), len(m.query))
            # Oldest first, then namespace/name: ordered so that larger is better.
            tie = (*(-ord(c) for c in route.created), 0), (*(-ord(c) for c in route.key), 0)
            if best is None or (key, tie) > best:
                best, winner = (key, tie), route.key
    return winner


HOSTS = ["gw.example.com", "llama.team-a.llm.example.com", "x.llm.example.com", "other.org"]
PATHS = [
    "/",
    "/team-a",
    "/team-a/llama",
    "/team-a/llama/v1",
    "/team-a/llama/v1/chat/completions",
    "/team-a/llamas",
    "/v1/models",
]
HEADER_VALUES = ["llama-3-8b", "mistral"]


@st.composite
def attacker_routes(draw: st.DrawFn) -> dict[str, Any]:
    hostnames = draw(
        st.lists(
            st.sampled_from(
                ["gw.example.com", "*.llm.example.com", "llama.team-a.llm.example.com", "*.example.com"]
            ),
            max_size=2,
            unique=True,
        )
    )
    matches = []
    for _ in range(draw(st.integers(1, 3))):
        match: dict[str, Any] = {
            "path": {
                "type": draw(st.sampled_from(["PathPrefix", "Exact"])),
                "value": draw(st.sampled_from(PATHS)),
            }
        }
        if draw(st.booleans()):
            match["method"] = draw(st.sampled_from(["GET", "POST"]))
        if draw(st.booleans()):
            match["headers"] = [
                {"name": "X-Gateway-Model-Name", "value": draw(st.sampled_from(HEADER_VALUES))}
            ]
        if draw(st.booleans()):
            match["queryParams"] = [{"name": "stream", "value": "true"}]
        matches.append(match)
    created = draw(st.sampled_from([EARLIER, LATER, "2026-06-01T00:00:00Z"]))
    return hand_made(
        draw(st.sampled_from(["team-0", "team-c", "team-z"])),
        "attack",
        matches=matches,
        hostnames=hostnames,
        created=created,
    )


REQUESTS = [
    Request(host, path, method, headers, query)
    for host, path, method, headers, query in itertools.product(
        HOSTS,
        PATHS,
        ["GET", "POST"],
        [(), (("X-Gateway-Model-Name", "llama-3-8b"),), (("x-gateway-model-name", "mistral"),)],
        [(), (("stream", "true"),)],
    )
]


@settings(max_examples=300, deadline=None)
@given(attack=attacker_routes(), mode=st.sampled_from(list(MODES)))
def test_the_decision_agrees_with_a_reference_router_on_every_sample_request(
    attack: dict[str, Any], mode: str
) -> None:
    """Sound: whenever the reference router gives one of the victim's requests to the
    attacker, `shadows` says so. Precise: whenever it says so, some request is taken."""
    victim = as_route(rendered_route(VICTIM, MODES[mode]), LATER)
    other = routes.route_of(attack, GW_NS, GW)
    assert other is not None
    taken = [
        r
        for r in REQUESTS
        if ref_winner([victim], r) == victim.key and ref_winner([victim, other], r) == other.key
    ]
    found = routes.shadows(victim, other)
    if taken:
        assert found is not None, (taken[0], attack)
    elif found is not None:
        # The sample holds no witness: look among requests built from the pair's own values.
        both = (*victim.matches, *other.matches)
        paths = {m.path for m in both} | {m.path.rstrip("/") + "/x" for m in both}
        values = {v.value for m in both for v in m.headers}
        headers = [(), *(((routes_header, v),) for v in values)]
        witness = [
            Request(host, path, method, header, query)
            for host in routes.candidate_hosts(victim, other)
            for path in paths
            for method in ("GET", "POST")
            for header in headers
            for query in [(), (("stream", "true"),)]
        ]
        assert any(
            ref_winner([victim], r) == victim.key and ref_winner([victim, other], r) == other.key
            for r in witness
        ), (found, attack)


routes_header = "x-gateway-model-name"


def test_two_methods_never_meet_in_one_request() -> None:
    get = routes.RequestMatch(method="GET")
    assert not routes.requests_overlap(get, routes.RequestMatch(method="POST"))
    assert routes.requests_overlap(get, routes.RequestMatch())
