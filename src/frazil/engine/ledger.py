"""The table ledger: a pipeline's tables, what each holds of the stream (its marker), what the
run committed to each, and the run's counts and events."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from frazil.engine.outcomes import Written
from frazil.engine.threads import each
from frazil.engine.window import BatchWindow, Partition
from frazil.errors import StaleMarker, TableRolledBack
from frazil.progress import markers, offset_rules, start, table_markers
from frazil.progress.events import CommitEvent, Event, SchemaEvolved
from frazil.progress.freshness import pipeline_valid_through
from frazil.sink.iceberg import IcebergTables, commits_tables_at_once, iceberg_catalog
from frazil.sink.tables import TableSet, Target
from frazil.source.offsets import offsets_to_json

log = logging.getLogger("frazil.engine.batch")

#: A routed table that gets no records still gets a marker this often (seconds), so that a
#: restart from the tables never replays far for it.
IDLE_MARKER_SECONDS = 60.0


@dataclass
class BatchStats:
    """What one handler has done since the run started."""

    batches: int = 0
    skipped_batches: int = 0
    #: Rows committed to the tables: a record routed to two tables counts twice.
    records: int = 0
    #: :attr:`records` per table (config name).
    rows_by_table: dict[str, int] = field(default_factory=dict)
    #: Records a route matched to no table, with ``default: skip``.
    unmatched: int = 0
    #: Records dropped as configured: a transform's ``filter``, ``tombstones: skip``.
    filtered: int = 0
    #: Schema changes made to tables (one line each).
    evolutions: list[str] = field(default_factory=list)
    last_batch_id: int | None = None
    last_commit_wall_ms: int | None = None


@dataclass
class TableLedger:
    """A pipeline's tables and the run's account of them.

    Attributes:
        pipeline: The pipeline's name.
        targets: The tables the pipeline writes, by config name (routed tables join as the
            batches create or adopt them).
        tables: Opens and creates the pipeline's tables; None only in tests.
        on_event: Receives the run's events (commits, schema changes).
        stats: The run's counts.
    """

    pipeline: str
    targets: dict[str, Target]
    tables: TableSet | None = None
    on_event: Callable[[Event], None] | None = None
    stats: BatchStats = field(default_factory=BatchStats)
    #: The pipeline's ``valid_through_slack`` (ms), for the stop's final markers.
    slack_ms: int = offset_rules.CAUGHT_UP_SLACK_MS
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: The tables' handles read at once, and the tables they were built for.
    _handles: tuple[tuple[int, ...], IcebergTables] | None = field(default=None, repr=False)

    def emit(self, event: Event) -> None:
        """Hand an event to the run's listener."""
        if self.on_event is not None:
            self.on_event(event)

    def handles(self) -> IcebergTables:
        """The pipeline's tables, to be read at once (kept while the tables stay the same: the
        JVM's list of them is built once)."""
        tables = [t.table for t in self.targets.values()]
        key = tuple(id(t) for t in tables)
        if self._handles is None or self._handles[0] != key:
            spark = tables[0].spark if tables else None
            assert spark is not None, "no tables to read"
            self._handles = (key, IcebergTables(spark, tables))
        return self._handles[1]

    def states(self) -> dict[str, table_markers.TableState]:
        """Each table's state (its newest marker), all tables read at once in the JVM."""
        names = list(self.targets)
        if not names:
            return {}
        found = table_markers.find_markers(self.handles(), self.pipeline)
        return dict(zip(names, found, strict=True))

    def check_moved(self, states: dict[str, table_markers.TableState]) -> None:
        """Compare each table's marker with what the run saw last, and remember it.

        A marker behind it (the table rolled back while the run went on) stops the batch: the
        records after the rollback point are read again only by a query started from the
        tables' markers. A marker ahead of it by another commit than this run's is another
        run of the pipeline: its records are in, the offset filter drops them here.

        Raises:
            TableRolledBack: A table's marker moved backwards.
        """
        for name, state in states.items():
            target = self.targets.get(name)
            if target is None:
                continue
            seen, found = target.seen, state.marker
            if state.retired:
                # Another pipeline's reset took the table over while this run went on (a
                # host still on the config before a rename): not a rollback to replay from.
                raise start.retired_error(self.pipeline, target.name)
            if seen is not None and (found is None or found.commit_id != seen.commit_id):
                if markers.behind(found, seen):
                    raise TableRolledBack(
                        f"pipeline {self.pipeline!r}: table {target.name} went back from "
                        f"{offsets_to_json(seen.offsets)} to "
                        f"{offsets_to_json(found.offsets) if found else 'no marker'} while the "
                        "run went on (rolled back?)"
                    )
                if found is not None:
                    log.warning(
                        "%s: table %s got batch %d from another run (%s, query %s); its "
                        "records are in, this run writes only what comes after them",
                        self.pipeline,
                        target.name,
                        found.batch_id,
                        found.run_by or "unknown",
                        found.query_id or "unknown",
                    )
            target.seen = found

    def forget_seen(self) -> None:
        """A new query starts from the tables as they are: nothing seen before counts."""
        for target in self.targets.values():
            target.seen = None

    def open(self, name: str) -> tuple[Target, table_markers.TableState]:
        """A table of the pipeline's, opened, and its state."""
        assert self.tables is not None
        target = self.tables.target(name)
        return target, self._state_of(target)

    def _state_of(self, target: Target) -> table_markers.TableState:
        """One table's state, read in one JVM call (:func:`table_markers.find_markers`, the
        rules of :func:`~table_markers.find_marker`, which reads each summary entry in a
        round trip of its own: a batch creating 1,000 tables opened each of them so)."""
        [state] = table_markers.find_markers(
            IcebergTables(target.table.spark, [target.table]), self.pipeline
        )
        return state

    def ours(self, state: table_markers.TableState, target: Target) -> bool:
        """Whether the table's newest marker of the pipeline is the one this run committed
        last."""
        return (
            state.marker is not None
            and target.last is not None
            and state.marker.commit_id == target.last.commit_id
        )

    def observed(
        self, target: Target, state: table_markers.TableState | None
    ) -> dict[Partition, offset_rules.PartitionStats]:
        """What this run's last commit to the table observed, for its next marker (nothing
        if another commit of the pipeline came in between)."""
        return target.pending if state is not None and self.ours(state, target) else {}

    def count(self, *, unmatched: int = 0, filtered: int = 0) -> None:
        """Add records a route matched to no table, and records dropped as configured."""
        with self._lock:
            self.stats.unmatched += unmatched
            self.stats.filtered += filtered

    def evolved(self, table: str, batch_id: int, changes: tuple[str, ...]) -> None:
        """Record and report a table's schema change."""
        with self._lock:
            self.stats.evolutions.extend(f"{table}: {change}" for change in changes)
        self.emit(SchemaEvolved(self.pipeline, table, batch_id, changes))

    def join(self, name: str, target: Target) -> table_markers.TableState:
        """A table the batch met first joins the pipeline's (created or adopted): its state."""
        with self._lock:
            self.targets[name] = target
        return self._state_of(target)

    def committed(self, window: BatchWindow, name: str, written: Written) -> None:
        """Keep what a table's commit observed for its next marker, and report the commit (a
        table the commit created joins the pipeline's)."""
        target, marker = written.target, written.marker
        assert marker is not None
        records, stamps = written.records, written.timestamps
        with self._lock:  # tables' commits are recorded at once
            self.targets.setdefault(name, target)
        target.pending = {
            tp: offset_rules.PartitionStats(int(ts)) for tp, ts in stamps.items() if ts is not None
        }
        target.last = target.seen = marker
        target.committed_at = time.monotonic()
        target.lagging = window.lagging
        target.planned_at_ms = window.planned_at_ms
        # The valid-through the table now records, not the one this batch's own timestamps
        # will make true at the next commit: every figure shows what the tables say
        # (frazil.progress.freshness).
        valid = marker.valid_through_ms
        with self._lock:
            self.stats.records += records
            by_table = self.stats.rows_by_table
            by_table[target.name] = by_table.get(target.name, 0) + records
            self.stats.last_commit_wall_ms = int(time.time() * 1000)
            total = self.stats.records
        self.emit(
            CommitEvent(
                pipeline=self.pipeline,
                table=target.name,
                batch_id=window.batch_id,
                records=records,
                total_records=total,
                valid_through_ms=valid,
                seconds=time.monotonic() - window.started,
                offsets=marker.offsets,
                max_timestamps={tp: int(ts) for tp, ts in stamps.items() if ts is not None},
                bytes_written=written.bytes,
            )
        )

    def mark_idle(
        self, window: BatchWindow, states: dict[str, table_markers.TableState], written: set[str]
    ) -> None:
        """Give tables without records in this batch a marker now and then."""
        now = time.monotonic()
        for name, target in self.targets.items():
            if name in written:
                continue
            if target.committed_at is not None and now - target.committed_at < IDLE_MARKER_SECONDS:
                continue
            state = states.get(name)
            if state is None or offset_rules.covered(window.current(state).marker, window.planned):
                continue
            self._commit_marker_only(target, window.marker(state.marker, self.pipeline, {}))

    def finish(self, last: offset_rules.Basis | None, routed: bool, query_id: str) -> None:
        """Record what the last batches observed (exact valid-through) in a marker of its own.

        Called once the query has stopped. It commits no data, and only if this run's marker
        is still the table's newest one of the pipeline. A routed table that got no records
        in the last batches gets a marker of the last batch's offsets. Several tables' markers
        go in one catalog transaction where the catalog commits tables at once (JDBC, REST);
        should it be refused (one table's marker stale), each table commits on its own.
        """
        # The tables' markers read at once (a routed run's 1,000 tables: ~10 round trips each
        # read one by one).
        states = self.states()
        finals = [
            (name, target, final)
            for name, target in self.targets.items()
            if (final := self._final_marker(target, last, routed, query_id, states[name]))
            is not None
        ]
        if len(finals) > 1 and self.tables is not None:
            spark, catalog = self.tables.spark, self.tables.catalog
            if commits_tables_at_once(spark, catalog):
                handles = self.handles()
                try:
                    handles.mark_all(
                        iceberg_catalog(spark, catalog),
                        [(n, t.table, m.to_summary()) for n, t, m in finals],
                    )
                except Exception as exc:  # a stale marker refuses all: each on its own below
                    log.debug("%s: final markers not committed at once: %s", self.pipeline, exc)
                else:
                    for _, target, final in finals:
                        self._marked(target, final)
                    return

        def finish_one(item: tuple[str, Target, markers.Marker]) -> None:
            _, target, final = item
            try:
                target.table.commit_summary_only(final.to_summary())
            except StaleMarker as stale:
                # Another run's commit, or a rollback, since: its marker stands.
                log.info("%s: final marker not recorded: %s", self.pipeline, stale)
                return
            self._marked(target, final)

        each(finals, finish_one)

    @staticmethod
    def _marked(target: Target, final: markers.Marker) -> None:
        """Keep the final marker a table committed."""
        target.last = target.seen = final
        target.pending = {}
        target.committed_at = time.monotonic()

    def _final_marker(
        self,
        target: Target,
        last: offset_rules.Basis | None,
        routed: bool,
        query_id: str,
        state: table_markers.TableState,
    ) -> markers.Marker | None:
        """:meth:`finish`'s marker for one table, whose state (its newest marker) is
        ``state``; None where it records none."""
        mine = target.last
        # Markers keep partitions the last batch did not plan: it is "covered", not "equal".
        if routed and last is not None and not _holds(mine, last):
            seen = target.seen if target.seen is not None else mine
            if markers.behind(state.marker, seen):
                # Rolled back since the run last looked (while idle, or found by the batch
                # the stop cut short): a marker of the last batch would cover records the
                # table no longer holds. Without it the next run reads them again.
                log.warning(
                    "%s: table %s went back to %s since the run last looked (rolled back?); "
                    "no final marker: the next run reads its records again from there",
                    self.pipeline,
                    target.name,
                    offsets_to_json(state.marker.offsets) if state.marker else "no marker",
                )
                return None
            if _holds(state.marker, last):
                return None
            return offset_rules.next_marker(
                state.marker, self.pipeline, replace(last, query_id=query_id)
            )
        if mine is None or not target.pending:
            return None
        if not self.ours(state, target):
            return None
        again = offset_rules.Basis(
            planned=mine.offsets,
            batch_id=mine.batch_id,
            lagging=target.lagging,
            query_id=mine.query_id,
            planned_at_ms=target.planned_at_ms,
            slack_ms=self.slack_ms,
        )
        final = offset_rules.next_marker(mine, mine.pipeline, again, target.pending)
        if (final.max_timestamps, final.valid_through_ms) == (
            mine.max_timestamps,
            mine.valid_through_ms,
        ):
            return None
        return final

    def _commit_marker_only(self, target: Target, marker: markers.Marker) -> None:
        target.table.commit_summary_only(marker.to_summary())
        target.last = target.seen = marker
        target.committed_at = time.monotonic()

    def valid_through_ms(self) -> int | None:
        """The pipeline's valid-through as its tables record it (the lowest), computed when
        asked: kept up to date at each table's commit, it cost a pass over all tables per
        commit (1,000 routed tables: a million steps a batch)."""
        with self._lock:
            targets = list(self.targets.values())
        return pipeline_valid_through(
            m.valid_through_ms if (m := t.last or t.seen) is not None else None for t in targets
        )


def _holds(marker: markers.Marker | None, last: offset_rules.Basis) -> bool:
    """Whether a marker already holds the last batch (its topics under the same ids)."""
    return offset_rules.covered(markers.current_topics(marker, last.topic_ids), last.planned)
