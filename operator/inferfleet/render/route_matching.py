"""HTTPRoute matches on a shared Gateway, and which route takes a request (pure).

The Gateway API (gateway.networking.k8s.io/v1, HTTPRoute `spec.hostnames` and
`spec.rules[].matches`) gives every request to one match across all the routes attached
to a listener, by precedence, continuing on ties:

1. the route hostname that matches the request's host with the most characters of a
   non-wildcard hostname, then of any hostname (a route without hostnames: none);
2. an `Exact` path over a `PathPrefix`, then the prefix with the most characters;
3. a method match; 4. the most header matches; 5. the most query-parameter matches;
6. the oldest route (creationTimestamp); 7. the first route by "{namespace}/{name}".

`shadows(ours, other)` asks whether some request one of our matches covers would go to
`other` instead. It answers for the worst case: a regular expression (path, header or
query; their precedence is implementation-specific) is assumed to cover ours and to win
a tie, and a listener's own hostname is not used to narrow the hosts. What it never does
is call a route harmless that can take one of our requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GATEWAY_GROUP = "gateway.networking.k8s.io"
EXACT = "Exact"
PREFIX = "PathPrefix"
REGEX = "RegularExpression"
# A host label no hostname can contain ('~' is not allowed in one): a stand-in for "any
# other host" under a wildcard, or for a host no route names.
_ANY_LABEL = "~"


@dataclass(frozen=True)
class ValueMatch:
    """One header or query-parameter match."""

    name: str  # header names lowercased (they are case-insensitive); query names as written
    type: str  # Exact or RegularExpression
    value: str


@dataclass(frozen=True)
class RequestMatch:
    """One HTTPRouteMatch, with the API server's defaults filled in."""

    path_type: str = PREFIX
    path: str = "/"
    method: str | None = None
    headers: tuple[ValueMatch, ...] = ()
    query: tuple[ValueMatch, ...] = ()


@dataclass(frozen=True)
class Route:
    """What of one HTTPRoute decides which requests it takes on one Gateway."""

    namespace: str
    name: str
    created: str  # RFC 3339 as the API server writes it; "" when unknown (counts as oldest)
    hostnames: tuple[str, ...]
    matches: tuple[RequestMatch, ...]
    # Listeners (sectionName) it attaches to on this Gateway; None: every listener.
    sections: frozenset[str] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# --- reading routes ----------------------------------------------------------------------


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _values(entries: Any, *, fold_case: bool) -> tuple[ValueMatch, ...]:
    """Header or query matches; only the first entry of a name counts (the API says so)."""
    seen: set[str] = set()
    out = []
    for entry in map(_dict, _list(entries)):
        name = _str(entry.get("name"))
        key = name.lower() if fold_case else name
        if not name or key in seen:
            continue
        seen.add(key)
        out.append(ValueMatch(key, _str(entry.get("type"), EXACT), _str(entry.get("value"))))
    return tuple(out)


def request_match(match: Mapping[str, Any]) -> RequestMatch:
    path = _dict(match.get("path"))
    method = match.get("method")
    return RequestMatch(
        path_type=_str(path.get("type"), PREFIX),
        path=_str(path.get("value"), "/"),
        method=method if isinstance(method, str) and method else None,
        headers=_values(match.get("headers"), fold_case=True),
        query=_values(match.get("queryParams"), fold_case=False),
    )


def _matches(spec: Mapping[str, Any]) -> tuple[RequestMatch, ...]:
    rules = _list(spec.get("rules")) or [{}]  # no rules: the API's default, PathPrefix /
    out: list[RequestMatch] = []
    for rule in map(_dict, rules):
        matches = _list(rule.get("matches")) or [{}]
        out.extend(request_match(_dict(match)) for match in matches)
    return tuple(out)


@dataclass(frozen=True)
class Observed:
    """One HTTPRoute as read, before it is known which Gateway matters: read once per list
    of routes and shared by every pass (a tenant's largest routes cost one parse, not one
    per service)."""

    namespace: str
    name: str
    created: str
    hostnames: tuple[str, ...]
    matches: tuple[RequestMatch, ...]
    # (namespace, name, sectionName or "") of each Gateway it names in parentRefs.
    parents: tuple[tuple[str, str, str], ...]
    # (namespace, name, refused) of each Gateway whose controller answered: refused when
    # it said Accepted=False for the route's current generation.
    answers: tuple[tuple[str, str, bool], ...]


def _parents(namespace: str, spec: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    out = []
    for ref in map(_dict, _list(spec.get("parentRefs"))):
        if (
            _str(ref.get("group"), GATEWAY_GROUP) != GATEWAY_GROUP
            or _str(ref.get("kind"), "Gateway") != "Gateway"
        ):
            continue
        out.append(
            (_str(ref.get("namespace"), namespace), _str(ref.get("name")), _str(ref.get("sectionName")))
        )
    return tuple(out)


def _answers(namespace: str, obj: Mapping[str, Any]) -> tuple[tuple[str, str, bool], ...]:
    generation = _dict(obj.get("metadata")).get("generation")
    out = []
    for parent in map(_dict, _list(_dict(obj.get("status")).get("parents"))):
        ref = _dict(parent.get("parentRef"))
        accepted = next(
            (c for c in map(_dict, _list(parent.get("conditions"))) if c.get("type") == "Accepted"), {}
        )
        refused = accepted.get("observedGeneration") == generation and accepted.get("status") == "False"
        out.append((_str(ref.get("namespace"), namespace), _str(ref.get("name")), refused))
    return tuple(out)


def observe(obj: Mapping[str, Any]) -> Observed:
    """Read an HTTPRoute as the API server would default it, whatever it holds."""
    metadata = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    namespace = _str(metadata.get("namespace"), "default")
    return Observed(
        namespace=namespace,
        name=_str(metadata.get("name")),
        created=_str(metadata.get("creationTimestamp")),
        hostnames=tuple(h.lower() for h in _list(spec.get("hostnames")) if isinstance(h, str)),
        matches=_matches(spec),
        parents=_parents(namespace, spec),
        answers=_answers(namespace, obj),
    )


def on_gateway(route: Observed, gateway_namespace: str, gateway_name: str) -> Route | None:
    """The route as it competes on this Gateway; None when it does not attach to it, or
    the Gateway's controller refused it for its current generation (it then takes no
    request; one not yet answered might). Status is the controller's to write: a tenant
    who may write `httproutes/status` could hide a route this way."""
    gateway = (gateway_namespace, gateway_name)
    sections = [section for namespace, name, section in route.parents if (namespace, name) == gateway]
    if not sections:
        return None
    refusals = [refused for namespace, name, refused in route.answers if (namespace, name) == gateway]
    if refusals and all(refusals):
        return None
    return Route(
        namespace=route.namespace,
        name=route.name,
        created=route.created,
        hostnames=route.hostnames,
        matches=route.matches,
        sections=None if "" in sections else frozenset(sections),
    )


def route_of(obj: Mapping[str, Any], gateway_namespace: str, gateway_name: str) -> Route | None:
    return on_gateway(observe(obj), gateway_namespace, gateway_name)


# --- hosts ---------------------------------------------------------------------------------


def host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return pattern == host


def host_rank(hostnames: tuple[str, ...], host: str) -> tuple[int, int] | None:
    """How specifically a route's hostnames match `host`: (characters of the longest
    matching non-wildcard hostname, characters of the longest matching hostname); (0, 0)
    for a route without hostnames (it takes any host); None when it does not take `host`."""
    if not hostnames:
        return (0, 0)
    found = [pattern for pattern in hostnames if host_matches(pattern, host)]
    if not found:
        return None
    exact = max((len(p) for p in found if not p.startswith("*.")), default=0)
    return (exact, max(len(p) for p in found))


def candidate_hosts(*routes: Route) -> list[str]:
    """One host per class of hosts the routes' hostnames cannot tell apart: every exact
    hostname, one more host under each wildcard, and one no hostname names."""
    hosts = {_ANY_LABEL}
    for route in routes:
        for pattern in route.hostnames:
            hosts.add(_ANY_LABEL + pattern[1:] if pattern.startswith("*.") else pattern)
    return sorted(hosts)


# --- paths and request matches -----------------------------------------------------------


def _trimmed(prefix: str) -> str:
    return prefix.rstrip("/") or "/"


def _under(prefix: str, path: str) -> bool:
    """A PathPrefix matches whole path elements: /a covers /a and /a/b, never /ab."""
    prefix = _trimmed(prefix)
    return prefix in {"/", path} or path.startswith(prefix + "/")


def paths_overlap(a: RequestMatch, b: RequestMatch) -> bool:
    """Whether one request path can satisfy both (a regular expression: assume it can)."""
    if REGEX in (a.path_type, b.path_type):
        return True
    if a.path_type == EXACT and b.path_type == EXACT:
        return a.path == b.path
    if a.path_type == EXACT:
        return _under(b.path, a.path)
    if b.path_type == EXACT:
        return _under(a.path, b.path)
    return _under(a.path, _trimmed(b.path)) or _under(b.path, _trimmed(a.path))


def _values_overlap(a: tuple[ValueMatch, ...], b: tuple[ValueMatch, ...]) -> bool:
    theirs = {entry.name: entry for entry in b}
    for entry in a:
        other = theirs.get(entry.name)
        if other is not None and entry.type == EXACT and other.type == EXACT and entry.value != other.value:
            return False  # one header (or parameter) cannot hold two values
    return True


def requests_overlap(a: RequestMatch, b: RequestMatch) -> bool:
    if a.method is not None and b.method is not None and a.method != b.method:
        return False
    return paths_overlap(a, b) and _values_overlap(a.headers, b.headers) and _values_overlap(a.query, b.query)


def _path_rank(match: RequestMatch) -> tuple[int, int]:
    return (1, len(match.path)) if match.path_type == EXACT else (0, len(match.path))


def match_rank(match: RequestMatch) -> tuple[tuple[int, int], int, int, int]:
    """Precedence of a match, highest first: path, method, header and query matches."""
    return (_path_rank(match), int(match.method is not None), len(match.headers), len(match.query))


# --- precedence ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shadow:
    """`route` takes requests one of our matches covers, and why."""

    route: str  # namespace/name
    reason: str


def _listeners_meet(a: Route, b: Route) -> bool:
    return a.sections is None or b.sections is None or bool(a.sections & b.sections)


def _older(other: Route, ours: Route) -> bool:
    """`other` wins a tie: older, or as old and first by namespace/name."""
    return (other.created, other.key) < (ours.created, ours.key)


def _host_contest(ours: Route, other: Route) -> tuple[str | None, bool]:
    """Over every host both routes take: one where `other`'s hostname is the more specific
    (None if there is none), and whether on some host neither is (matches then decide).
    Host ranks do not depend on the matches, so this runs once per pair of routes."""
    more_specific: str | None = None
    tie = False
    for host in candidate_hosts(ours, other):
        ours_rank, their_rank = host_rank(ours.hostnames, host), host_rank(other.hostnames, host)
        if ours_rank is None or their_rank is None:
            continue
        if their_rank > ours_rank and more_specific is None:
            more_specific = host.replace(_ANY_LABEL, "*")
        tie = tie or their_rank == ours_rank
    return more_specific, tie


def _wins_tie(other: Route, ours: Route, mine: RequestMatch, theirs: RequestMatch) -> str | None:
    """Why `theirs` beats `mine` on a host where neither hostname is the more specific."""
    if REGEX in (theirs.path_type, mine.path_type):
        return "its regular-expression path may cover ours (their precedence is implementation-specific)"
    if match_rank(theirs) != match_rank(mine):
        more = match_rank(theirs) > match_rank(mine)
        return "its match is more specific (longer path, method, headers or query)" if more else None
    if _older(other, ours):
        return f"it has the same precedence and is older (created {other.created or 'unknown'})"
    return None


def _keyed_by_header(matches: tuple[RequestMatch, ...]) -> tuple[str, dict[str, RequestMatch]] | None:
    """When our matches differ only in the value of one Exact header (`model` mode: one
    per served name), that header's name and the match per value; else None. Another
    route's match then meets at most the one with its value (or any, if it does not pin
    that header), so a check costs one look-up per match, not one per pair."""
    first = matches[0]
    if len(matches) < 2 or len(first.headers) != 1:
        return None
    name = first.headers[0].name
    shared = (first.path_type, first.path, first.method, first.query)
    by_value: dict[str, RequestMatch] = {}
    for match in matches:
        if (match.path_type, match.path, match.method, match.query) != shared or len(match.headers) != 1:
            return None
        (header,) = match.headers
        if header.name != name or header.type != EXACT:
            return None
        by_value[header.value] = match
    return name, by_value


def _meeting(
    ours: tuple[RequestMatch, ...],
    keyed: tuple[str, dict[str, RequestMatch]] | None,
    theirs: RequestMatch,
) -> Iterable[RequestMatch]:
    """Our matches that may meet `theirs` (a superset; requests_overlap decides)."""
    if keyed is None:
        return ours
    name, by_value = keyed
    pinned = next((h for h in theirs.headers if h.name == name and h.type == EXACT), None)
    if pinned is None:
        return ours[:1]  # the others differ from it only in a header `theirs` leaves open
    found = by_value.get(pinned.value)
    return (found,) if found is not None else ()


def shadows(ours: Route, other: Route) -> Shadow | None:
    """Whether `other` takes some request that one of our matches covers. Bounded by the
    API's own limits whatever a tenant writes: 16 hostnames, 128 matches a route."""
    if other.key == ours.key or not _listeners_meet(ours, other):
        return None
    more_specific, tie = _host_contest(ours, other)
    if more_specific is None and not tie:
        return None
    keyed = _keyed_by_header(ours.matches)
    for theirs in other.matches:
        for mine in _meeting(ours.matches, keyed, theirs):
            if not requests_overlap(mine, theirs):
                continue
            if more_specific is not None:
                return Shadow(other.key, f"its hostname matches {more_specific} more specifically")
            reason = _wins_tie(other, ours, mine, theirs)
            if reason is not None:
                return Shadow(other.key, reason)
    return None


def shadowing(ours: Route, others: Iterable[Route]) -> list[Shadow]:
    """Every route that takes some of our requests, oldest first."""
    found = [(other, shadows(ours, other)) for other in others]
    return [shadow for other, shadow in sorted(found, key=lambda f: (f[0].created, f[0].key)) if shadow]
