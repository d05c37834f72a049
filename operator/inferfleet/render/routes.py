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


def parent_sections(
    route: Mapping[str, Any], gateway_namespace: str, gateway_name: str
) -> frozenset[str] | None:
    """The listeners a route attaches to on the Gateway; None: all of them; an empty set:
    it does not attach to this Gateway at all."""
    namespace = _str(_dict(route.get("metadata")).get("namespace"), "default")
    sections: set[str] = set()
    attached = False
    for ref in map(_dict, _list(_dict(route.get("spec")).get("parentRefs"))):
        if (
            _str(ref.get("group"), GATEWAY_GROUP) != GATEWAY_GROUP
            or _str(ref.get("kind"), "Gateway") != "Gateway"
        ):
            continue
        if (
            _str(ref.get("name")) != gateway_name
            or _str(ref.get("namespace"), namespace) != gateway_namespace
        ):
            continue
        attached = True
        section = _str(ref.get("sectionName"))
        if not section:
            return None
        sections.add(section)
    return frozenset(sections) if attached else frozenset()


def refused_by(route: Mapping[str, Any], gateway_namespace: str, gateway_name: str) -> bool:
    """The Gateway's controller said, for the route's current generation, that it does not
    accept it: such a route takes no request. A route not yet answered might."""
    metadata = _dict(route.get("metadata"))
    namespace = _str(metadata.get("namespace"), "default")
    answers = []
    for parent in map(_dict, _list(_dict(route.get("status")).get("parents"))):
        ref = _dict(parent.get("parentRef"))
        if (
            _str(ref.get("name")) != gateway_name
            or _str(ref.get("namespace"), namespace) != gateway_namespace
        ):
            continue
        accepted = next(
            (c for c in map(_dict, _list(parent.get("conditions"))) if c.get("type") == "Accepted"), {}
        )
        current = accepted.get("observedGeneration") == metadata.get("generation")
        answers.append(current and accepted.get("status") == "False")
    return bool(answers) and all(answers)


def route_of(obj: Mapping[str, Any], gateway_namespace: str, gateway_name: str) -> Route | None:
    """The route as it competes on this Gateway; None when it does not attach to it or
    the Gateway refused it."""
    sections = parent_sections(obj, gateway_namespace, gateway_name)
    if sections is not None and not sections:
        return None
    if refused_by(obj, gateway_namespace, gateway_name):
        return None
    metadata = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    return Route(
        namespace=_str(metadata.get("namespace"), "default"),
        name=_str(metadata.get("name")),
        created=_str(metadata.get("creationTimestamp")),
        hostnames=tuple(h.lower() for h in _list(spec.get("hostnames")) if isinstance(h, str)),
        matches=_matches(spec),
        sections=sections,
    )


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


def _why(other: Route, ours: Route, mine: RequestMatch, theirs: RequestMatch, host: str) -> str | None:
    """Why `theirs` (of `other`) beats `mine` (of `ours`) for requests to `host` that both
    cover, or None when it does not."""
    ours_host, their_host = host_rank(ours.hostnames, host), host_rank(other.hostnames, host)
    if ours_host is None or their_host is None:
        return None
    if their_host != ours_host:
        return (
            f"its hostname matches {host.replace(_ANY_LABEL, '*')} more specifically"
            if their_host > ours_host
            else None
        )
    if REGEX in (theirs.path_type, mine.path_type):
        return "its regular-expression path may cover ours (their precedence is implementation-specific)"
    if match_rank(theirs) != match_rank(mine):
        return (
            "its match is more specific (longer path, method, headers or query)"
            if match_rank(theirs) > match_rank(mine)
            else None
        )
    if _older(other, ours):
        return f"it has the same precedence and is older (created {other.created or 'unknown'})"
    return None


def shadows(ours: Route, other: Route) -> Shadow | None:
    """Whether `other` takes some request that one of our matches covers."""
    if other.key == ours.key or not _listeners_meet(ours, other):
        return None
    hosts = candidate_hosts(ours, other)
    for mine in ours.matches:
        for theirs in other.matches:
            if not requests_overlap(mine, theirs):
                continue
            for host in hosts:
                reason = _why(other, ours, mine, theirs, host)
                if reason is not None:
                    return Shadow(other.key, reason)
    return None


def shadowing(ours: Route, others: Iterable[Route]) -> list[Shadow]:
    """Every route that takes some of our requests, oldest first."""
    found = [(other, shadows(ours, other)) for other in others]
    return [shadow for other, shadow in sorted(found, key=lambda f: (f[0].created, f[0].key)) if shadow]
