"""The cached way: a batch decoded once into a cache, then its tables written from it
concurrently — for routed batches the one job cannot write alone, and for upsert/CDC, whose
MERGE reads its source more than once (and cannot be observed while it runs)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.engine import kept_rows
from frazil.engine.bad_records import BadRecords, learnable
from frazil.engine.cached_table import CachedTable, with_values, with_values_columns
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.outcomes import Bad, Written, Wrote
from frazil.engine.table_rows import ObservedMetrics
from frazil.engine.table_write import TableWriter
from frazil.engine.threads import Pause, each, each_outcome
from frazil.engine.window import BatchWindow, Partition
from frazil.progress import table_markers
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


@dataclass(frozen=True)
class CachedBatch:
    """A batch decoded into a cache, and what its aggregation found."""

    #: One row per record and table (records failing before routing: one row).
    frame: DataFrame
    summary: _Summary
    #: The batch's user columns (the tables it meets first are created with them).
    user: StructType
    #: Its marked records, if any (nothing of the batch is committed yet).
    bad: Bad | None

    def release(self) -> None:
        """Let the cache go."""
        kept_rows.let_go(self.frame)


@dataclass
class CachedWrite:
    """Decodes a batch once into a cache, then writes its tables concurrently.

    The cache (:mod:`~frazil.engine.kept_rows`) holds one row per record and table, with a
    hash of the table name that a table's write compares first (on a cluster the cache is
    sorted by it within each partition, so a table's write skips other tables' blocks).

    Attributes:
        pipeline: The pipeline's name.
        live: The live plan.
        tables: Creates and adopts the tables the batch meets first.
        ledger: The pipeline's tables (a table the batch meets first joins them).
        writer: Writes each table's rows.
        metrics: The observed metrics' expressions (timestamps per table).
    """

    pipeline: str
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    writer: TableWriter
    metrics: ObservedMetrics

    def decode(self, window: BatchWindow) -> CachedBatch:
        """Decode the batch into a cache, and aggregate it in one job (which fills it): its
        marked and unmatched records, and each table's records, columns and timestamps."""
        from pyspark.sql import functions as F

        planned = self.live.plan.run(window.batch)
        frame = kept_rows.keep(
            c.explode_routes(planned).withColumn(c.ROUTE_HASH, F.xxhash64(F.col(c.ROUTE_TABLE))),
            sort_by=c.ROUTE_HASH,
        )
        try:
            summary = _summarise(frame, self.metrics.columns(window.partitions)[1:], window)
        except BaseException:
            kept_rows.let_go(frame)
            raise
        known = self.ledger.targets
        tables = {n: t for n, t in summary.tables.items() if t.unmarked or n in known}
        if len(tables) < len(summary.tables):
            summary = replace(summary, tables=tables)
        pipeline = self.tables.pipeline
        if pipeline.defaults.write.merges and not pipeline.defaults.write.key:
            # A table with no key takes no change (each is marked: sink.modes.change_mode):
            # it is neither created nor written.
            keyed = {n: t for n, t in summary.tables.items() if pipeline.settings_for(n).write.key}
            summary = replace(summary, tables=keyed)
        # Without a dead-letter queue, any marked record may teach a decoder before the
        # batch stops; with one, only those a decoder may learn from are tried first.
        may_learn = bool(summary.learnable) or not self.writer.dead_letters
        bad = Bad(frame, may_learn) if summary.bad else None
        return CachedBatch(frame, summary, c.user_schema(planned.schema), bad)

    def write(
        self, window: BatchWindow, batch: CachedBatch, states: dict[str, table_markers.TableState]
    ) -> Wrote:
        """Write the cached batch to its tables concurrently, each in one commit carrying
        its marker, the tables it meets first created (or adopted) before.

        Returns:
            Each table's commit, the cache (kept until its failing records are sent) and
            the first failure in table order, if a table's write failed (the other tables'
            writes are waited for; a marked record as :class:`BadRecords`).
        """
        try:
            summary = batch.summary
            states = {**states, **self._create_all(window, summary, batch.user)}
        except BaseException:
            batch.release()
            raise
        names = list(summary.tables)
        pause = Pause()

        def write(name: str) -> Written:
            pause.before_write(name)
            written = self.writer.write(
                window, batch.frame, self.ledger.targets[name], states[name], summary.tables[name]
            )
            if isinstance(written, Bad):
                raise BadRecords(written.rows)
            return written

        results = each_outcome(names, write)
        first = next((e for _, e in results if e is not None), None)
        return Wrote(
            {name: w for name, (w, _) in zip(names, results, strict=True) if w is not None},
            unmatched=summary.unmatched,
            filtered=summary.filtered,
            failure=first,
            cache=batch.frame,
        )

    def _create_all(
        self, window: BatchWindow, summary: _Summary, user: StructType
    ) -> dict[str, table_markers.TableState]:
        """Create (or adopt) the batch's new tables concurrently (each is a few catalog round
        trips and a marker commit, mostly waiting: bench/routing created 20 in 0.8 s instead
        of 1.3); they join the pipeline's tables: their states."""
        new = [n for n in summary.tables if n not in self.ledger.targets]
        if not new:
            return {}

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
        return {
            name: self.ledger.join(name, target) for name, target in zip(new, made, strict=True)
        }


def _summarise(frame: DataFrame, stamps: list[Column], window: BatchWindow) -> _Summary:
    """Count a cached batch's records per table, its marked and unmatched records, which
    columns hold values and the largest timestamps per table, in one job (which also fills
    the cache)."""
    from pyspark.sql import functions as F

    partitions: tuple[Partition, ...] = window.partitions
    user = [n for n in frame.columns if not c.is_internal(n)]
    # A marked record goes to the dead-letter queue before any table is written: it adds no
    # columns, nor makes its table (which would get another record type's columns; a known
    # table still commits the batch, so that its marker keeps up).
    good = F.col(c.ERROR).isNull()
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
            F.sum((F.col(c.OP).isin(*c.WRITTEN_OPS) & good).cast("int")).alias("unmarked"),
            F.first(F.col(c.ROUTE_HASH)).alias("route_hash"),
            *with_values_columns(user, good),
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
            int(r["unmarked"] or 0),
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
