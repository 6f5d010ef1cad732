"""The table writer: one table's rows of a micro-batch, appended or merged in one Iceberg
commit that carries the table's marker, and what the commit holds handed back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.engine import dead_capture
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.bad_records import (
    BadRecords,
    failure,
    is_bad_record_failure,
    learnable,
)
from frazil.engine.cached_table import CachedTable, of_table
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.outcomes import Bad, FailingRecords, Written
from frazil.engine.table_rows import (
    ObservedMetrics,
    Selection,
    TapCounts,
    merge_with_dead_letters,
    observed,
    with_dead_letters,
)
from frazil.engine.window import BatchWindow
from frazil.progress import markers, offset_rules, table_markers
from frazil.sink.conform import WriteColumns
from frazil.sink.iceberg import append_rows
from frazil.sink.merge import merge_rows
from frazil.sink.tables import Target

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

#: Rows one task writes to one routed table, at most (fewer tasks, fewer small files).
ROWS_PER_WRITE_TASK = 250_000
#: A one-table batch of fewer Kafka records is read, decoded and written by one task: one
#: data file per commit, where a trickle over N partitions made N tiny ones.
ONE_TASK_RECORDS = 5_000
#: Records per task of a larger one-table batch read from more partitions than it needs
#: tasks (every core busy all the same): a batch over 64 partitions wrote 64 files.
RECORDS_PER_TASK = 50_000


log = logging.getLogger(__name__)

#: Data and delete files of a merged table past which each MERGE, which reads them all, is
#: slowed by them (measured: a MERGE of ~200 changes 0.94 s at first, 1.65 s by 51 data and
#: 50 delete files); the run says so once per table.
CROWDED_FILES = 200


def write_tasks(records: int | None, ranges: int, cores: int) -> int | None:
    """How many tasks (each a data file per table partition) a one-table append needs.

    Spark's Kafka source reads each partition with records as a task of its own, so a small
    batch over many partitions wrote as many small files, each with its Parquet writer, and
    every later query opened them all until compaction.

    Args:
        records: The Kafka records the batch reads (None: not known).
        ranges: The partitions it reads records of.
        cores: The cores Spark runs tasks on.

    Returns:
        Fewer tasks than ``ranges`` to coalesce the batch into; None: read as planned.
    """
    if records is None:
        return None
    tasks = 1 if records < ONE_TASK_RECORDS else max(cores, -(-records // RECORDS_PER_TASK))
    return tasks if tasks < ranges else None


@dataclass
class TableWriter:
    """Writes one table's rows of a batch in one commit carrying its marker, and hands back
    what the commit holds (:class:`~frazil.engine.outcomes.Written`).

    The marker must be in the commit's summary, so it is built before the data is read:
    offsets from the planned range; largest timestamps from the batches observed before (a
    correct lower bound for valid-through, made exact by the next commit or at stop). A
    record marked with an error makes the write's job fail before Iceberg commits anything
    (:class:`~frazil.engine.outcomes.Bad`), unless a dead-letter queue takes it.

    The rows are selected one of four ways: **observed** (one table, no dead letters:
    counts, timestamps and skipped records observed in the write's own pass, an append's or
    a MERGE's), **plain** (a table of the cached batch, whose aggregation counted it),
    **merge with dead letters** (failing records found in the cache before the MERGE) and
    **with dead letters** (failing records leave the write and are observed in its pass).

    Attributes:
        spark: The session.
        pipeline: The pipeline.
        live: The live plan (the batch's schema).
        columns: Fits the batch to the table.
        ledger: The tables' states (what the run's last commit observed, for the marker).
        metrics: The observed metrics' expressions.
        dead_letters: Whether failing records go to a dead-letter queue (else they stop the
            pipeline).
    """

    spark: SparkSession
    pipeline: PipelineConfig
    live: LivePlan
    columns: ColumnAdapter
    ledger: TableLedger
    metrics: ObservedMetrics
    dead_letters: bool = False
    _budget: int | None = None
    _cores_known: int | None = None
    #: Column expressions that are the same for every batch, built once: each is a few py4j
    #: round trips, and PySpark asks the JVM for the active session with every one.
    _columns_once: dict[str, Column] = field(default_factory=dict)
    #: The guarded columns of each write's columns (the adapter's, reused while the table and
    #: the batch's shape stay): the object they were built from, and them.
    _guards: dict[int, tuple[WriteColumns, list[Column]]] = field(default_factory=dict)
    #: The merged tables already said to be crowded with files (:data:`CROWDED_FILES`).
    _crowded: set[str] = field(default_factory=set)

    def write(
        self,
        window: BatchWindow,
        frame: DataFrame,
        target: Target,
        state: table_markers.TableState,
        counted: CachedTable | None,
        *,
        learn: bool = False,
    ) -> Written | Bad:
        """Append (or merge) the table's rows of the batch in one commit carrying its marker.

        Args:
            window: The batch.
            frame: The planned batch (one table), or the cache of a routed batch or of a
                merging one with dead letters (one row per record and table).
            target: The table.
            state: The table's state when the batch began.
            counted: What the cached way counted of the table's rows; None: ``frame`` is the
                planned batch.
            learn: With a dead-letter queue, whether records a decoder may learn from still
                fail the write (so that the table evolves rather than the queue filling).

        Returns:
            What the commit holds, its failing records among it (nothing committed if the
            table holds the batch already); or, a record marked with an error having met the
            write, the rows it read (nothing committed).
        """
        try:
            return self._write(window, frame, target, state, counted, learn)
        except BadRecords as bad:
            return Bad(bad.rows)

    def _write(
        self,
        window: BatchWindow,
        frame: DataFrame,
        target: Target,
        state: table_markers.TableState,
        counted: CachedTable | None,
        learn: bool,
    ) -> Written:
        """:meth:`write`, a marked record raising :class:`BadRecords`."""
        from pyspark.sql import functions as F

        state = window.current(state)  # a topic created again: the old one's offsets are gone
        marker = window.marker(
            state.marker, self.pipeline.name, self.ledger.observed(target, state)
        )
        if state.marker is not None and marker.offsets == state.marker.offsets:
            if not self.dead_letters:
                return Written(target, None)  # nothing new for this table
            # A replay: the table has the batch, the dead-letter queue may not (the run
            # stopped in between). Its dead letters are the records that commit left out:
            # decoded with what the decoders can learn (a record the crashed run had learned
            # to read is in the table), checked against the table's schema of that commit.
            if learn:
                self._learn_first(frame, target, counted)
            return Written(target, None, failing=FailingRecords(frame, counted, None))
        merging = target.settings.write.merges
        wanted = self._once("wanted", lambda: F.col(c.OP).isin(*c.WRITTEN_OPS))
        if merging and counted is None:
            # A change whose operation could not be decided (an unknown code) is marked and
            # has no operation: in the one pass it meets the write all the same, whose guard
            # stops the batch on it (the cached way finds it in its aggregation).
            wanted = self._once("wanted_or_unknown", lambda: wanted | F.col(c.OP).isNull())
        keep = (
            None
            if window.starts_at(state.marker)
            else offset_rules.offset_filter(state.marker, window.planned)
        )
        if keep is not None:
            wanted = wanted & keep
        if counted is not None:
            wanted = of_table(target.name, counted) & wanted
        schema = self.live.plan.schema_of(window.batch)
        columns = self.columns.adapt(
            schema, target, window.batch_id, counted.with_values if counted else None
        )
        # Records dropped as configured (a filter, a skipped tombstone), counted once: a
        # routed or merging batch counts them in its aggregation.
        dropped = self._once(
            "dropped", lambda: (F.col(c.OP) == F.lit(c.OP_SKIP)) & F.col(c.ERROR).isNull()
        )
        if keep is not None:
            dropped = dropped & keep
        if not self.dead_letters and counted is None:
            # One pass: observed as the rows stream into the append, or into the MERGE's
            # collapse per key (which reads its source once).
            chosen = observed(self.metrics, window, frame, wanted, dropped, merging=merging)
        elif not self.dead_letters:
            chosen = Selection(frame.where(wanted))
        elif merging:
            chosen = merge_with_dead_letters(frame, target, counted, columns, keep)
        else:
            chosen = with_dead_letters(
                self.metrics,
                window,
                frame,
                target,
                counted,
                columns,
                keep,
                dropped,
                learn,
                self._carry_budget,
            )
        if (
            keep is not None
            and counted is not None
            and chosen.observation is None
            and chosen.records is None
        ):
            # A batch planned again past part of what the table holds (a restart after a
            # kill between two tables' commits): the cached way counted all of the table's
            # rows in the batch, the write takes those past its marker only.
            chosen = replace(chosen, records=chosen.rows.count())
        rows, observation = chosen.rows, chosen.observation
        if counted is not None and not merging:
            # A table's rows of the batch in as few tasks (and files) as its size needs:
            # the other tables' writes keep the other cores busy.
            rows = rows.coalesce(max(1, -(-counted.records // ROWS_PER_WRITE_TASK)))
        elif counted is not None:
            # A MERGE's source (the table's changes, collapsed per key) read by as few tasks
            # as its size needs, not one per Kafka partition of the batch: a few hundred
            # changes over 12 partitions were 12 tasks a table, each scheduled and shipped.
            tasks = write_tasks(counted.records, window.ranges, self._cores())
            if tasks is not None:
                rows = rows.coalesce(tasks)
        elif not merging:
            tasks = write_tasks(window.records, window.ranges, self._cores())
            if tasks is not None:
                rows = rows.coalesce(tasks)
        # Without dead letters, a routed batch's aggregation counted its tables' rows already
        # (one Dataset less per table: each costs an analysis through py4j).
        self._commit(target, rows, columns, marker, merging, frame, wanted)
        self._check_no_interleaving(target, state, marker)
        return self._written(window, frame, target, counted, marker, chosen, observation)

    def _check_no_interleaving(
        self, target: Target, state: table_markers.TableState, marker: markers.Marker
    ) -> None:
        """:func:`~frazil.progress.table_markers.check_no_interleaving` in one JVM call with the
        pipeline's tables (the table refreshed and its ancestry walked there: ~20 py4j round
        trips a batch otherwise).

        Raises:
            CommitError: Another run of the pipeline committed between the base and ours.
        """
        handles = self.ledger.handles()
        try:
            handles.index(target.table)
        except KeyError:  # not one of the ledger's tables: walked from Python
            table_markers.check_no_interleaving(target.table, state, marker)
            return
        (error,) = table_markers.check_no_interleavings(handles, [target.table], [state], [marker])
        if error is not None:
            raise error

    def _learn_first(self, frame: DataFrame, target: Target, counted: CachedTable | None) -> None:
        """Raise :class:`BadRecords` if the batch's records for ``target`` hold some a
        decoder may learn from: the batch is planned again once it has."""
        from pyspark.sql import functions as F

        mine = frame if counted is None else frame.where(of_table(target.name, counted))
        teaching = mine.where(F.col(c.OP).isin(*c.WRITTEN_OPS) & learnable(F.col(c.ERROR)))
        if not teaching.isEmpty():
            raise BadRecords(teaching)

    def _commit(
        self,
        target: Target,
        rows: DataFrame,
        columns: WriteColumns,
        marker: markers.Marker,
        merging: bool,
        frame: DataFrame,
        wanted: Column,
    ) -> None:
        """The table's one commit, its summary carrying the marker.

        Raises:
            BadRecords: A record marked bad failed the job (nothing committed).
        """
        from pyspark.sql import functions as F

        table_columns = columns.table if self.dead_letters else self._guarded(columns)
        options = {"check-nullability": "false"} if target.view and target.view.required else {}
        try:
            if merging:
                write = target.settings.write
                changes = rows.select(
                    *table_columns, F.col(c.OP), F.col(c.OFFSET), F.col(c.PARTITION)
                )
                merge_rows(
                    changes, target.qualified, write.key, write.order_by, marker.to_summary()
                )
                self._say_if_crowded(target)
            else:
                append_rows(
                    rows.select(*table_columns), target.qualified, marker.to_summary(), options
                )
        except Exception as exc:  # py4j / Spark wrap the job failure; look for our mark
            if not is_bad_record_failure(exc):
                raise
            raise BadRecords(frame.where(wanted).select(*columns.rows())) from None

    def _say_if_crowded(self, target: Target) -> None:
        """Once per table: a merged table whose files pile up (nothing compacts it)."""
        if target.qualified in self._crowded:
            return
        data = target.table.current_total("total-data-files")
        deletes = target.table.current_total("total-delete-files")
        if data + deletes < CROWDED_FILES:
            return
        self._crowded.add(target.qualified)
        log.warning(
            "%s holds %d data and %d delete files: each MERGE reads them all and slows as "
            "they grow; compact the table (maintenance: {mode: inline}, frazil maintain "
            "beside the run, or frazil optimize; see docs/maintenance.md)",
            target.qualified,
            data,
            deletes,
        )

    def _written(
        self,
        window: BatchWindow,
        frame: DataFrame,
        target: Target,
        counted: CachedTable | None,
        marker: markers.Marker,
        chosen: Selection,
        observation: Observation | TapCounts | None,
    ) -> Written:
        """What the commit holds: its rows' counts and timestamps, what the write dropped,
        its failing records."""
        written_bytes = target.table.current_total("added-files-size")
        failing = chosen.failing
        found = (
            None
            if failing is None
            else dead_capture.Failing.observed(self.spark.sparkContext._jvm, failing)
        )
        filtered = 0
        if counted is None:
            filtered = int((observation.get if observation is not None else {}).get("dropped") or 0)
        if chosen.failing_at:
            found = dead_capture.Failing.at(chosen.failing_at)
        if observation is not None:
            seen = observation.get
            records = int(seen.get("records") or 0)
            stamps = {tp: seen.get(f"ts_{i}") for i, tp in enumerate(window.partitions)}
        else:
            assert counted is not None
            records, stamps = counted.records, dict(counted.timestamps)
        if chosen.records is not None:
            records = chosen.records
        return Written(
            target,
            marker,
            records,
            stamps,
            written_bytes,
            failing=None if found is None else FailingRecords(frame, counted, found),
            filtered=filtered,
        )

    def _once(self, name: str, build: Callable[[], Column]) -> Column:
        """The column expression ``name``, built by ``build`` the first time."""
        column = self._columns_once.get(name)
        if column is None:
            column = self._columns_once[name] = build()
        return column

    def _guarded(self, columns: WriteColumns) -> list[Column]:
        """``columns.guarded(failure())``, built once per write columns."""
        known = self._guards.get(id(columns))
        if known is None or known[0] is not columns:
            known = self._guards[id(columns)] = (columns, columns.guarded(failure()))
        return known[1]

    def _cores(self) -> int:
        """Spark's default parallelism, asked once (a py4j call)."""
        if self._cores_known is None:
            self._cores_known = int(self.spark.sparkContext.defaultParallelism)
        return self._cores_known

    def _carry_budget(self) -> int:
        """Bytes of failing records a batch's write may carry to the driver."""
        if self._budget is None:
            self._budget = dead_capture.driver_budget(self.spark)
        return self._budget
