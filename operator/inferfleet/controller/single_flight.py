"""One reconcile pass at a time per InferenceService, and no pile-up behind it.

Three triggers run passes on their own threads: kopf's handlers for the resource, kopf's
handlers for its children (a Deployment's status moving re-runs the parent) and the
resync loop. Two passes of one service at once read the same resourceVersion and the
later status write fails with 409, which kopf then retries with backoff: under a burst
of child events that is a storm of wasted passes. So passes of one service run one after
the other, and a trigger that may coalesce skips its pass when another is already queued
behind the running one: that queued pass has not read anything yet, so it sees every
change the skipped one would have seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

Key = tuple[str, str]  # (namespace, name)
T = TypeVar("T")


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    queued: int = 0  # callers registered that have not started their pass
    holders: int = 0  # callers registered at all (the slot goes when none is left)


class Coalesced(Exception):
    """The pass was skipped: one queued behind the running pass will read the same."""


class SingleFlight:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._slots: dict[Key, _Slot] = {}

    def run(self, key: Key, work: Callable[[], T], *, may_coalesce: bool) -> T:
        """Run `work` once no other pass of `key` runs; raise `Coalesced` instead when
        `may_coalesce` and a pass of `key` is already waiting to start."""
        with self._mutex:
            slot = self._slots.setdefault(key, _Slot())
            if may_coalesce and slot.queued > 0:
                raise Coalesced(f"{key[0]}/{key[1]}")
            slot.queued += 1
            slot.holders += 1
        try:
            with slot.lock:
                with self._mutex:
                    slot.queued -= 1
                return work()
        finally:
            with self._mutex:
                slot.holders -= 1
                if slot.holders == 0:
                    del self._slots[key]

    def queued(self, key: Key) -> int:
        """Passes of `key` registered but not started (for tests and debugging)."""
        with self._mutex:
            slot = self._slots.get(key)
            return 0 if slot is None else slot.queued

    def __len__(self) -> int:
        """Services with a pass running or waiting (for tests and debugging)."""
        with self._mutex:
            return len(self._slots)
