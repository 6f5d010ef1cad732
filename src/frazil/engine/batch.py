"""The micro-batch handler that Spark calls through ``foreachBatch``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import PipelineConfig
from frazil.engine import progress
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.events import BatchSkipped, BatchStarted, CommitEvent, Event
from frazil.engine.plan import BatchPlan
from frazil.errors import DecodeError, FrazilError, PipelineError
from frazil.sink.iceberg import IcebergTable, append_rows
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.kafka import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row

log = logging.getLogger(__name__)

#: How many bad records a rejected batch quotes.
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


@dataclass
class Target:
    """A table the pipeline writes: its config name, qualified name and live handle."""

    name: str
    qualified: str
    table: IcebergTable
    last: progress.Marker | None = None


@dataclass
class BatchHandler:
    """Runs one pipeline's plan on each micro-batch and commits each table exactly once.

    The steps of one batch, in order:

    1. Read the batch's planned offset range from the checkpoint's offset log (every
       partition, idle ones included).
    2. Read each table's marker by walking its snapshot ancestry; if the whole range is
       already in every table (a replay), skip the batch without reading it.
    3. Run the plan: source → decode → metadata → transform → route → mode → prune.
    4. Drop rows below their table's marker (the offset filter) and cache the rest once.
    5. One aggregate per table and partition: records, largest Kafka timestamp, errors.
    6. Any record marked with an error stops the batch before anything is committed, with
       its stage, topic, partition and offset (a dead-letter queue comes later).
    7. Per table: append the rows in one Iceberg commit whose summary carries the new
       marker (offsets of every planned partition, valid-through); a batch with nothing to
       append still commits the marker, so progress is never lost.
    8. Check no other run of the pipeline committed meanwhile; report the commit.
    """

    pipeline: PipelineConfig
    plan: BatchPlan
    targets: dict[str, Target]
    checkpoint: Checkpoint
    admin: JvmKafkaAdmin | None = None
    on_event: Callable[[Event], None] | None = None
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

    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _handle(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        self._query_id_set.wait()
        started = time.monotonic()
        self._emit(BatchStarted(self.pipeline.name, batch_id))
        planned = self.checkpoint.planned_offsets(batch_id)
        states = {
            name: progress.find_marker(t.table, self.pipeline.name)
            for name, t in self.targets.items()
        }
        if planned and all(progress.covered(s.marker, planned) for s in states.values()):
            log.warning(
                "%s: batch %d is already in its tables, skipping", self.pipeline.name, batch_id
            )
            self.stats.skipped_batches += 1
            self._emit(BatchSkipped(self.pipeline.name, batch_id))
            return
        frame = self.plan.run(batch)
        keep = self._keep(states)
        if keep is not None:
            frame = frame.where(keep)
        if len(self.targets) == 1:
            # One table: its name on every cached row would only cost memory and copies.
            frame = frame.drop(c.TABLE)
        cached = frame.persist()
        try:
            table = F.col(c.TABLE) if c.TABLE in cached.columns else F.lit(self._only_table)
            per_partition = (
                cached.groupBy(table.alias(c.TABLE), F.col(c.TOPIC), F.col(c.PARTITION))
                .agg(
                    F.count_if(F.col(c.OP) == c.OP_APPEND).alias("records"),
                    F.max(c.TIMESTAMP_MS).alias("max_ts"),
                    F.count(c.ERROR).alias("errors"),
                )
                .collect()
            )
            if sum(row["errors"] for row in per_partition):
                raise self._rejected(cached, batch_id, per_partition)
            lagging = self._lagging(planned)
            for name, target in self.targets.items():
                rows = [r for r in per_partition if r[c.TABLE] == name]
                self._commit(
                    cached, target, states[name], planned, rows, lagging, batch_id, started
                )
        finally:
            cached.unpersist()
        self.stats.batches += 1
        self.stats.last_batch_id = batch_id

    @property
    def _only_table(self) -> str:
        return next(iter(self.targets))

    def _keep(self, states: dict[str, progress.TableState]) -> Column | None:
        """Rows each table does not hold yet: the offset filter, per table."""
        from pyspark.sql import functions as F

        filters = {name: progress.offset_filter(s.marker) for name, s in states.items()}
        if all(f is None for f in filters.values()):
            return None
        if len(filters) == 1:
            return next(iter(filters.values()))
        condition = None
        for name, f in filters.items():
            clause = F.col(c.TABLE) == F.lit(name)
            if f is not None:
                clause = clause & f
            condition = clause if condition is None else condition | clause
        return condition

    def _lagging(self, planned: TopicOffsets) -> set[tuple[str, int]]:
        """Partitions the batch did not read to their end offset.

        Without a rate limit Spark plans every partition up to its latest offset, so none
        lags; with one, Kafka's latest offsets tell.
        """
        if self.admin is None or not planned:
            return set()
        latest = self.admin.offsets({t: sorted(ps) for t, ps in planned.items()}, "latest")
        return {
            (topic, partition)
            for topic, parts in planned.items()
            for partition, end in parts.items()
            if end < latest.get(topic, {}).get(partition, end)
        }

    def _commit(
        self,
        cached: DataFrame,
        target: Target,
        state: progress.TableState,
        planned: TopicOffsets,
        rows: list[Row],
        lagging: set[tuple[str, int]],
        batch_id: int,
        started: float,
    ) -> None:
        from pyspark.sql import functions as F

        stats = {
            (r[c.TOPIC], r[c.PARTITION]): progress.PartitionStats(r["records"], r["max_ts"])
            for r in rows
        }
        records = sum(s.records for s in stats.values())
        marker = progress.next_marker(
            state.marker,
            pipeline=self.pipeline.name,
            planned=planned,
            stats=stats,
            lagging=lagging,
            batch_id=batch_id,
            query_id=self._query_id or "",
            records=records,
        )
        if state.marker is not None and marker.offsets == state.marker.offsets:
            return  # nothing new for this table (its rows were all filtered out)
        if records:
            data = cached.where(F.col(c.OP) == c.OP_APPEND)
            if len(self.targets) > 1:
                data = data.where(F.col(c.TABLE) == F.lit(target.name))
            data = data.select(*[col for col in data.columns if not c.is_internal(col)])
            append_rows(data, target.qualified, marker.to_summary())
        else:
            target.table.commit_summary_only(marker.to_summary())
        progress.check_no_interleaving(target.table, state, marker)
        target.last = marker
        self.stats.records += records
        self.stats.last_commit_wall_ms = int(time.time() * 1000)
        self.stats.last_valid_through_ms = marker.valid_through_ms
        self._emit(
            CommitEvent(
                pipeline=self.pipeline.name,
                table=target.name,
                batch_id=batch_id,
                records=records,
                total_records=self.stats.records,
                valid_through_ms=marker.valid_through_ms,
                seconds=time.monotonic() - started,
            )
        )

    def _rejected(
        self, cached: DataFrame, batch_id: int, per_partition: list[Row]
    ) -> PipelineError:
        """The error that stops a batch holding marked records, quoting the first ones."""
        from pyspark.sql import functions as F

        total = sum(row["errors"] for row in per_partition)
        bad = (
            cached.where(F.col(c.ERROR).isNotNull())
            .orderBy(c.TOPIC, c.PARTITION, c.OFFSET)
            .select(c.TOPIC, c.PARTITION, c.OFFSET, c.ERROR)
            .limit(_QUOTED_BAD_RECORDS)
            .collect()
        )
        quoted = "\n".join(
            f"  topic {r[c.TOPIC]} partition {r[c.PARTITION]} offset {r[c.OFFSET]}: "
            f"{r[c.ERROR]['stage']}: {r[c.ERROR]['reason']}: {r[c.ERROR]['detail']!r}"
            for r in bad
        )
        stages = sorted({r[c.ERROR]["stage"] for r in bad})
        kind = DecodeError if stages == [c.STAGE_DECODE] else PipelineError
        what = (
            f"do not decode as {self.pipeline.format} with the pipeline's schema"
            if kind is DecodeError
            else "failed"
        )
        return kind(
            f"pipeline {self.pipeline.name!r}: {total} record(s) in batch {batch_id} {what}; "
            f"nothing of this batch was committed and the pipeline stopped so no record is "
            f"lost. First ones:\n{quoted}"
        )
