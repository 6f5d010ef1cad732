"""The dead-letter sender: a batch's failing records to the dead-letter queue, after (or, for
records failing before routing, before) their tables commit."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.engine import dead_capture
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.bad_records import own_error
from frazil.engine.cached_table import of_table
from frazil.engine.live_plan import LivePlan
from frazil.engine.outcomes import FailingRecords
from frazil.engine.threads import pause_before_dead_letters
from frazil.engine.window import BatchWindow
from frazil.progress import table_markers
from frazil.sink.dead_letters.queue import DeadLetters
from frazil.sink.evolution import TableView
from frazil.sink.tables import Target

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")

#: Failing records of a batch fetched again by position, at most; more are found by reading
#: the whole batch again (a filter of that many literals costs more than it saves).
_MAX_POSITIONS = 10_000


@dataclass
class DeadLetterSender:
    """Sends a batch's failing records to the pipeline's dead-letter queue.

    Attributes:
        queue: The dead-letter topic and/or table.
        spark: The session.
        live: The live plan (failing records too large to carry are decoded again).
        columns: Fits the batch to each table (a table's own marks: values it cannot take).
        cached: Whether the batch's frame is a cache holding every raw record (the general
            way), so failing records are read from it.
    """

    queue: DeadLetters
    spark: SparkSession
    live: LivePlan
    columns: ColumnAdapter
    cached: bool

    def send_unrouted(self, window: BatchWindow, frame: DataFrame, table: str | None) -> None:
        """A cached batch's records that failed before routing (decode, transform, route),
        once each, from the cache of one row per record and table.

        Args:
            table: The pipeline's one table, which its every record is for (``target_table``);
                None for a routed pipeline's: a record that failed after routing (stage
                ``mode``: an operation code, a key value) names the table it was routed to
                when there is one, the others none (they would go to every table).
        """
        from pyspark.sql import functions as F

        target: str | Column | None = table if table is not None else c.mode_target()
        self.queue.write(
            frame.where(F.col(c.ERROR).isNotNull() & c.first_route()),
            F.col(c.ERROR),
            basis=window.basis,
            table=target,
        )

    def send(self, window: BatchWindow, target: Target, failing: FailingRecords) -> None:
        """Send a table's failing records of the batch to the dead-letter queue, once the
        table committed.

        ``failing.seen`` lists them as the write found them: where they are (topic,
        partition, offset) and, for those it carried (:func:`dead_capture.observed`), their
        raw record; the others are read and decoded again. None (a replayed batch) looks at
        the whole batch, its records checked against the table's schema when the batch was
        committed, where that is known (the records that commit left out fail, whatever the
        table became since).
        """
        from pyspark.sql import functions as F

        frame, counted, seen = failing.frame, failing.counted, failing.seen
        pause_before_dead_letters()
        committed = self._committed_view(target, window) if seen is None else None
        schema = self.live.plan.schema_of(window.batch)
        with_values = counted.with_values if counted else None
        columns = (
            self.columns.adapt(schema, target, window.batch_id, with_values)
            if committed is None
            else self.columns.as_committed(schema, target, committed, with_values)
        )
        started = time.monotonic()
        own = own_error(columns.error, counted is not None)
        headers = c.HEADERS in frame.columns
        source = "" if counted is None else target.name
        bad: DataFrame | None
        if self.cached or seen is None:
            # The cache holds the batch's raw records; a replay (None) looks at all of it.
            rows = frame if counted is None else frame.where(of_table(target.name, counted))
            bad = rows.where(_failing(own)).select(
                *_dead_source_columns(headers), own.alias(c.DEAD_ERROR)
            )
        elif not seen.missing:
            # Every one carried in the write's pass: no Spark job at all.
            self.queue.write_carried(
                seen.records,
                seen.carried_rows if self.queue.topic is not None else list,
                headers,
                basis=window.basis,
                seen=seen.positions,
                source=source,
                table=target.name,
            )
            bad = None
        else:
            bad = self._read_again(window, frame, seen, own, headers)
        if bad is not None:
            self.queue.write(
                bad,
                F.col(c.DEAD_ERROR),
                basis=window.basis,
                seen=None if seen is None else seen.positions,
                source=source,
                table=target.name,
            )
        log.info(
            "%s: batch %d: dead letters of %s sent in %.2fs",
            self.live.pipeline,
            window.batch_id,
            target.name,
            time.monotonic() - started,
        )

    def _committed_view(self, target: Target, window: BatchWindow) -> TableView | None:
        """The table's schema when it committed the batch (the oldest of the pipeline's
        markers that cover the batch), or None if that is not known (nothing to go by but
        the table as it is)."""
        snapshot_id = table_markers.committed_in(
            target.table, self.live.pipeline, window.planned, window.topic_ids
        )
        if snapshot_id is None:
            return None
        java = target.table.java
        schema_id = java.snapshot(snapshot_id).schemaId()
        schema = None if schema_id is None else java.schemas().get(schema_id)
        if schema is None:
            return None
        return TableView.read(self.spark, java, schema)

    def _read_again(
        self,
        window: BatchWindow,
        frame: DataFrame,
        seen: dead_capture.Failing,
        own: Column,
        headers: bool,
    ) -> DataFrame:
        """Failing records carried in the write's pass, with those too large for that read
        and decoded again by position (or, when many, the whole batch read again)."""
        parts = []
        missing = seen.missing
        if len(missing) > _MAX_POSITIONS:
            # Many: read the whole batch again rather than build a huge filter.
            parts.append(frame)
        else:
            carried = seen.carried_rows()
            if carried:
                parts.append(dead_capture.carried_frame(self.spark, carried, headers))
            if missing:
                parts.append(self.live.plan.run(window.batch.where(_raw_positions(missing))))
        parts = [
            part
            if c.DEAD_ERROR in part.columns
            else part.where(_failing(own)).select(
                *_dead_source_columns(headers), own.alias(c.DEAD_ERROR)
            )
            for part in parts
        ]
        bad = parts[0]
        for part in parts[1:]:
            bad = bad.unionByName(part)
        return bad


def _failing(own: Column) -> Column:
    """The batch's rows of records that reach a table and fail there (``own``: its marks)."""
    from pyspark.sql import functions as F

    return F.col(c.OP).isin(*c.WRITTEN_OPS) & own.isNotNull()


def _raw_positions(at: list[Any]) -> Column:
    """A condition on the raw Kafka rows selecting the records at ``at`` (topic, partition,
    offset)."""
    from pyspark.sql import functions as F

    by_partition: dict[tuple[str, int], list[int]] = {}
    for row in at:
        by_partition.setdefault((str(row[0]), int(row[1])), []).append(int(row[2]))
    condition: Column | None = None
    for (topic, partition), offsets in sorted(by_partition.items()):
        part = (
            (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & F.col("offset").isin(*sorted(offsets))
        )
        condition = part if condition is None else condition | part
    assert condition is not None
    return condition


def _dead_source_columns(headers: bool) -> list[str]:
    """The batch columns the dead-letter queue reads (the raw record and its position)."""
    names = [c.KEY, c.VALUE, c.TOPIC, c.PARTITION, c.OFFSET, c.TIMESTAMP_MS]
    return [*names, c.HEADERS] if headers else names
