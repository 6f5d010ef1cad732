"""The micro-batch handler that Spark calls through ``foreachBatch``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.models import PipelineConfig
from frazil.decode import columns as c
from frazil.errors import DecodeError, FrazilError
from frazil.sink.iceberg import IcebergTableWriter
from frazil.sink.marker import CommitMarker
from frazil.source.kafka import TopicOffsets, merge_offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

log = logging.getLogger(__name__)

#: How many bad records a decode error quotes.
_QUOTED_BAD_RECORDS = 3


class StopRequested(FrazilError):
    """A batch began after shutdown was requested; Spark replays it on the next run."""


@dataclass
class BatchStats:
    """What one handler has done since the run started."""

    batches: int = 0
    skipped_batches: int = 0
    records: int = 0
    last_batch_id: int | None = None
    last_commit_wall_ms: int | None = None
    last_valid_through_ms: int | None = None


@dataclass(frozen=True)
class CommitEvent:
    """Reported after every commit, for progress output."""

    pipeline: str
    table: str
    batch_id: int
    records: int
    total_records: int
    valid_through_ms: int | None
    seconds: float


@dataclass
class BatchHandler:
    """Decoded micro-batch -> checks -> one Iceberg commit per table, exactly once."""

    pipeline: PipelineConfig
    writer: IcebergTableWriter
    on_commit: Callable[[CommitEvent], None] | None = None
    stats: BatchStats = field(default_factory=BatchStats)
    error: FrazilError | None = None
    closing: bool = False
    _query_id: str | None = None
    _query_id_set: threading.Event = field(default_factory=threading.Event)
    _busy: threading.Lock = field(default_factory=threading.Lock)

    def set_query_id(self, query_id: str) -> None:
        """Record the streaming query's id (stable across restarts of one checkpoint)."""
        self._query_id = query_id
        self._query_id_set.set()

    def wait_idle(self) -> None:
        """Block until no batch is being written."""
        with self._busy:
            pass

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.closing:
            raise StopRequested(f"pipeline {self.pipeline.name!r} is stopping")
        with self._busy:
            try:
                self._handle(batch, batch_id)
            except FrazilError as exc:
                self.error = exc
                raise

    def _handle(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        self._query_id_set.wait()
        query_id = self._query_id or ""
        if self.writer.already_committed(query_id, batch_id):
            # Committed before a crash, Spark's commit log just did not record it: skip.
            log.warning("%s: batch %d already committed, skipping", self.pipeline.name, batch_id)
            self.stats.skipped_batches += 1
            return
        started = time.monotonic()
        cached = batch.persist()
        try:
            per_partition = (
                cached.groupBy(c.TOPIC, c.PARTITION)
                .agg(
                    F.max(c.OFFSET).alias("max_offset"),
                    F.count(F.lit(1)).alias("records"),
                    F.max(c.TIMESTAMP_MS).alias("max_ts"),
                    F.count(c.CORRUPT).alias("corrupt"),
                    F.count_if(F.col(c.TOMBSTONE)).alias("tombstones"),
                )
                .collect()
            )
            if not per_partition:
                return
            if sum(row["corrupt"] for row in per_partition):
                raise self._decode_error(cached, batch_id, per_partition)
            batch_offsets: TopicOffsets = {}
            for row in per_partition:
                batch_offsets.setdefault(row[c.TOPIC], {})[row[c.PARTITION]] = row["max_offset"] + 1
            previous = self.writer.last
            offsets = merge_offsets(previous.offsets if previous else {}, batch_offsets)
            batch_max_ts = max(row["max_ts"] for row in per_partition)
            valid_through = max(batch_max_ts, (previous.valid_through_ms or 0) if previous else 0)
            records = sum(row["records"] - row["tombstones"] for row in per_partition)
            marker = CommitMarker(
                pipeline=self.pipeline.name,
                query_id=query_id,
                batch_id=batch_id,
                offsets=offsets,
                valid_through_ms=valid_through,
                records=records,
            )
            rows = cached.where(~F.col(c.TOMBSTONE)).drop(*c.INTERNAL)
            self.writer.commit(rows, marker)
        finally:
            cached.unpersist()
        self.stats.batches += 1
        self.stats.records += records
        self.stats.last_batch_id = batch_id
        self.stats.last_commit_wall_ms = int(time.time() * 1000)
        self.stats.last_valid_through_ms = valid_through
        if self.on_commit:
            self.on_commit(
                CommitEvent(
                    pipeline=self.pipeline.name,
                    table=self.pipeline.table,
                    batch_id=batch_id,
                    records=records,
                    total_records=self.stats.records,
                    valid_through_ms=valid_through,
                    seconds=time.monotonic() - started,
                )
            )

    def _decode_error(
        self, cached: DataFrame, batch_id: int, per_partition: list[Row]
    ) -> DecodeError:
        from pyspark.sql import functions as F

        total = sum(row["corrupt"] for row in per_partition)
        bad = (
            cached.where(F.col(c.CORRUPT).isNotNull())
            .orderBy(c.TOPIC, c.PARTITION, c.OFFSET)
            .select(c.TOPIC, c.PARTITION, c.OFFSET, F.substring(c.CORRUPT, 1, 120).alias("raw"))
            .limit(_QUOTED_BAD_RECORDS)
            .collect()
        )
        quoted = "\n".join(
            f"  topic {r[c.TOPIC]} partition {r[c.PARTITION]} offset {r[c.OFFSET]}: {r['raw']!r}"
            for r in bad
        )
        return DecodeError(
            f"pipeline {self.pipeline.name!r}: {total} record(s) in batch {batch_id} do not decode "
            f"as {self.pipeline.format} with the pipeline's schema; nothing of this batch was "
            f"committed and the pipeline stopped so no record is lost. First ones:\n{quoted}"
        )
