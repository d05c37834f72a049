"""Every HTTPRoute the operator can list, for the front door's shadow check.

A service's route is shadowed when another route on the same Gateway (any team's) takes
requests its match covers (render.route_matching decides, reconcile.frontdoor_status reports). That
needs the routes of every namespace the operator may list: the whole cluster by
default, else the watched namespaces (routes elsewhere are not seen). One list serves
every pass for `max_age_s`, so a resync over N services costs one list, not N.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from inferfleet.cluster import Cluster, KindNotServed, access
from inferfleet.controller.watched import Watched
from inferfleet.render.route_matching import Observed, observe

# A route made by someone else is seen within this long plus one resync interval.
ROUTES_MAX_AGE_S = 10.0


class GatewayRoutes:
    """The HTTPRoutes in the watched namespaces, listed at most once per `max_age_s`."""

    def __init__(
        self,
        cluster: Cluster,
        namespaces: Iterable[str] = (),
        max_age_s: float = ROUTES_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.watched = Watched(namespaces)
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._listed_at: float | None = None
        self._items: list[Observed] = []

    def all(self) -> list[Observed]:
        """The routes, read once per list; the world's errors (TransientApiError) reach the
        pass, which retries."""
        with self._lock:  # one list at a time: concurrent passes share its answer
            now = self.clock()
            if self._listed_at is not None and now - self._listed_at < self.max_age_s:
                return self._items
            items: list[dict[str, Any]]
            try:
                items = self.watched.list(
                    self.cluster, access.HTTP_ROUTE.api_version, access.HTTP_ROUTE.kind, {}
                )
            except KindNotServed:
                items = []  # no Gateway API: no route anywhere
            self._items, self._listed_at = [observe(item) for item in items], now
            return self._items
