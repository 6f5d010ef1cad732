"""The micro-batch handler that Spark calls through ``foreachBatch``."""

from __future__ import annotations

import logging
import threading
import time
import uuid
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
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

#: How many bad records a rejected batch quotes.
_QUOTED_BAD_RECORDS = 3
#: Marks the failure of a write that met a record marked bad (see :func:`_guarded`).
_BAD_RECORD = "frazil-bad-record"


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
    #: Largest timestamps observed by the last commit, not yet in a marker.
    pending: dict[tuple[str, int], progress.PartitionStats] = field(default_factory=dict)
    lagging: set[tuple[str, int]] = field(default_factory=set)


@dataclass
class BatchHandler:
    """Runs one pipeline's plan on each micro-batch and commits each table exactly once.

    The steps of one batch, in order:

    1. Read the batch's planned offset range from the checkpoint's offset log (every
       partition, idle ones included).
    2. Read each table's marker by walking its snapshot ancestry; if the whole range is
       already in every table (a replay), skip the batch without reading it.
    3. Build the new marker before reading any data: offsets from the planned range,
       valid-through from what earlier batches observed (a correct lower bound).
    4. One pass per table: run the plan (source → decode → metadata → transform → route →
       mode → prune), drop rows below the table's marker (the offset filter), and append in
       one Iceberg commit whose summary carries the marker, observing records and the
       largest Kafka timestamp per partition as the rows stream by.
    5. A record marked with an error fails the write's job, so nothing is committed; the
       batch is then read once more to name the first bad records (stage, topic, partition,
       offset) and the pipeline stops (a dead-letter queue comes later).
    6. Check no other run of the pipeline committed meanwhile; report the commit.

    When the run ends, :meth:`finish` records the last observations (exact valid-through)
    in a marker without data.
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
    #: Stop requests (SIGTERM, the caller's event): no batch starts once one is set, even
    #: before the runner's wait loop has noticed it and set ``closing``.
    stops: tuple[threading.Event, ...] = ()
    _query_id: str | None = None
    #: Column expressions reused from batch to batch (building them costs py4j round trips).
    _cache: dict[tuple[object, ...], list[Column]] = field(default_factory=dict)
    #: The last batch handled and its planned end offsets: the next batch starts there.
    _previous: tuple[int, TopicOffsets] | None = None
    _query_id_set: threading.Event = field(default_factory=threading.Event)
    _busy: threading.Lock = field(default_factory=threading.Lock)

    def new_query(self) -> None:
        """Forget what belonged to the previous streaming query (a restart from the table)."""
        self.error = None
        self.closing = False
        # Batch ids start again at 0 in a new checkpoint: the old ones say nothing of it.
        self._previous = None
        self._query_id_set.clear()

    def set_query_id(self, query_id: str) -> None:
        """Record the streaming query's id (stable across restarts of one checkpoint)."""
        self._query_id = query_id
        self._query_id_set.set()

    def wait_idle(self) -> None:
        """Block until no batch is being written."""
        with self._busy:
            pass

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.closing or any(stop.is_set() for stop in self.stops):
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
            self._previous = (batch_id, planned)
            self._emit(BatchSkipped(self.pipeline.name, batch_id))
            return
        start = self._start_offsets(batch_id)
        keep = self._keep(states, start)
        lagging = self._lagging(planned)
        for name, target in self.targets.items():
            self._write(batch, keep, target, states[name], planned, lagging, batch_id, started)
        self._previous = (batch_id, planned)
        self.stats.batches += 1
        self.stats.last_batch_id = batch_id

    def _planned_rows(self, batch: DataFrame, keep: Column | None) -> DataFrame:
        frame = self.plan.run(batch)
        return frame if keep is None else frame.where(keep)

    def _start_offsets(self, batch_id: int) -> TopicOffsets | None:
        """Where the batch starts: the previous batch's planned end, if known."""
        if self._previous is not None and self._previous[0] == batch_id - 1:
            return self._previous[1]
        if batch_id > 0:
            try:
                return self.checkpoint.planned_offsets(batch_id - 1)
            except PipelineError:  # purged from the offset log: filter to be safe
                return None
        return None

    def _keep(
        self, states: dict[str, progress.TableState], start: TopicOffsets | None
    ) -> Column | None:
        """Rows each table does not hold yet: the offset filter, per table.

        In the steady state a batch starts exactly at the markers and the filter is skipped;
        it applies to replays, re-planned ranges, restored checkpoints and second runs.
        """
        from pyspark.sql import functions as F

        filters = {
            name: None
            if progress.starts_at_or_after(start, s.marker)
            else progress.offset_filter(s.marker)
            for name, s in states.items()
        }
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

    def _write(
        self,
        batch: DataFrame,
        keep: Column | None,
        target: Target,
        state: progress.TableState,
        planned: TopicOffsets,
        lagging: set[tuple[str, int]],
        batch_id: int,
        started: float,
    ) -> None:
        """One pass: decode, check and append in a single Spark job, observed as it runs.

        The marker must be in the commit's summary, so it is built before the data is read:
        offsets from the planned range; largest timestamps from the batches observed before
        (a correct lower bound for valid-through, made exact by the next commit or at stop).
        A record marked with an error makes the write's job fail before Iceberg commits
        anything; only then is the batch read a second time, to name the records.
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        marker = progress.next_marker(
            state.marker,
            pipeline=self.pipeline.name,
            planned=planned,
            stats=target.pending if _ours(state, target) else {},
            lagging=lagging,
            batch_id=batch_id,
            query_id=self._query_id or "",
        )
        if state.marker is not None and marker.offsets == state.marker.offsets:
            return  # nothing new for this table
        wanted = F.col(c.OP) == c.OP_APPEND
        if keep is not None:
            wanted = wanted & keep
        if len(self.targets) > 1:
            wanted = wanted & (F.col(c.TABLE) == F.lit(target.name))
        rows = self.plan.run(batch).where(wanted)
        partitions = tuple((t, p) for t, parts in sorted(planned.items()) for p in sorted(parts))
        observation = Observation(f"frazil_{uuid.uuid4().hex}")
        observed = rows.observe(observation, *self._metrics(partitions))
        data = observed.select(*self._guarded_columns(tuple(observed.columns)))
        try:
            append_rows(data, target.qualified, marker.to_summary())
        except Exception as exc:  # py4j / Spark wrap the job failure; look for our mark
            if _BAD_RECORD not in str(exc):
                raise
            if self.plan.learn(batch):
                # New writer schemas (registry ids) were fetched: nothing was committed, so
                # the batch is planned and written again with them.
                log.info("%s: learned new schemas in batch %d", self.pipeline.name, batch_id)
                self._write(batch, keep, target, state, planned, lagging, batch_id, started)
                return
            raise self._rejected(self._planned_rows(batch, keep), batch_id) from None
        progress.check_no_interleaving(target.table, state, marker)
        seen = observation.get
        records = int(seen.get("records") or 0)
        target.pending = {
            tp: progress.PartitionStats(0, int(seen[f"ts_{i}"]))
            for i, tp in enumerate(partitions)
            if seen.get(f"ts_{i}") is not None
        }
        target.last = marker
        valid = progress.next_marker(
            marker,
            pipeline=marker.pipeline,
            planned=planned,
            stats=target.pending,
            lagging=lagging,
            batch_id=batch_id,
        ).valid_through_ms
        target.lagging = lagging
        self.stats.records += records
        self.stats.last_commit_wall_ms = int(time.time() * 1000)
        self.stats.last_valid_through_ms = valid
        self._emit(
            CommitEvent(
                pipeline=self.pipeline.name,
                table=target.name,
                batch_id=batch_id,
                records=records,
                total_records=self.stats.records,
                valid_through_ms=valid,
                seconds=time.monotonic() - started,
            )
        )

    def _metrics(self, partitions: tuple[tuple[str, int], ...]) -> list[Column]:
        """Observed while the batch is written: records, largest timestamp per partition."""
        from pyspark.sql import functions as F

        cached = self._cache.get(("metrics", partitions))
        if cached is None:
            cached = [
                F.count(F.lit(1)).alias("records"),
                *[
                    F.max(
                        F.when(
                            (F.col(c.TOPIC) == t) & (F.col(c.PARTITION) == p),
                            F.col(c.TIMESTAMP_MS),
                        )
                    ).alias(f"ts_{i}")
                    for i, (t, p) in enumerate(partitions)
                ],
            ]
            self._cache[("metrics", partitions)] = cached
        return list(cached)

    def _guarded_columns(self, columns: tuple[str, ...]) -> list[Column]:
        cached = self._cache.get(("guard", columns))
        if cached is None:
            cached = _guarded(list(columns))
            self._cache[("guard", columns)] = cached
        return list(cached)

    def finish(self) -> None:
        """Record what the last batches observed (exact valid-through) in a marker of its own.

        Called once the query has stopped. It commits no data, and only if this run's marker
        is still the table's newest one of the pipeline.
        """
        with self._busy:
            for target in self.targets.values():
                last = target.last
                if last is None or not target.pending:
                    continue
                state = progress.find_marker(target.table, self.pipeline.name)
                if not _ours(state, target):
                    continue
                final = progress.next_marker(
                    last,
                    pipeline=last.pipeline,
                    planned=last.offsets,
                    stats=target.pending,
                    lagging=target.lagging,
                    batch_id=last.batch_id,
                    query_id=last.query_id,
                )
                if (final.max_timestamps, final.valid_through_ms) == (
                    last.max_timestamps,
                    last.valid_through_ms,
                ):
                    continue
                target.table.commit_summary_only(final.to_summary())
                target.last, target.pending = final, {}

    def _rejected(self, rows: DataFrame, batch_id: int) -> PipelineError:
        """The error that stops a batch holding marked records, quoting the first ones."""
        from pyspark.sql import functions as F

        bad_rows = rows.where(F.col(c.ERROR).isNotNull())
        total = bad_rows.count()
        bad = (
            bad_rows.orderBy(c.TOPIC, c.PARTITION, c.OFFSET)
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


def _ours(state: progress.TableState, target: Target) -> bool:
    """Whether the table's newest marker of the pipeline is the one this run committed last."""
    return (
        state.marker is not None
        and target.last is not None
        and state.marker.commit_id == target.last.commit_id
    )


def _guarded(columns: list[str]) -> list[Column]:
    """The table's columns, with a check that fails the write on any record marked bad.

    The check rides on the first column's expression, so it costs nothing extra per record
    and runs inside the write's own job; the message carries the record's coordinates.
    """
    from pyspark.sql import functions as F

    names = [col for col in columns if not c.is_internal(col)]
    first, rest = names[0], names[1:]
    failure = F.raise_error(
        F.format_string(
            f"{_BAD_RECORD} topic %s partition %d offset %d",
            F.col(c.TOPIC),
            F.col(c.PARTITION),
            F.col(c.OFFSET),
        )
    )
    checked = F.when(F.col(c.ERROR).isNotNull(), failure).otherwise(F.col(first))
    return [checked.alias(first), *[F.col(name) for name in rest]]
