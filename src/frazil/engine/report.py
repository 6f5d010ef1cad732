"""What a run did and what the table looks like now, read back from Iceberg metadata."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from frazil.config.models import PipelineConfig
from frazil.engine.batch import BatchStats
from frazil.engine.progress import PIPELINE, Marker, find_marker, format_ms
from frazil.sink.iceberg import IcebergTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PipelineReport:
    """Summary of one pipeline after a run.

    Attributes:
        freshness_lag_ms: Commit time of the newest snapshot minus the largest Kafka record
            timestamp it made visible: how far the table trailed the stream at that commit.
    """

    pipeline: str
    table: str
    records_ingested: int
    batches: int
    skipped_batches: int
    resumed_from_table: bool
    start: str
    table_rows: int
    snapshots: int
    data_files: int
    offsets: dict[str, dict[int, int]]
    valid_through: str | None
    last_commit: str | None
    freshness_lag_ms: int | None
    checked_at: str

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--output json``."""
        data = asdict(self)
        data["offsets"] = {t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()}
        return data


def table_report(
    spark: SparkSession,
    table: str,
    pipeline: PipelineConfig,
    stats: BatchStats,
    resumed_from_table: bool,
    *,
    start_reason: str = "",
    marker: Marker | None = None,
) -> PipelineReport:
    """Read the table's metadata and combine it with the run's counters.

    Args:
        marker: The pipeline's newest commit marker if the caller already knows it.
    """
    handle = IcebergTable(spark, table)
    # Read from the table's metadata through Iceberg's API: Spark SQL over the metadata tables
    # took seconds at the end of every run.
    snapshots = handle.snapshot_count()
    last_commit_ms = None
    pipeline_commit_ms = None
    for view in handle.ancestry():
        if last_commit_ms is None:
            last_commit_ms = view.timestamp_ms
        # The snapshot that made the newest records visible, not a marker without data.
        if view.get(PIPELINE) == pipeline.name and int(view.get("added-records") or 0) > 0:
            pipeline_commit_ms = view.timestamp_ms
            break
    data_files = handle.current_total("total-data-files")
    rows = handle.total_records()
    if marker is None:
        marker = find_marker(handle, pipeline.name).marker
    valid_ms = marker.valid_through_ms if marker else None
    lag = None
    if valid_ms is not None and pipeline_commit_ms is not None:
        lag = int(pipeline_commit_ms) - valid_ms
    return PipelineReport(
        pipeline=pipeline.name,
        table=pipeline.table,
        records_ingested=stats.records,
        batches=stats.batches,
        skipped_batches=stats.skipped_batches,
        resumed_from_table=resumed_from_table,
        start=start_reason,
        table_rows=int(rows),
        snapshots=int(snapshots),
        data_files=int(data_files),
        offsets=marker.offsets if marker else {},
        valid_through=format_ms(valid_ms) if valid_ms is not None else None,
        last_commit=format_ms(int(last_commit_ms)) if last_commit_ms is not None else None,
        freshness_lag_ms=lag,
        checked_at=format_ms(int(time.time() * 1000)),
    )
