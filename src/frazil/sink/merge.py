"""Row-level writes: a micro-batch's changes applied to a table by key with Spark's MERGE.

The batch's changes are first collapsed to one per key — the last by the ordering column,
then by Kafka offset — because a MERGE may match each table row with one change only. The
MERGE then deletes, updates or inserts; on a merge-on-read table (the tables frazil creates
for upsert and CDC) Iceberg writes position deletes (format 2) or deletion vectors (format 3)
plus new data files, never equality deletes. The one commit the MERGE makes carries the
batch's marker in its snapshot summary (:class:`dev.frazil.spark.Commits`).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.jvm.classes import java_class
from frazil.sink import yielding
from frazil.sink.iceberg import stale_marker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Attempts of one batch's MERGE when its commit conflicts with another (a compaction).
MERGE_ATTEMPTS = 5
RETRY_BACKOFF_S = 0.5
_CONFLICTS = ("ValidationException", "CommitFailedException")

#: Provenance columns a change carries into :func:`merge_rows`, besides the table's.
ORDER_COLUMNS = (c.OFFSET, c.PARTITION)

#: A change's place against its key's last change without an ``order_by`` value.
_SINCE = "__frazil_since_unordered"
#: Whether a collapsed change comes after a change without an ``order_by`` value in its
#: batch: that change applied against the table, so this one applies whatever the row's.
_RESET = "__frazil_after_unordered"


def latest_changes(rows: DataFrame, key: list[str], order_by: str | None) -> DataFrame:
    """One change per key: the largest ``order_by``, then the largest Kafka offset.

    Offsets order one partition's records; Kafka's keyed partitioning keeps a key's changes
    in one partition. Across partitions only ``order_by`` is meaningful.

    A change whose ``order_by`` is null applies in arrival order, as the MERGE applies it
    against the table: it wins over the key's changes before it, and the changes after it
    are ordered among themselves. The same changes then give the same table whether they
    come in one batch or in several.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    values = [n for n in rows.columns if n not in ORDER_COLUMNS and n not in key]
    position = F.struct(F.col(c.OFFSET), F.col(c.PARTITION))
    ordering = []
    if order_by:
        # The key's last change without an ordering value: the ones before it lost to it.
        unordered = F.max(F.when(F.col(order_by).isNull(), position))
        last = unordered.over(Window.partitionBy(*[F.col(k) for k in key]))
        rows = rows.withColumn(_SINCE, F.coalesce(position >= last, F.lit(True)))
        rows = rows.withColumn(_RESET, last.isNotNull())
        values.append(_RESET)
        ordering = [F.col(_SINCE), F.col(order_by)]
    ordering += [F.col(c.OFFSET), F.col(c.PARTITION)]
    # The key columns are the grouping columns themselves, not fields of the chosen change:
    # the result stays partitioned (and sorted) by them, so the MERGE's join by key does not
    # shuffle the changes a second time.
    change = F.max_by(F.struct(*[F.col(n) for n in values]), F.struct(*ordering)).alias("change")
    return rows.groupBy(*[F.col(k) for k in key]).agg(change).select(*key, "change.*")


def merge_statement(
    table: str, source: str, columns: list[str], key: list[str], order_by: str | None
) -> str:
    """The MERGE applying ``source``'s changes (one per key, :data:`~frazil.columns.OP`) to
    ``table``. With ``order_by``, a change older than the table's row is ignored."""
    on = " AND ".join(f"t.{c.quoted(k)} = s.{c.quoted(k)}" for k in key)
    newer = ""
    if order_by:
        o = c.quoted(order_by)
        newer = f" AND (s.{_RESET} OR t.{o} IS NULL OR s.{o} IS NULL OR s.{o} >= t.{o})"
    op = f"s.{c.quoted(c.OP)}"
    sets = ", ".join(f"t.{c.quoted(n)} = s.{c.quoted(n)}" for n in columns)
    names = ", ".join(c.quoted(n) for n in columns)
    values = ", ".join(f"s.{c.quoted(n)}" for n in columns)
    return (
        f"MERGE INTO {table} t USING {c.quoted(source)} s ON {on}"
        f" WHEN MATCHED AND {op} = '{c.OP_DELETE}'{newer} THEN DELETE"
        f" WHEN MATCHED AND {op} <> '{c.OP_DELETE}'{newer} THEN UPDATE SET {sets}"
        f" WHEN NOT MATCHED AND {op} <> '{c.OP_DELETE}' THEN INSERT ({names}) VALUES ({values})"
    )


def merge_rows(
    rows: DataFrame,
    table: str,
    key: list[str],
    order_by: str | None,
    summary: dict[str, str],
) -> None:
    """Apply a batch's changes to ``table`` in one Iceberg commit whose summary has ``summary``.

    Args:
        rows: The table's columns, :data:`~frazil.columns.OP` (upsert or delete) and the
            :data:`ORDER_COLUMNS`; several changes per key allowed.
        table: The qualified table name.
        key: The columns identifying a row.
        order_by: The column ordering a key's changes, if any.
        summary: Snapshot-summary entries of the commit (the marker).
    """
    spark = rows.sparkSession
    latest = latest_changes(rows, key, order_by)
    columns = [n for n in latest.columns if n not in (c.OP, _RESET)]
    view = f"frazil_changes_{uuid.uuid4().hex}"
    latest.createOrReplaceTempView(view)
    statement = merge_statement(table, view, columns, key, order_by)
    merge_ended = yielding.merge_started(table)  # inline maintenance waits for it
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        delay = RETRY_BACKOFF_S
        for attempt in range(1, MERGE_ATTEMPTS + 1):
            try:
                java_class(jvm, "dev.frazil.spark.Commits").sqlWithProperties(
                    spark._jsparkSession, statement, dict(summary)
                )
                return
            except Exception as exc:
                # A compaction committed between the MERGE's read and its commit, so the
                # files it deletes from are gone: nothing was committed, run it again on
                # the new snapshot.
                stale = stale_marker(exc)
                if stale is not None:
                    raise stale from None  # another run's commit, or a rollback: plan again
                text = str(exc)
                yielding.merge_failed(spark, table, text)  # `frazil maintain` backs off
                if attempt == MERGE_ATTEMPTS or not any(n in text for n in _CONFLICTS):
                    raise
                log.info("MERGE into %s conflicted with a concurrent commit; retrying", table)
                time.sleep(delay)
                delay *= 2
    finally:
        merge_ended()
        spark.catalog.dropTempView(view)
