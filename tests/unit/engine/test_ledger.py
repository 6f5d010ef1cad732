"""The table ledger's bookkeeping without Spark: whose marker is newest, what a commit keeps
for the next marker, counts and events."""

from __future__ import annotations

from frazil.engine.ledger import TableLedger
from frazil.engine.outcomes import Written
from frazil.engine.window import BatchWindow
from frazil.progress.events import CommitEvent, Event, SchemaEvolved
from frazil.progress.markers import Marker
from frazil.progress.offset_rules import PartitionStats
from frazil.progress.table_markers import TableState
from frazil.sink.tables import Target


def _target(name: str = "db.t") -> Target:
    return Target(name, f"lake.{name}", None, None)  # type: ignore[arg-type]


def _window(batch_id: int = 4) -> BatchWindow:
    return BatchWindow(
        batch=None,  # type: ignore[arg-type]
        batch_id=batch_id,
        planned={"t": {0: 10, 1: 5}},
        start={"t": {0: 6, 1: 5}},
        lagging={("t", 1)},
        started=0.0,
        query_id="q",
    )


def _ledger(events: list[Event], target: Target) -> TableLedger:
    return TableLedger("p", {target.name: target}, None, events.append)


def test_a_commit_keeps_its_observations_for_the_next_marker_and_reports_it() -> None:
    events: list[Event] = []
    target = _target()
    ledger = _ledger(events, target)
    window = _window()
    marker = window.marker(None, "p", {})
    ledger.committed(
        window, target.name, Written(target, marker, 4, {("t", 0): 1_000, ("t", 1): None}, 2048)
    )
    assert target.last is marker
    assert target.pending == {("t", 0): PartitionStats(1_000)}
    assert target.lagging == {("t", 1)}
    assert ledger.stats.records == 4
    (event,) = events
    assert isinstance(event, CommitEvent)
    assert (event.table, event.batch_id, event.records, event.total_records) == ("db.t", 4, 4, 4)
    assert event.offsets == {"t": {0: 10, 1: 5}}
    assert event.max_timestamps == {("t", 0): 1_000}
    assert event.bytes_written == 2048


def test_observations_carry_over_only_while_the_run_made_the_newest_marker() -> None:
    target = _target()
    ledger = _ledger([], target)
    window = _window()
    marker = window.marker(None, "p", {})
    ledger.committed(window, target.name, Written(target, marker, 1, {("t", 0): 7}))
    ours = TableState(marker, 1, 1)
    theirs = TableState(Marker("p", {"t": {0: 10}}), 2, 1)
    assert ledger.ours(ours, target) and not ledger.ours(theirs, target)
    assert ledger.observed(target, ours) == {("t", 0): PartitionStats(7)}
    assert ledger.observed(target, theirs) == {}
    assert ledger.observed(target, None) == {}


def test_counts_and_schema_changes_add_up() -> None:
    events: list[Event] = []
    ledger = _ledger(events, _target())
    ledger.count(unmatched=2, filtered=3)
    ledger.count(filtered=1)
    ledger.evolved("db.t", 5, ("add amount: bigint",))
    assert (ledger.stats.unmatched, ledger.stats.filtered) == (2, 4)
    assert ledger.stats.evolutions == ["db.t: add amount: bigint"]
    assert events == [SchemaEvolved("p", "db.t", 5, ("add amount: bigint",))]


def test_without_a_listener_events_go_nowhere() -> None:
    ledger = TableLedger("p", {})
    ledger.emit(SchemaEvolved("p", "db.t", 1, ()))
    ledger.finish(None, routed=True, query_id="q")  # no tables: nothing to commit


def test_commits_report_the_valid_through_the_table_records_and_rows_per_table() -> None:
    """One truth: a commit event carries the marker's valid-through (what `frazil status`
    reads back), not one its own timestamps make true only at the next commit; the
    pipeline's is the lowest over its tables; rows are counted per table."""
    events: list[Event] = []
    a, b = _target("db.a"), _target("db.b")
    ledger = TableLedger("p", {"db.a": a, "db.b": b}, None, events.append)
    window = BatchWindow(
        batch=None,  # type: ignore[arg-type]
        batch_id=1,
        planned={"t": {0: 10}},
        start=None,
        lagging=set(),
        started=0.0,
        query_id="q",
        planned_at_ms=1_000_000,
    )
    first = window.marker(None, "p", {})
    ledger.committed(window, a.name, Written(a, first, 3, {("t", 0): 999_000}))
    later = Marker("p", {"t": {0: 10}}, valid_through_ms=first.valid_through_ms + 500)  # type: ignore[operator]
    ledger.committed(window, b.name, Written(b, later, 2, {("t", 0): 999_500}))
    assert [e.valid_through_ms for e in events if isinstance(e, CommitEvent)] == [
        first.valid_through_ms,
        later.valid_through_ms,
    ]
    assert ledger.valid_through_ms() == first.valid_through_ms
    assert ledger.stats.rows_by_table == {"db.a": 3, "db.b": 2}
    assert ledger.stats.records == 5
