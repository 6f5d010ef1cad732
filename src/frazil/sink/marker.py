"""The commit marker: what frazil records in every Iceberg snapshot summary it writes.

Each commit carries the pipeline name, the Spark query id and batch id, the Kafka offsets
reached (cumulative, Spark's ``startingOffsets`` JSON shape: next offset to read per
partition), the valid-through mark (largest Kafka record timestamp written so far) and the
number of records in the batch. The marker makes commits idempotent (a replayed batch is
recognised and skipped) and lets a pipeline resume from the table if its Spark checkpoint is
lost.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.source.kafka import TopicOffsets, offsets_from_json, offsets_to_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "frazil."
PIPELINE = "frazil.pipeline"
QUERY_ID = "frazil.query-id"
BATCH_ID = "frazil.batch-id"
OFFSETS = "frazil.offsets"
VALID_THROUGH = "frazil.valid-through"
VALID_THROUGH_MS = "frazil.valid-through-ms"
RECORDS = "frazil.records"


@dataclass(frozen=True)
class CommitMarker:
    """Progress of one pipeline as recorded in one snapshot summary."""

    pipeline: str
    query_id: str
    batch_id: int
    offsets: TopicOffsets
    valid_through_ms: int | None
    records: int

    def to_summary(self) -> dict[str, str]:
        """The snapshot-summary entries for this marker."""
        summary = {
            PIPELINE: self.pipeline,
            QUERY_ID: self.query_id,
            BATCH_ID: str(self.batch_id),
            OFFSETS: offsets_to_json(self.offsets),
            RECORDS: str(self.records),
        }
        if self.valid_through_ms is not None:
            summary[VALID_THROUGH_MS] = str(self.valid_through_ms)
            summary[VALID_THROUGH] = format_ms(self.valid_through_ms)
        return summary

    @classmethod
    def from_summary(cls, summary: dict[str, str]) -> CommitMarker | None:
        """Read a marker back; None if the snapshot was not written by a frazil pipeline."""
        if PIPELINE not in summary or BATCH_ID not in summary:
            return None
        valid = summary.get(VALID_THROUGH_MS)
        return cls(
            pipeline=summary[PIPELINE],
            query_id=summary.get(QUERY_ID, ""),
            batch_id=int(summary[BATCH_ID]),
            offsets=offsets_from_json(summary.get(OFFSETS, "{}")),
            valid_through_ms=int(valid) if valid else None,
            records=int(summary.get(RECORDS, "0")),
        )


def format_ms(epoch_ms: int) -> str:
    """An epoch-milliseconds instant as ISO-8601 UTC, e.g. ``2026-11-22T01:02:03.456Z``."""
    instant = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.timezone.utc)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def latest_marker(spark: SparkSession, table: str, pipeline: str) -> CommitMarker | None:
    """The newest marker of ``pipeline`` in ``table``'s snapshots, or None."""
    quoted = pipeline.replace("'", "''")
    rows = spark.sql(
        f"SELECT summary FROM {table}.snapshots "
        f"WHERE summary['{PIPELINE}'] = '{quoted}' ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    if not rows:
        return None
    return CommitMarker.from_summary(dict(rows[0]["summary"]))
