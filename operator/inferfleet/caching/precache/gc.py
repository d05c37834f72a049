"""Which cached revisions to delete to stay under a node's size budget. Pure.

Policy: least recently used first, where "used" is the last time a pre-cache pod asked
for the revision (it touches the revision when it fetches or re-pins it). Never evict a
revision that is in use (a serving pod or a pre-cache pod holds its lock) or that the
caller protects (the revision it just fetched). When everything left is in use or
protected the plan says by how much the budget is exceeded instead of breaking a pod.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CachedRevision:
    model_key: str
    revision_id: str
    size_bytes: int
    last_used_s: float
    in_use: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_key, self.revision_id)


@dataclass(frozen=True)
class GcPlan:
    evict: tuple[CachedRevision, ...]
    used_bytes_before: int
    used_bytes_after: int
    budget_bytes: int

    @property
    def over_budget_bytes(self) -> int:
        return max(0, self.used_bytes_after - self.budget_bytes)

    def summary(self) -> str:
        gib = 1024**3
        text = (
            f"cache uses {self.used_bytes_before / gib:.2f} GiB "
            f"of a {self.budget_bytes / gib:.2f} GiB budget; "
            f"evicting {len(self.evict)} revision(s) → {self.used_bytes_after / gib:.2f} GiB"
        )
        if self.over_budget_bytes:
            text += (
                f"; still {self.over_budget_bytes / gib:.2f} GiB over budget because the rest is "
                "in use or just fetched"
            )
        return text


def plan_gc(
    revisions: list[CachedRevision],
    budget_bytes: int,
    protect: frozenset[tuple[str, str]] = frozenset(),
    extra_needed_bytes: int = 0,
) -> GcPlan:
    """Evict LRU revisions until `used + extra_needed <= budget` (extra_needed: room a
    download about to start needs)."""
    used = sum(r.size_bytes for r in revisions)
    target = budget_bytes - extra_needed_bytes
    candidates = sorted(
        (r for r in revisions if not r.in_use and r.key not in protect),
        # Oldest first; ties broken by size (free more with fewer deletions), then name.
        key=lambda r: (r.last_used_s, -r.size_bytes, r.model_key, r.revision_id),
    )
    evict: list[CachedRevision] = []
    remaining = used
    for revision in candidates:
        if remaining <= target:
            break
        evict.append(revision)
        remaining -= revision.size_bytes
    return GcPlan(
        evict=tuple(evict), used_bytes_before=used, used_bytes_after=remaining, budget_bytes=budget_bytes
    )
