"""One Iceberg table's exactly-once writer: one commit per micro-batch, stamped with a marker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.sink.marker import CommitMarker, latest_marker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class IcebergTableWriter:
    """Appends micro-batches to one table, each exactly once.

    The writer remembers the newest commit marker of its pipeline in the table (read once at
    start, then kept up to date). A batch whose (query id, batch id) is not newer than that
    marker was committed before a crash and is skipped when Spark replays it.
    """

    def __init__(
        self, spark: SparkSession, table: str, pipeline: str, *, new_table: bool = False
    ) -> None:
        self.table = table
        self.pipeline = pipeline
        self.last: CommitMarker | None = (
            None if new_table else latest_marker(spark, table, pipeline)
        )

    def already_committed(self, query_id: str, batch_id: int) -> bool:
        """Whether this batch of this query is already in the table."""
        last = self.last
        return last is not None and last.query_id == query_id and batch_id <= last.batch_id

    def commit(self, rows: DataFrame, marker: CommitMarker) -> None:
        """Append ``rows`` in a single Iceberg commit whose summary carries ``marker``."""
        writer = rows.writeTo(self.table)
        for key, value in marker.to_summary().items():
            writer = writer.option(f"snapshot-property.{key}", value)
        writer.append()
        self.last = marker
