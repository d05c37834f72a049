"""kopf handles resources only on the holder of the leader Lease: one election. I/O.

kopf's own peering elects a replica by priority from records that live 60 s, apart from
the Lease (controller.leader) that gates the operator's own loops; the two disagreed
(one replica reconciled while the other autoscaled), and after the active replica died
an edit waited for its peering record to expire. So every replica runs kopf standalone
(each serves the admission webhook and /healthz), and kopf's watch streams are paused
on every replica but the Lease holder. The pause is kopf's own: a toggle in the
`operator_paused` set its peering uses, which stops listing and watching altogether, so
a standby neither runs a handler nor writes kopf's progress and diff-base annotations
(a handler that merely returned on a standby would have its change recorded as handled
and the leader would skip it). A replica that becomes leader lists every resource
afresh, as at startup: resume handlers for what it never saw, update handlers for
every spec whose last-handled configuration (written by the previous leader) differs.

kopf has no public hook for this toggle set; `install` wraps its orchestrator (the
coroutine that receives the set) for the process. `tests/unit/reconcile/test_kopf_gate.py`
runs the real kopf against a fake API server and fails if a kopf upgrade moves it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

PAUSE_REASON = "another replica holds the leader Lease"
# How often the gate follows the elector: far below the Lease's timings.
POLL_S = 0.2

IsLeader = Callable[[], bool]


async def follow(toggle: Any, is_leader: IsLeader, poll_s: float = POLL_S) -> None:
    """Keep `toggle` on (kopf paused) exactly while this replica is not the leader."""
    paused = toggle.is_on()
    while True:
        try:
            leader = is_leader()
        except Exception:  # never leave kopf running on a question we could not answer
            logger.exception("leader election: cannot tell whether this replica leads")
            leader = False
        if leader == paused:
            paused = not leader
            await toggle.turn_to(paused)
            if leader:
                logger.info("leader election: this replica holds the Lease; kopf's handlers run here")
            else:
                logger.info("leader election: %s; kopf's handlers pause here", PAUSE_REASON)
        await asyncio.sleep(poll_s)


def install(is_leader: IsLeader, poll_s: float = POLL_S) -> None:
    """Pause kopf's resource handling (in this process) whenever `is_leader()` is False."""
    from kopf._core.reactor import orchestration

    original = getattr(orchestration.orchestrator, "__wrapped_orchestrator__", orchestration.orchestrator)

    async def gated(*, operator_paused: Any, **kwargs: Any) -> None:
        toggle = await operator_paused.make_toggle(not is_leader(), name=PAUSE_REASON)
        follower = asyncio.create_task(follow(toggle, is_leader, poll_s), name="inferfleet leader gate")
        try:
            await original(operator_paused=operator_paused, **kwargs)
        finally:
            follower.cancel()

    gated.__wrapped_orchestrator__ = original  # type: ignore[attr-defined]
    orchestration.orchestrator = gated
