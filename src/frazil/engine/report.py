"""What a run did and what the table looks like now, read back from Iceberg metadata."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from frazil.config.pipeline import PipelineConfig
from frazil.engine.ledger import BatchStats
from frazil.progress.freshness import freshness_ms, pipeline_valid_through
from frazil.progress.markers import PIPELINE, Marker, format_ms
from frazil.progress.table_markers import find_marker
from frazil.sink.iceberg import IcebergTable, ReportFacts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PipelineReport:
    """Summary of one pipeline after a run.

    Attributes:
        valid_through: The valid-through the tables record (the lowest over them), ISO-8601.
        freshness_lag_ms: Freshness at the commit that made the newest records visible: its
            time minus the valid-through (frazil.progress.freshness), how far the tables
            trailed the stream then.
    """

    pipeline: str
    table: str
    #: Rows this run committed, all tables together (a record routed to two tables is two
    #: rows; of one table, the records written). Kept under its old name; see rows_written.
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
    #: Rows per table written by the pipeline (a routed pipeline has several).
    tables: dict[str, int] = field(default_factory=dict)
    #: Records a route matched to no table (``default: skip``), not written.
    unmatched_skipped: int = 0
    #: Records dropped as configured (a transform's ``filter``, ``tombstones: skip``).
    filtered_skipped: int = 0
    #: Schema changes this run made to its tables.
    schema_changes: list[str] = field(default_factory=list)
    #: Records this run sent to the dead-letter queue, by ``stage: reason``.
    dead_letters: dict[str, int] = field(default_factory=dict)
    #: Rows this run committed per table (a routed record counts in each of its tables).
    rows_written: dict[str, int] = field(default_factory=dict)
    #: Records this run sent to the dead-letter queue, all reasons together.
    dead_lettered: int = 0
    #: :attr:`valid_through` in epoch ms.
    valid_through_ms: int | None = None
    #: When the newest records became visible (epoch ms): the pipeline's newest commit that
    #: added rows.
    last_data_commit_ms: int | None = None

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
    name: str | None = None,
    handle: IcebergTable | None = None,
    facts: ReportFacts | None = None,
) -> PipelineReport:
    """Read the table's metadata and combine it with the run's counters.

    Args:
        marker: The pipeline's newest commit marker if the caller already knows it.
        handle: An open handle on the table (refreshed here), if the caller has one.
        facts: The table's metadata as already read (:meth:`IcebergTables.report_facts`,
            several tables in one round trip); read here otherwise.
    """
    if handle is None:
        handle = IcebergTable(spark, table)
    if facts is None:
        facts = read_facts(handle, pipeline.name)
    snapshots, rows, data_files = facts.snapshots, facts.rows, facts.data_files
    last_commit_ms, pipeline_commit_ms = facts.last_commit_ms, facts.pipeline_commit_ms
    if marker is None:
        marker = find_marker(handle, pipeline.name).marker
    valid_ms = marker.valid_through_ms if marker else None
    lag = None if pipeline_commit_ms is None else freshness_ms(valid_ms, pipeline_commit_ms)
    return PipelineReport(
        pipeline=pipeline.name,
        table=name or pipeline.describe_target(),
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
        tables={name or pipeline.describe_target(): int(rows)},
        rows_written={
            name or pipeline.describe_target(): stats.rows_by_table.get(
                name or pipeline.describe_target(), 0
            )
        },
        unmatched_skipped=stats.unmatched,
        filtered_skipped=stats.filtered,
        schema_changes=list(stats.evolutions),
        valid_through_ms=valid_ms,
        last_data_commit_ms=None if pipeline_commit_ms is None else int(pipeline_commit_ms),
    )


def read_facts(handle: IcebergTable, pipeline: str) -> ReportFacts:
    """What a report reads of one table (refreshed here), through Iceberg's API: Spark SQL over
    the metadata tables took seconds at the end of every run."""
    handle.refresh()
    last_commit_ms = None
    pipeline_commit_ms = None
    for view in handle.ancestry():
        if last_commit_ms is None:
            last_commit_ms = view.timestamp_ms
        # The snapshot that made the newest records visible, not a marker without data.
        if view.get(PIPELINE) == pipeline and int(view.get("added-records") or 0) > 0:
            pipeline_commit_ms = view.timestamp_ms
            break
    return ReportFacts(
        snapshots=handle.snapshot_count(),
        last_commit_ms=last_commit_ms,
        pipeline_commit_ms=pipeline_commit_ms,
        data_files=handle.current_total("total-data-files"),
        rows=handle.total_records(),
    )


def combine_reports(
    pipeline: PipelineConfig, stats: BatchStats, parts: list[PipelineReport], start: str
) -> PipelineReport:
    """One report of a routed pipeline from its tables' reports.

    Offsets and valid-through are the lowest over the tables (what every table holds),
    and the freshness lag is measured from it at the newest commit that added rows.
    """
    offsets: dict[str, dict[int, int]] = {}
    for part in parts:
        for topic, partitions in part.offsets.items():
            for p, o in partitions.items():
                known = offsets.setdefault(topic, {})
                known[p] = min(o, known.get(p, o))
    valid_ms = pipeline_valid_through(p.valid_through_ms for p in parts)
    commits = [p.last_commit for p in parts if p.last_commit is not None]
    data_commits = [p.last_data_commit_ms for p in parts if p.last_data_commit_ms is not None]
    newest_data = max(data_commits) if data_commits else None
    return PipelineReport(
        pipeline=pipeline.name,
        table=pipeline.describe_target(),
        records_ingested=stats.records,
        batches=stats.batches,
        skipped_batches=stats.skipped_batches,
        resumed_from_table=any(p.resumed_from_table for p in parts),
        start=start,
        table_rows=sum(p.table_rows for p in parts),
        snapshots=sum(p.snapshots for p in parts),
        data_files=sum(p.data_files for p in parts),
        offsets=offsets,
        valid_through=format_ms(valid_ms) if valid_ms is not None else None,
        last_commit=max(commits) if commits else None,
        freshness_lag_ms=None if newest_data is None else freshness_ms(valid_ms, newest_data),
        checked_at=format_ms(int(time.time() * 1000)),
        tables={t: n for p in parts for t, n in p.tables.items()},
        rows_written={t: n for p in parts for t, n in p.rows_written.items()},
        unmatched_skipped=stats.unmatched,
        filtered_skipped=stats.filtered,
        schema_changes=list(stats.evolutions),
        valid_through_ms=valid_ms,
        last_data_commit_ms=newest_data,
    )
