"""Posting Events without letting them fail the work they describe.

An Event is a notice, not state: the conditions in status carry what the user must
know. A namespace being deleted refuses new content (403), a quota on events or an
overloaded API server may refuse one too; none of that may fail a reconcile pass or an
autoscaler tick that has already done its writes, or send kopf into a retry loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from inferfleet.cluster.errors import ApiError
from inferfleet.cluster.port import Cluster, EventType

logger = logging.getLogger(__name__)


class EventNotice(Protocol):
    """What an Event says (the reconcile pass's and the autoscaler step's events)."""

    @property
    def type(self) -> EventType: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...


def post_events(cluster: Cluster, regarding: Mapping[str, Any], events: Iterable[EventNotice]) -> int:
    """Post each event about `regarding`; returns how many the API server refused."""
    refused = 0
    for event in events:
        try:
            cluster.create_event(regarding, type_=event.type, reason=event.reason, message=event.message)
        except ApiError as error:
            refused += 1
            meta = regarding.get("metadata") or {}
            logger.warning(
                "event %s on %s/%s not posted (status is written): %s",
                event.reason,
                meta.get("namespace"),
                meta.get("name"),
                error,
            )
    return refused
