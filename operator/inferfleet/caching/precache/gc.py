"""Which cached revisions to delete to stay under a node's size budget. Pure.

Policy: least recently used first, where "used" is the last time a pre-cache pod asked
for the revision (it touches the revision when it fetches or re-pins it). Never evict a
revision that is in use (a serving pod or a pre-cache pod holds its lock) or that the
caller protects (the revision it just fetched). When everything left is in use or
protected the plan says by how much the budget is exceeded instead of breaking a pod.

Compile caches (caching/precache/compile_cache.py) are entries of their own, counted in
the same budget and evicted least recently used like the weights (a serving pod that
restored or published one holds it while it runs), and each belongs to one weights
revision (`of_revision`): evicting a revision evicts its compile caches with it, and a
compile cache whose revision is no longer on the node goes whatever the budget.
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
    # A compile cache: the weights revision (model key, revision id) it was built from.
    of_revision: tuple[str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_key, self.revision_id)

    @property
    def is_compile_cache(self) -> bool:
        return self.of_revision is not None


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
    download about to start needs); compile caches whose revision is gone first, and
    with each evicted revision its compile caches."""
    used = sum(r.size_bytes for r in revisions)
    target = budget_bytes - extra_needed_bytes
    weights = {r.key for r in revisions if not r.is_compile_cache}
    built_from: dict[tuple[str, str], list[CachedRevision]] = {}
    for entry in revisions:
        if entry.of_revision is not None and not entry.in_use:
            built_from.setdefault(entry.of_revision, []).append(entry)
    evict: list[CachedRevision] = []
    chosen: set[tuple[str, str]] = set()
    remaining = used

    def take(entry: CachedRevision) -> None:
        nonlocal remaining
        if entry.key not in chosen:
            chosen.add(entry.key)
            evict.append(entry)
            remaining -= entry.size_bytes

    for entry in revisions:
        if entry.of_revision is not None and entry.of_revision not in weights and not entry.in_use:
            take(entry)  # an orphan: its weights are gone
    candidates = sorted(
        (r for r in revisions if not r.in_use and r.key not in protect),
        # Oldest first; ties broken by size (free more with fewer deletions), then name.
        key=lambda r: (r.last_used_s, -r.size_bytes, r.model_key, r.revision_id),
    )
    for revision in candidates:
        if remaining <= target:
            break
        if revision.key in chosen:
            continue
        take(revision)
        for compiled in built_from.get(revision.key, []) if not revision.is_compile_cache else []:
            take(compiled)
    return GcPlan(
        evict=tuple(evict), used_bytes_before=used, used_bytes_after=remaining, budget_bytes=budget_bytes
    )
