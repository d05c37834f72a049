"""Posting Events without letting them fail the work they describe.

An Event is a notice, not state: the conditions in status carry what the user must
know. A namespace being deleted refuses new content (403), a quota on events or an
overloaded API server may refuse one too; none of that may fail a reconcile pass or an
autoscaler tick that has already done its writes, or send kopf into a retry loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from inferfleet.cluster.errors import ApiError
from inferfleet.cluster.port import Cluster
from inferfleet.kubedata import Event

logger = logging.getLogger(__name__)


def post_events(cluster: Cluster, regarding: Mapping[str, Any], events: Iterable[Event]) -> None:
    """Post each event about `regarding`; one the API server refuses is logged and dropped.

    The port escapes and caps each reason and message (api.safe_text)."""
    for event in events:
        try:
            cluster.create_event(regarding, type_=event.type, reason=event.reason, message=event.message)
        except ApiError as error:
            meta = regarding.get("metadata") or {}
            logger.warning(
                "event %s on %s/%s not posted (status is written): %s",
                event.reason,
                meta.get("namespace"),
                meta.get("name"),
                error,
            )
