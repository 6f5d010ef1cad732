"""The cached way: a batch decoded once into a cache, then its tables written from it
concurrently — for routed batches the one job cannot write alone, and for upsert/CDC, whose
MERGE reads its source more than once (and cannot be observed while it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.engine.bad_records import BadRecords, learnable, rejected
from frazil.engine.cached_table import CachedTable, with_values, with_values_columns
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.table_write import ObservedMetrics, TableWriter
from frazil.engine.threads import Pause, each, each_outcome
from frazil.engine.window import BatchWindow, Partition
from frazil.errors import PipelineError
from frazil.progress import markers
from frazil.sink.tables import TableSet, Target

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class _Summary:
    """One aggregation over a cached batch."""

    bad: int
    #: Marked records a decoder may learn from (:func:`~frazil.engine.bad_records.learnable`).
    learnable: int
    unmatched: int
    #: Records dropped as configured (a filter, a skipped tombstone).
    filtered: int
    #: Tables with records to append.
    tables: dict[str, CachedTable]


@dataclass
class CachedWrite:
    """Decodes a batch once into a cache, then writes its tables concurrently.

    The cache holds one row per record and table, sorted by a hash of the table name within
    each Spark partition, so a table's write skips the cached blocks of other tables (the
    cache keeps each block's smallest and largest hash) instead of reading the batch.

    Attributes:
        pipeline: The pipeline's name.
        value_format: The format its values are decoded as (for a rejection's message).
        live: The live plan.
        tables: Creates and adopts the tables the batch meets first.
        ledger: The pipeline's tables and the run's counts.
        writer: Writes each table's rows.
        metrics: The observed metrics' expressions (timestamps per table).
    """

    pipeline: str
    value_format: str
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    writer: TableWriter
    metrics: ObservedMetrics

    def write(
        self, window: BatchWindow, states: dict[str, markers.TableState], attempt: int
    ) -> set[str] | None:
        """Write the batch to its tables, each in one commit carrying its marker.

        Returns:
            The tables written; None if the decoders learned from the batch and it is to be
            planned and written again (nothing was committed).

        Raises:
            PipelineError: The batch holds records that fail, without a dead-letter queue
                (a :class:`~frazil.errors.DecodeError` if they all fail to decode).
            Exception: A table's write or commit failed otherwise (the first, in table
                order; the other tables' writes are waited for).
        """
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        planned = self.live.plan.run(window.batch)
        frame = (
            c.explode_routes(planned)
            .withColumn(c.ROUTE_HASH, F.xxhash64(F.col(c.ROUTE_TABLE)))
            .sortWithinPartitions(c.ROUTE_HASH)
            .persist(StorageLevel.MEMORY_AND_DISK_DESER)
        )
        try:
            summary = _summarise(frame, self.metrics.columns(window.partitions)[1:], window)
            if summary.bad:
                # The writer's dead-letter sender: failing records go there, or stop the batch.
                dead = self.writer.dead
                may_learn = summary.learnable or dead is None
                if may_learn and self.live.learn(window.batch, window.batch_id, attempt):
                    return None
                if dead is None:
                    raise self._rejected(frame, window)
                # Before any table commits: a crash afterwards replays the batch, and the
                # dead-letter table's marker keeps its records once.
                dead.send_unrouted(window, frame)
            self.ledger.count(unmatched=summary.unmatched, filtered=summary.filtered)
            self._create_all(window, states, summary, c.user_schema(planned.schema))
            names = list(summary.tables)
            pause = Pause()

            def write(name: str) -> None:
                pause.before_write(name)
                self.writer.write(
                    window,
                    frame,
                    self.ledger.targets[name],
                    states[name],
                    summary.tables[name],
                )

            errors = [error for _, error in each_outcome(names, write)]
            first = next((e for e in errors if e is not None), None)
            if isinstance(first, BadRecords):
                raise self._rejected(first.rows, window)
            if first is not None:
                raise first
            return set(names)
        finally:
            frame.unpersist()

    def _rejected(self, rows: DataFrame, window: BatchWindow) -> PipelineError:
        return rejected(
            rows, self.pipeline, self.value_format, window.batch_id, self.writer.dead is None
        )

    def _create_all(
        self,
        window: BatchWindow,
        states: dict[str, markers.TableState],
        summary: _Summary,
        user: StructType,
    ) -> None:
        """Create (or adopt) the batch's new tables concurrently (each is a few catalog round
        trips and a marker commit, mostly waiting: bench/routing created 20 in 0.8 s instead
        of 1.3)."""
        new = [n for n in summary.tables if n not in self.ledger.targets]
        if not new:
            return

        def create(name: str) -> Target:
            # The new table gets a marker without data at the batch's start before any table
            # of the batch commits: should the batch crash after other tables committed, the
            # next run finds this table among the pipeline's and writes its records.
            return self.tables.adopt(
                name,
                user,
                summary.tables[name].with_values,
                lambda state: window.start_marker(state.marker, self.pipeline),
                sender="the route sends records",
                hint=(
                    " (route them elsewhere, or run once with --reset-offsets; "
                    "docs/exactly-once.md)"
                ),
            )

        # The first one alone: it also creates the namespace, which others likely share.
        made = [create(new[0]), *each(new[1:], create)]
        for name, target in zip(new, made, strict=True):
            self.ledger.targets[name] = target
            states[name] = markers.find_marker(target.table, self.pipeline)


def _summarise(frame: DataFrame, stamps: list[Column], window: BatchWindow) -> _Summary:
    """Count a cached batch's records per table, its marked and unmatched records, which
    columns hold values and the largest timestamps per table, in one job (which also fills
    the cache)."""
    from pyspark.sql import functions as F

    partitions: tuple[Partition, ...] = window.partitions
    user = [n for n in frame.columns if not c.is_internal(n)]
    rows = (
        frame.groupBy(c.ROUTE_TABLE)
        .agg(
            F.count(F.col(c.ERROR)).alias("bad"),
            F.sum(learnable(F.col(c.ERROR)).cast("int")).alias("learnable"),
            F.sum((F.col(c.TABLE).isNull() & F.col(c.ERROR).isNull()).cast("int")).alias(
                "unmatched"
            ),
            # Once per record (the cache has a row per record and table).
            F.sum(
                (
                    (F.col(c.OP) == F.lit(c.OP_SKIP))
                    & F.col(c.ERROR).isNull()
                    & F.col(c.TABLE).isNotNull()
                    & (F.col(c.ROUTE_TABLE) == F.col(c.TABLE)[0])
                ).cast("int")
            ).alias("filtered"),
            F.sum(F.col(c.OP).isin(*c.WRITTEN_OPS).cast("int")).alias("append"),
            F.first(F.col(c.ROUTE_HASH)).alias("route_hash"),
            *with_values_columns(user),
            *stamps,
        )
        .collect()
    )
    tables = {
        str(r[c.ROUTE_TABLE]): CachedTable(
            int(r["append"] or 0),
            with_values(r, user),
            tuple((tp, r[f"ts_{i}"]) for i, tp in enumerate(partitions)),
            r["route_hash"],
        )
        for r in sorted(rows, key=lambda r: str(r[c.ROUTE_TABLE]))
        if r[c.ROUTE_TABLE] is not None and int(r["append"] or 0) > 0
    }
    return _Summary(
        bad=sum(int(r["bad"] or 0) for r in rows),
        learnable=sum(int(r["learnable"] or 0) for r in rows),
        unmatched=sum(int(r["unmatched"] or 0) for r in rows),
        filtered=sum(int(r["filtered"] or 0) for r in rows),
        tables=tables,
    )
