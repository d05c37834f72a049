"""Every condition type and every reason the operator can write is documented, once.

The one table is hack/docs/conditions.yaml (what each means and what to do), from which
hack/gen_docs.py renders docs/reference/conditions.md and the troubleshooting page. What
the code can write is collected from the source by `gen_docs.written_reasons()` (as
tests/unit/test_condition_owners.py collects condition types), so a new reason fails here
until it has its row:

- every `REASON_*` / `EVENT_*` string constant anywhere in the package;
- every string literal handed over as a reason: `ConditionUpdate(type, status, REASON,
  ...)`, `set_condition(conditions, type, status, REASON, ...)`, `Event(type, REASON,
  ...)`, `CacheCondition(status, REASON, ...)`, any `reason=` keyword of those, and the
  `(status, REASON, message)` triples the reconciler's rules return;
- the fetchers' failure reasons (`caching.precache.fetch_errors.REASONS`), which CacheReady shows.

And the other way round: a row whose reason the code never writes is a stale row.
"""

from __future__ import annotations

from typing import Any

from inferfleet.api import labels
from tests.toolkit.scripts import load_script

gen_docs = load_script("hack/gen_docs.py", "inferfleet_gen_docs_reasons")
STATUSES = {"True", "False", "Unknown"}
EVENT_STATUSES = {"Normal", "Warning"}


def rows() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = gen_docs.condition_rows()
    assert found, "hack/docs/conditions.yaml has no rows"
    return found


def test_every_row_is_complete_and_names_its_writer() -> None:
    for row in rows():
        assert row["condition"] in (*labels.CONDITION_TYPES, gen_docs.EVENT_ROW), row
        assert row["reasons"] and row["meaning"] and row["action"], row
        if row["condition"] == gen_docs.EVENT_ROW:
            assert row["status"] in EVENT_STATUSES, row
            assert row["writer"] in set(labels.CONDITION_OWNERS.values()), row
        else:
            assert row["status"] in STATUSES, row
            assert row["writer"] == labels.CONDITION_OWNERS[row["condition"]], row


def test_every_condition_type_has_rows() -> None:
    documented = {row["condition"] for row in rows()}
    assert set(labels.CONDITION_TYPES) - documented == set()


def test_every_reason_the_code_can_write_is_in_the_table() -> None:
    documented = {reason for row in rows() for reason in row["reasons"]}
    written = gen_docs.written_reasons()
    missing = {reason: where for reason, where in written.items() if reason not in documented}
    assert missing == {}, f"add a row to hack/docs/conditions.yaml for each: {missing}"


def test_the_table_names_no_reason_the_code_never_writes() -> None:
    written = gen_docs.written_reasons()
    stale = sorted({reason for row in rows() for reason in row["reasons"]} - set(written))
    assert stale == []


def test_the_collector_finds_what_it_is_meant_to() -> None:
    """The collector itself: constants, literals in each position, the fetchers' reasons."""
    found = gen_docs.written_reasons()
    assert {"Available", "NoWorkloads", "NoFeasibleTier", "ObjectConflict", "RouteShadowed"} <= set(found)
    assert {"ScaledUp", "PlanChanged", "TierPruned", "WorkloadDrift", "PromptsRejected"} <= set(found)
    assert {"BadCredentials", "DiskFull", "NodeCacheVolumePending", "Probing"} <= set(found)
