"""The micro-batch handler that Spark calls through ``foreachBatch``."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from frazil import columns as c
from frazil.config.models import PipelineConfig
from frazil.engine import dead_capture, one_job
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.deadletters import DeadLetters
from frazil.engine.plan import BatchPlan
from frazil.errors import DecodeError, FrazilError, PipelineError
from frazil.progress import markers
from frazil.progress.events import BatchSkipped, BatchStarted, CommitEvent, Event, SchemaEvolved
from frazil.sink.evolution import (
    NAME_MAPPING,
    TableView,
    WriteColumns,
    compare,
    evolve,
    write_columns,
)
from frazil.sink.iceberg import append_rows, iceberg_catalog, identifier
from frazil.sink.merge import merge_rows
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.kafka import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

#: How many bad records a rejected batch quotes.
_QUOTED_BAD_RECORDS = 3
#: Marks the failure of a write that met a record marked bad (see :func:`_guard`).
_BAD_RECORD = "frazil-bad-record"
#: How often a batch may learn new schemas and be planned again before it is rejected.
_MAX_LEARN = 3
#: Tables a routed batch writes at once: most of a small table's write is driver-side
#: (analysis, Iceberg's write planning and commit), which overlaps other tables' Spark jobs
#: (bench/routing: 8 threads wrote 20 tables in 4.7 s where 4 took 5.2-6 s).
FANOUT_THREADS = 8
#: Rows one task writes to one routed table, at most (fewer tasks, fewer small files).
ROWS_PER_WRITE_TASK = 250_000
#: A routed table that gets no records still gets a marker this often (seconds), so that a
#: restart from the tables never replays far for it.
IDLE_MARKER_SECONDS = 60.0
#: The routed batch's column naming the one table a row is for (the table list exploded).
_ROUTE_TABLE = one_job.ROUTE_TABLE
#: A hash of it (a long): the cache is sorted by it, which is far cheaper than sorting by
#: names that share a long prefix (``db.events_…``), and each table's scan of the cache skips
#: the blocks whose hash range leaves its own out.
_ROUTE_HASH = "__frazil_route_hash"
#: A one-table batch's flags, observed before the write's filter: the row is written; the
#: record is dropped as configured (counted).
_WANTED = "__frazil_wanted"
_DROPPED = "__frazil_dropped"
#: Test hook: ``<table>:<seconds>`` sleeps before writing that table, while the batch's other
#: tables commit (a kill -9 between two tables' commits).
_PAUSE_ENV = "FRAZIL_TEST_PAUSE_BEFORE_WRITE"
#: Failing records of a batch fetched again by position, at most; more are found by reading
#: the whole batch again (a filter of that many literals costs more than it saves).
_MAX_POSITIONS = 10_000
#: Test hook: seconds to sleep after a table committed and before its failing records go to
#: the dead-letter queue (a kill -9 in between).
_DEAD_PAUSE_ENV = "FRAZIL_TEST_PAUSE_BEFORE_DEAD_LETTERS"


class StopRequested(FrazilError):
    """A batch began after shutdown was requested; Spark replays it on the next run."""


@dataclass
class BatchStats:
    """What one handler has done since the run started."""

    batches: int = 0
    skipped_batches: int = 0
    records: int = 0
    #: Records a route matched to no table, with ``default: skip``.
    unmatched: int = 0
    #: Records dropped as configured: a transform's ``filter``, ``tombstones: skip``.
    filtered: int = 0
    #: Schema changes made to tables (one line each).
    evolutions: list[str] = field(default_factory=list)
    last_batch_id: int | None = None
    last_commit_wall_ms: int | None = None
    last_valid_through_ms: int | None = None


@dataclass
class BatchHandler:
    """Runs one pipeline's plan on each micro-batch and commits each table exactly once.

    The steps of one batch, in order:

    1. Read the batch's planned offset range from the checkpoint's offset log (every
       partition, idle ones included).
    2. Read each table's marker by walking its snapshot ancestry; if the whole range is
       already in every table (a replay), skip the batch without reading it.
    3. Build each table's new marker before reading any data: offsets from the planned
       range, valid-through from what earlier batches observed (a correct lower bound).
    4. Run the plan (source → decode → metadata → transform → route → mode → prune).
       One table: one pass that decodes, checks and appends in a single Spark job. Several
       tables (a route): the planned batch is cached, one aggregation counts its records
       per table (and finds marked records), tables seen for the first time are created,
       then the tables are written concurrently from the cache.
    5. Before a table's write, the batch's columns are matched to the table's by field id;
       new fields and promotions evolve the table in a commit of their own, and the rows
       are conformed to the table's shape (:mod:`frazil.sink.evolution`).
    6. Each table is appended in one Iceberg commit whose summary carries its marker; rows
       below the table's marker are dropped first (the offset filter), so a batch replayed
       after a crash between two tables' commits writes each record once to each table.
    7. A record marked with an error fails the write's job (or the aggregation), so nothing
       of it is committed. If a decoder can learn from the batch (a new schema id, a new
       JSON field), the batch is planned again; otherwise the first bad records are named
       (stage, topic, partition, offset) and the pipeline stops (a dead-letter queue comes
       later).
    8. Check no other run of the pipeline committed meanwhile; report the commit.

    When the run ends, :meth:`finish` records the last observations (exact valid-through)
    in a marker without data.
    """

    pipeline: PipelineConfig
    plan: BatchPlan
    targets: dict[str, Target]
    checkpoint: Checkpoint
    tables: TableSet | None = None
    #: Rebuilds the plan once decoders learned a new shape (new columns through the chain).
    replan: Callable[[], BatchPlan] | None = None
    admin: JvmKafkaAdmin | None = None
    on_event: Callable[[Event], None] | None = None
    stats: BatchStats = field(default_factory=BatchStats)
    #: Where failing records go (``errors.tolerance: all``); None: they stop the pipeline.
    dead_letters: DeadLetters | None = None
    error: FrazilError | None = None
    closing: bool = False
    #: Stop requests (SIGTERM, the caller's event): no batch starts once one is set, even
    #: before the runner's wait loop has noticed it and set ``closing``.
    stops: tuple[threading.Event, ...] = ()
    _query_id: str | None = None
    #: Column expressions reused from batch to batch (building them costs py4j round trips).
    _cache: dict[tuple[object, ...], list[Column]] = field(default_factory=dict)
    _writes: dict[tuple[object, ...], WriteColumns] = field(default_factory=dict)
    #: The one job's layouts (:mod:`frazil.engine.one_job`) by batch shape and table set.
    _layouts: dict[tuple[object, ...], one_job.Layout | None] = field(default_factory=dict)
    #: The one job's template of new tables, per namespace and batch shape (the latest).
    _templates: dict[tuple[str, str], one_job.Template | None] = field(default_factory=dict)
    #: The last batch handled and its planned end offsets: the next batch starts there.
    _previous: tuple[int, TopicOffsets] | None = None
    #: The partitions the last batch left behind their end offset.
    _previous_lagging: set[tuple[str, int]] = field(default_factory=set)
    _budget: int | None = None
    _query_id_set: threading.Event = field(default_factory=threading.Event)
    _busy: threading.Lock = field(default_factory=threading.Lock)
    _stats_lock: threading.Lock = field(default_factory=threading.Lock)

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

    @property
    def routed(self) -> bool:
        """Whether records fan out to several tables."""
        return not self.plan.single

    @property
    def cached(self) -> bool:
        """Whether batches are decoded once into a cache before their tables are written:
        with several tables, and for upsert/CDC, whose MERGE reads its source more than once
        (and cannot be observed while it runs)."""
        return self.routed or self.pipeline.write.merges

    def _handle(self, batch: DataFrame, batch_id: int) -> None:
        self._query_id_set.wait()
        started = time.monotonic()
        self._emit(BatchStarted(self.pipeline.name, batch_id))
        planned = self.checkpoint.planned_offsets(batch_id)
        states = self._states()
        # Only one table can vouch for a whole batch: a routed batch may hold records for a
        # table not known yet (created by the batch that crashed), so it is always read,
        # and each table's write skips what its own marker covers.
        if (
            not self.routed
            and self.dead_letters is None
            and planned
            and all(markers.covered(s.marker, planned) for s in states.values())
        ):
            log.warning(
                "%s: batch %d is already in its tables, skipping", self.pipeline.name, batch_id
            )
            self.stats.skipped_batches += 1
            self._previous = (batch_id, planned)
            self._emit(BatchSkipped(self.pipeline.name, batch_id))
            return
        context = _BatchContext(
            batch=batch,
            batch_id=batch_id,
            planned=planned,
            start=self._start_offsets(batch_id),
            lagging=self._lagging(planned),
            started=started,
        )
        if self.cached:
            self._fan_out(context, states)
        else:
            name, target = next(iter(self.targets.items()))
            self._write_one(context, target, states[name])
        self._previous = (batch_id, planned)
        self._previous_lagging = context.lagging
        self.stats.batches += 1
        self.stats.last_batch_id = batch_id

    def _states(self) -> dict[str, markers.TableState]:
        """Each table's state (its newest marker), several tables read at once."""
        names = list(self.targets)

        def read(name: str) -> markers.TableState:
            return markers.find_marker(self.targets[name].table, self.pipeline.name)

        return dict(zip(names, each(names, read), strict=True))

    def _learned(self, batch: DataFrame, batch_id: int, attempt: int) -> bool:
        """Let the decoders learn from a batch with marked records; replan if they did."""
        if attempt >= _MAX_LEARN or not self.plan.learn(batch):
            return False
        log.info("%s: learned new schemas in batch %d", self.pipeline.name, batch_id)
        if self.replan is not None:
            self.plan = self.replan()
        return True

    def _write_one(
        self,
        ctx: _BatchContext,
        target: Target,
        state: markers.TableState,
        attempt: int = 0,
        learn: bool = True,
    ) -> None:
        """One table: decode, check and append in a single Spark job, observed as it runs.

        With a dead-letter queue, records a decoder may learn from (a new schema id, new JSON
        fields) still stop the first attempt, so that the table evolves rather than their
        records going to the queue; once nothing more can be learned, they go there too.
        """
        frame = self.plan.run(ctx.batch)
        try:
            self._write(ctx, frame, target, state, None, learn=learn)
        except _BadRecords as bad:
            if self._learned(ctx.batch, ctx.batch_id, attempt):
                # Nothing was committed: plan and write the batch again with what was learned.
                self._write_one(ctx, target, state, attempt + 1, learn)
                return
            if self.dead_letters is not None and learn:
                self._write_one(ctx, target, state, attempt + 1, learn=False)
                return
            raise self._rejected(bad.rows, ctx.batch_id) from None

    def _fan_out(
        self, ctx: _BatchContext, states: dict[str, markers.TableState], attempt: int = 0
    ) -> None:
        """Several tables: decode once into a cache, then write the tables concurrently.

        The cache holds one row per record and table, sorted by a hash of the table name
        within each Spark partition, so a table's write skips the cached blocks of other
        tables (the cache keeps each block's smallest and largest hash) instead of reading
        the batch.
        """
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        if attempt == 0 and self._one_job(ctx, states):
            return
        planned = self.plan.run(ctx.batch)
        frame = (
            planned.select(F.explode_outer(F.col(c.TABLE)).alias(_ROUTE_TABLE), "*")
            .withColumn(_ROUTE_HASH, F.xxhash64(F.col(_ROUTE_TABLE)))
            .sortWithinPartitions(_ROUTE_HASH)
            .persist(StorageLevel.MEMORY_AND_DISK_DESER)
        )
        try:
            partitions = tuple(
                (t, p) for t, parts in sorted(ctx.planned.items()) for p in sorted(parts)
            )
            summary = _summarise(frame, self._metrics(partitions)[1:], partitions)
            if summary.bad:
                learnable = summary.learnable or self.dead_letters is None
                if learnable and self._learned(ctx.batch, ctx.batch_id, attempt):
                    frame.unpersist()
                    self._fan_out(ctx, states, attempt + 1)
                    return
                if self.dead_letters is None:
                    raise self._rejected(frame, ctx.batch_id)
                # Before any table commits: a crash afterwards replays the batch, and the
                # dead-letter table's marker keeps its records once.
                # One row per record (the cache has one per record and table).
                once = F.coalesce(F.col(_ROUTE_TABLE) == F.col(c.TABLE)[0], F.lit(True))
                self.dead_letters.write(
                    frame.where(F.col(c.ERROR).isNotNull() & once),
                    F.col(c.ERROR),
                    planned=ctx.planned,
                    lagging=ctx.lagging,
                    batch_id=ctx.batch_id,
                    query_id=self._query_id or "",
                )
            with self._stats_lock:
                self.stats.unmatched += summary.unmatched
                self.stats.filtered += summary.filtered
            self._create_all(ctx, states, summary, c.user_schema(planned.schema))
            names = list(summary.tables)
            pause = _pause()
            workers = max(1, min(len(names), FANOUT_THREADS))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [
                    pool.submit(
                        self._write_routed,
                        ctx,
                        frame,
                        self.targets[n],
                        states[n],
                        summary.tables[n],
                        pause,
                    )
                    for n in names
                ]
                errors = [f.exception() for f in futures]
            first = next((e for e in errors if e is not None), None)
            if isinstance(first, _BadRecords):
                raise self._rejected(first.rows, ctx.batch_id)
            if first is not None:
                raise first
            self._mark_idle(ctx, states, set(names))
        finally:
            frame.unpersist()

    def _one_job(self, ctx: _BatchContext, states: dict[str, markers.TableState]) -> bool:
        """Write a routed batch to all of its tables in one Spark job, if it is the common
        case (:mod:`frazil.engine.one_job`); False: nothing was committed, the general path
        is to write it.

        Each table is committed once, with its marker; a table the batch meets first is
        created in the same transaction as its rows. Should a commit fail after others went
        through, their markers make the general path skip what they hold.
        """
        if self.pipeline.write.merges or self.tables is None:
            return False
        for name in self.targets:
            state = states[name]
            if (
                state.marker is None
                or not markers.starts_at_or_after(ctx.start, state.marker)
                or markers.covered(state.marker, ctx.planned)
            ):
                return False  # a replay, or a table to adopt: the general path filters
        began = time.monotonic()
        planned = self.plan.run(ctx.batch)
        layout = self._job_layout(planned.schema)
        if layout is None:
            return False
        spark = self._spark()
        tables = [self.targets[n].table.java for n in layout.names]
        frame = layout.frame(planned, max(1, spark.sparkContext.defaultParallelism))
        if not layout.fits(frame):
            return False
        try:
            outcome = one_job.run(spark, frame, layout, tables)
        except Exception as exc:  # nothing is committed: the general way names the failure
            log.debug("%s: the one job failed (%s)", self.pipeline.name, str(exc)[:300])
            return False
        written = time.monotonic()
        new = [n for n, share in outcome.tables.items() if share.created]
        try:
            unusable = any(n in self.pipeline.tables for n in new) or any(
                each(new, self.tables.exists)
            )
        except Exception:
            outcome.delete(spark)
            raise
        if not outcome.clean or unusable:
            outcome.delete(spark)
            log.debug(
                "%s: batch %d goes the general way (%d bad, %d deferred, %d refused)",
                self.pipeline.name,
                ctx.batch_id,
                outcome.bad,
                outcome.deferred,
                len(outcome.refused),
            )
            return False
        pause = _pause()
        # New tables first: each is created with its rows and marker. Only then do the known
        # tables commit, so that a crash in between leaves every known table before the
        # batch, and a restart from the tables' markers (without the checkpoint) reads the
        # batch again rather than starting past the rows of a table never created.
        committed: dict[str, markers.Marker] = {}
        opened: dict[str, tuple[Target, markers.TableState]] = {}
        for phase in (new, [n for n in outcome.tables if n not in new]):
            if not phase:
                continue
            with ThreadPoolExecutor(max_workers=min(len(phase), FANOUT_THREADS)) as pool:
                futures = {
                    n: pool.submit(self._commit_share, ctx, n, outcome, layout, states, pause)
                    for n in phase
                }
                errors: dict[str, BaseException] = {}
                for n, future in futures.items():
                    error = future.exception()
                    if error is None:
                        committed[n], found = future.result()
                        if found is not None:
                            opened[n] = found
                    else:
                        errors[n] = error
            if errors:
                self._record_commits(ctx, outcome, committed, states, opened)
                # Files are deleted only where nothing was committed for certain: a failed
                # commit may have gone through (Iceberg keeps its files in that case too).
                untouched = [
                    n
                    for n in outcome.tables
                    if n not in committed and (n not in errors or isinstance(errors[n], _Refit))
                ]
                outcome.delete(spark, untouched)
                first = next(iter(errors.values()))
                if not isinstance(first, _Refit):
                    raise first
                for name, target in self.targets.items():
                    states[name] = markers.find_marker(target.table, self.pipeline.name)
                return False
        self._record_commits(ctx, outcome, committed, states, opened)
        with self._stats_lock:
            self.stats.unmatched += outcome.unmatched
            self.stats.filtered += outcome.filtered
        log.debug(
            "%s: batch %d written to %d table(s) in one job (%.2f s; commits %.2f s)",
            self.pipeline.name,
            ctx.batch_id,
            len(committed),
            written - began,
            time.monotonic() - written,
        )
        self._mark_idle(ctx, states, set(committed))
        return True

    def _record_commits(
        self,
        ctx: _BatchContext,
        outcome: one_job.Outcome,
        committed: dict[str, markers.Marker],
        states: dict[str, markers.TableState],
        opened: dict[str, tuple[Target, markers.TableState]],
    ) -> None:
        """Keep and report the one job's commits (new tables join the pipeline's, as the
        commit opened them)."""
        assert self.tables is not None
        for name, marker in committed.items():
            if name not in self.targets:
                target, state = opened.get(name) or self._open(name)
                self.targets[name] = target
                states[name] = state
            share = outcome.tables[name]
            self._committed(
                ctx, self.targets[name], marker, share.records, share.timestamps, share.bytes
            )

    def _commit_share(
        self,
        ctx: _BatchContext,
        name: str,
        outcome: one_job.Outcome,
        layout: one_job.Layout,
        states: dict[str, markers.TableState],
        pause: tuple[str, float] | None,
    ) -> tuple[markers.Marker, tuple[Target, markers.TableState] | None]:
        """Commit one table's files of the job (creating the table if new): its marker, and
        for a new table, the table opened and its state (read here, alongside the other
        tables' commits)."""
        if pause is not None and pause[0] == name:
            time.sleep(pause[1])
        spark = self._spark()
        jvm = spark.sparkContext._jvm
        assert jvm is not None and self.tables is not None
        share = outcome.tables[name]
        target = self.targets.get(name)
        state = states.get(name)
        marker = markers.next_marker(
            state.marker if state is not None else None,
            pipeline=self.pipeline.name,
            planned=ctx.planned,
            stats=target.pending if target is not None and state and _ours(state, target) else {},
            lagging=ctx.lagging,
            batch_id=ctx.batch_id,
            query_id=self._query_id or "",
        )
        summary = jvm.java.util.HashMap()
        for key, value in marker.to_summary().items():
            summary.put(key, value)
        writes = jvm.dev.frazil.spark.RoutedWrites
        if target is not None:
            assert state is not None
            writes.append(outcome.java, target.table.java, name, summary)
            markers.check_no_interleaving(target.table, state, marker)
            return marker, None
        template = layout.template
        assert template is not None
        drops = jvm.java.util.ArrayList()
        for column in template.drops(share.with_values):
            drops.add(column)
        created = writes.createAndAppend(
            outcome.java,
            iceberg_catalog(spark, self.tables.catalog),
            identifier(spark, name.split(".")),
            template.java_table,
            template.properties,
            drops,
            NAME_MAPPING,
            summary,
        )
        if not created:
            raise _Refit(name)
        log.info("%s: created table %s", self.pipeline.name, name)
        # Should opening it fail, the table is committed all the same: the error is raised
        # (its files stay), the known tables commit nothing, and the restart reads it anew.
        return marker, self._open(name)

    def _open(self, name: str) -> tuple[Target, markers.TableState]:
        """A table of the pipeline's, opened, and its state."""
        assert self.tables is not None
        target = self.tables.target(name)
        return target, markers.find_marker(target.table, self.pipeline.name)

    def _job_layout(self, schema: StructType) -> one_job.Layout | None:
        """The one job's columns for this batch shape and the current tables (cached)."""
        assert self.tables is not None
        views = {n: self._view(t) for n, t in self.targets.items()}
        key = (
            "one-job",
            schema.json(),
            tuple((n, v.schema_id, v.mapping_text) for n, v in sorted(views.items())),
        )
        if key in self._layouts:
            return self._layouts[key]
        user = c.user_schema(schema)
        known: dict[str, tuple[WriteColumns, list[str]]] = {}
        shared: dict[tuple[object, ...], WriteColumns] = {}
        layout: one_job.Layout | None = None
        for name, target in self.targets.items():
            java = target.table.java
            if (
                not one_job.template_eligible(target.settings.model_copy(update={"aliases": {}}))
                or not java.sortOrder().isUnsorted()
                or str(java.properties().getOrDefault("write.format.default", "parquet")).lower()
                != "parquet"
            ):
                break
            columns = one_job.table_columns(
                schema, user, views[name], target.settings, name, shared
            )
            if columns is None:
                break
            known[name] = columns
        else:
            namespace = self.tables.new_table_namespace()
            template = None
            if namespace is not None and self.tables.catalog_type in ("jdbc", "hadoop"):
                # The same for every layout of this batch shape (the known tables change).
                at = (namespace, user.json())
                if at not in self._templates:
                    self._templates = {
                        at: one_job.make_template(
                            self._spark(), self.tables.catalog, self.pipeline, namespace, user
                        )
                    }
                template = self._templates[at]
            layout = one_job.build_layout(schema, known, template, views)
        if len(self._layouts) > 8:
            self._layouts.clear()
        self._layouts[key] = layout
        return layout

    def _write_routed(
        self,
        ctx: _BatchContext,
        frame: DataFrame,
        target: Target,
        state: markers.TableState,
        stats: _TableStats,
        pause: tuple[str, float] | None,
    ) -> None:
        if pause is not None and pause[0] == target.name:
            time.sleep(pause[1])
        self._write(ctx, frame, target, state, stats)

    def _create_all(
        self,
        ctx: _BatchContext,
        states: dict[str, markers.TableState],
        summary: _Summary,
        user: StructType,
    ) -> None:
        """Create the batch's new tables concurrently (each is a few catalog round trips and
        a marker commit, mostly waiting: bench/routing created 20 in 0.8 s instead of 1.3)."""
        new = [n for n in summary.tables if n not in self.targets]
        if not new:
            return

        def create(name: str) -> Target:
            return self._create(name, user, summary.tables[name].with_values, ctx)

        # The first one alone: it also creates the namespace, which others likely share.
        made = [create(new[0])]
        if len(new) > 1:
            with ThreadPoolExecutor(max_workers=min(len(new) - 1, FANOUT_THREADS)) as pool:
                made.extend(pool.map(create, new[1:]))
        for name, target in zip(new, made, strict=True):
            self.targets[name] = target
            states[name] = markers.find_marker(target.table, self.pipeline.name)

    def _create(
        self, name: str, user: StructType, with_values: set[str], ctx: _BatchContext
    ) -> Target:
        """Create a table seen for the first time, with the columns its records hold.

        The new table gets a marker without data at the batch's start before any table of
        the batch commits: should the batch crash after other tables committed, the next
        run finds this table among the pipeline's and writes its records. An existing table
        holding rows but no marker of the pipeline is refused, as at start.

        Raises:
            PipelineError: The table exists with rows of another writer.
        """

        assert self.tables is not None
        if self.tables.exists(name):
            target = self.tables.target(name)
            state = markers.find_marker(target.table, self.pipeline.name)
            if state.marker is None and state.total_records > 0:
                raise PipelineError(
                    f"pipeline {self.pipeline.name!r}: the route sends records to table {name}, "
                    f"which holds {state.total_records:,} rows but no progress marker of this "
                    "pipeline: frazil will not mix them into another writer's table (route "
                    "them elsewhere, or run once with --reset-offsets; docs/exactly-once.md)"
                )
            if state.marker is None:
                self._commit_start_marker(target, state, ctx)
            return target
        target = self.tables.create_routed(name, user, with_values)
        self._commit_start_marker(
            target, markers.find_marker(target.table, self.pipeline.name), ctx
        )
        return target

    def _commit_start_marker(
        self, target: Target, state: markers.TableState, ctx: _BatchContext
    ) -> None:
        """A marker saying the table holds everything of the pipeline before this batch."""
        start = ctx.start or {}
        marker = markers.next_marker(
            state.marker,
            pipeline=self.pipeline.name,
            planned=start,
            stats={},
            lagging=set(),
            batch_id=ctx.batch_id - 1,
            query_id=self._query_id or "",
        )
        target.table.commit_summary_only(marker.to_summary())

    def _mark_idle(
        self, ctx: _BatchContext, states: dict[str, markers.TableState], written: set[str]
    ) -> None:
        """Give tables without records in this batch a marker now and then."""
        now = time.monotonic()
        for name, target in self.targets.items():
            if name in written:
                continue
            if target.committed_at is not None and now - target.committed_at < IDLE_MARKER_SECONDS:
                continue
            state = states.get(name)
            if state is None or (state.marker is not None and state.marker.offsets == ctx.planned):
                continue
            self._commit_marker_only(target, state, ctx.planned, ctx.lagging, ctx.batch_id)

    def _commit_marker_only(
        self,
        target: Target,
        state: markers.TableState,
        planned: TopicOffsets,
        lagging: set[tuple[str, int]],
        batch_id: int,
    ) -> None:
        marker = markers.next_marker(
            state.marker,
            pipeline=self.pipeline.name,
            planned=planned,
            stats={},
            lagging=lagging,
            batch_id=batch_id,
            query_id=self._query_id or "",
        )
        target.table.commit_summary_only(marker.to_summary())
        target.last = marker
        target.committed_at = time.monotonic()

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

    def _view(self, target: Target) -> TableView:
        """The table's columns, re-read only when its schema changed."""
        java = target.table.java
        schema_id = int(java.schema().schemaId())
        if (
            target.view is None
            or target.view.schema_id != schema_id
            or target.view.mapping_text != _mapping_text(java)
        ):
            target.view = TableView.read(self._spark(), java)
        return target.view

    def _carry_budget(self) -> int:
        """Bytes of failing records a batch's write may carry to the driver."""
        if self._budget is None:
            self._budget = dead_capture.driver_budget(self._spark())
        return self._budget

    def _spark(self) -> SparkSession:
        assert self.tables is not None, "a BatchHandler writes through its TableSet"
        return self.tables.spark

    def _adapt(
        self,
        schema: StructType,
        target: Target,
        batch_id: int,
        with_values: set[str] | None,
    ) -> WriteColumns:
        """The batch's columns in the table's shape, after evolving the table if needed."""
        user = c.user_schema(schema)
        view = self._view(target)
        diff = compare(user, view, target.settings, with_values=with_values)
        if diff.desired is not None:
            changes = tuple(diff.additions)
            evolve(
                self._spark(),
                target.table.java,
                diff.desired,
                diff.additions,
                pipeline=self.pipeline.name,
                batch_id=batch_id,
                name=target.name,
            )
            target.table.refresh()
            view = self._view(target)
            diff = compare(user, view, target.settings, with_values=with_values)
            with self._stats_lock:
                self.stats.evolutions.extend(f"{target.name}: {change}" for change in changes)
            self._emit(SchemaEvolved(self.pipeline.name, target.name, batch_id, changes))
        if diff.dropped:
            log.info(
                "%s: column(s) %s were dropped from %s; not writing them",
                self.pipeline.name,
                ", ".join(diff.dropped),
                target.name,
            )
        key = (
            target.qualified,
            schema.json(),
            view.schema_id,
            view.mapping_text,
            tuple(sorted(diff.columns.items())),
            tuple(m.path for m in diff.mismatches),
        )
        columns = self._writes.get(key)
        if columns is None:
            columns = write_columns(schema, view, diff, target.name)
            self._writes[key] = columns
        return columns

    def _write(
        self,
        ctx: _BatchContext,
        frame: DataFrame,
        target: Target,
        state: markers.TableState,
        routed: _TableStats | None,
        *,
        learn: bool = False,
    ) -> None:
        """Append the table's rows of the batch in one commit carrying the table's marker.

        The marker must be in the commit's summary, so it is built before the data is read:
        offsets from the planned range; largest timestamps from the batches observed before
        (a correct lower bound for valid-through, made exact by the next commit or at stop).
        A record marked with an error makes the write's job fail before Iceberg commits
        anything (:class:`_BadRecords`).
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        marker = markers.next_marker(
            state.marker,
            pipeline=self.pipeline.name,
            planned=ctx.planned,
            stats=target.pending if _ours(state, target) else {},
            lagging=ctx.lagging,
            batch_id=ctx.batch_id,
            query_id=self._query_id or "",
        )
        dead = self.dead_letters
        if state.marker is not None and marker.offsets == state.marker.offsets:
            if dead is not None:
                # A replay: the table has the batch, the dead-letter queue may not.
                self._dead_letters_of(ctx, frame, target, routed, None)
            return  # nothing new for this table
        merging = target.settings.write.merges
        wanted = F.col(c.OP).isin(*c.WRITTEN_OPS)
        keep = (
            None
            if markers.starts_at_or_after(ctx.start, state.marker)
            else markers.offset_filter(state.marker)
        )
        if keep is not None:
            wanted = wanted & keep
        if routed is not None:
            wanted = _of_table(target.name, routed) & wanted
        schema = self.plan.schema_of(ctx.batch)
        columns = self._adapt(schema, target, ctx.batch_id, routed.with_values if routed else None)
        partitions = tuple(
            (t, p) for t, parts in sorted(ctx.planned.items()) for p in sorted(parts)
        )
        failing: Observation | None = None
        failing_at: list[Any] | None = None
        observation: Observation | None = None
        # Records dropped as configured (a filter, a skipped tombstone), counted once: a
        # routed or merging batch counts them in its aggregation.
        dropped = (F.col(c.OP) == F.lit(c.OP_SKIP)) & F.col(c.ERROR).isNull()
        if keep is not None:
            dropped = dropped & keep
        if dead is None and routed is None and not merging:
            # Observed before the filter, so that the skipped records are counted in the
            # same pass; records and timestamps count the written ones only.
            observation = Observation(f"frazil_{uuid.uuid4().hex}")
            selected = (
                frame.select("*", wanted.alias(_WANTED), dropped.alias(_DROPPED))
                .observe(observation, *self._metrics(partitions, flagged=True))
                .where(F.col(_WANTED))
            )
        elif dead is None:
            selected = frame.where(wanted)
        elif merging:
            # A MERGE cannot be observed as it runs: find the failing records in the cache.
            error = columns.error
            mine = frame.where(_of_table(target.name, routed))
            own = _own_error(error, True)
            written = mine.where(F.col(c.OP).isin(*c.WRITTEN_OPS))
            failing_at = [
                tuple(r)
                for r in written.where(own.isNotNull())
                .select(c.TOPIC, c.PARTITION, c.OFFSET, own["stage"], own["reason"])
                .collect()
            ]
            selected = written.where(error.isNull() if keep is None else error.isNull() & keep)
        else:
            # Failing records leave the write for the dead-letter queue; they are observed
            # in the same pass, with their raw bytes where these fit (engine/dead_capture.py).
            error = columns.error
            mine = frame if routed is None else frame.where(_of_table(target.name, routed))
            own = _own_error(error, routed is not None)
            failing = Observation(f"frazil_dead_{uuid.uuid4().hex}")
            limit = (
                # A routed batch is cached: its failing records are read from the cache.
                0
                if routed is not None
                else dead_capture.carry_limit(
                    self._carry_budget(),
                    # Not from the table's marker: a re-planned batch may start below it.
                    dead_capture.records_upper_bound(ctx.planned, ctx.start),
                )
            )
            written_op = F.col(c.OP).isin(*c.WRITTEN_OPS)
            own_written = F.when(written_op, own)
            appended = mine.observe(
                failing,
                F.count(own_written).alias("bad"),
                dead_capture.observed(own_written, limit, c.HEADERS in frame.columns).alias("at"),
                F.count(F.when(dropped, F.lit(1)) if routed is None else F.lit(None)).alias(
                    "dropped"
                ),
            ).where(written_op)
            good = (
                F.when(_learnable(error), _failure()).otherwise(error.isNull())
                if learn
                else error.isNull()
            )
            selected = appended.where(good if keep is None else good & keep)
        if routed is not None and not merging:
            # A table's share of the batch in as few tasks (and files) as its size needs:
            # the other tables' writes keep the other cores busy.
            selected = selected.coalesce(max(1, -(-routed.records // ROWS_PER_WRITE_TASK)))
        if observation is None and not merging and (routed is None or dead is not None):
            # One table: counts and timestamps are observed as the rows stream by.
            observation = Observation(f"frazil_{uuid.uuid4().hex}")
            selected = selected.observe(observation, *self._metrics(partitions))
        # The routed batch's aggregation counted them already (one Dataset less per table:
        # each costs an analysis through py4j).
        table_columns = columns.table if dead is not None else columns.guarded(_failure())
        options = {"check-nullability": "false"} if target.view and target.view.required else {}
        try:
            if merging:
                write = target.settings.write
                changes = selected.select(
                    *table_columns, F.col(c.OP), F.col(c.OFFSET), F.col(c.PARTITION)
                )
                merge_rows(
                    changes, target.qualified, write.key, write.order_by, marker.to_summary()
                )
            else:
                append_rows(
                    selected.select(*table_columns), target.qualified, marker.to_summary(), options
                )
        except Exception as exc:  # py4j / Spark wrap the job failure; look for our mark
            if _BAD_RECORD not in str(exc):
                raise
            raise _BadRecords(frame.where(wanted).select(*columns.rows())) from None
        markers.check_no_interleaving(target.table, state, marker)
        written_bytes = target.table.current_total("added-files-size")
        found = (
            None
            if failing is None
            else dead_capture.Failing.observed(self._spark().sparkContext._jvm, failing)
        )
        if routed is None and not merging:
            filtered = (
                dead_capture.observed_count(failing, "dropped")
                if failing is not None
                else int((observation.get if observation is not None else {}).get("dropped") or 0)
            )
            with self._stats_lock:
                self.stats.filtered += filtered
        if found is not None:
            self._dead_letters_of(ctx, frame, target, routed, found)
        if failing_at:
            self._dead_letters_of(ctx, frame, target, routed, dead_capture.Failing.at(failing_at))
        if observation is not None:
            seen = observation.get
            records = int(seen.get("records") or 0)
            stamps = {tp: seen.get(f"ts_{i}") for i, tp in enumerate(partitions)}
        else:
            assert routed is not None
            records, stamps = routed.records, dict(routed.timestamps)
        self._committed(ctx, target, marker, records, stamps, written_bytes)

    def _committed(
        self,
        ctx: _BatchContext,
        target: Target,
        marker: markers.Marker,
        records: int,
        stamps: dict[tuple[str, int], Any],
        written_bytes: int,
    ) -> None:
        """Keep what a table's commit observed for its next marker, and report the commit."""
        target.pending = {
            tp: markers.PartitionStats(0, int(ts)) for tp, ts in stamps.items() if ts is not None
        }
        target.last = marker
        target.committed_at = time.monotonic()
        valid = markers.next_marker(
            marker,
            pipeline=marker.pipeline,
            planned=ctx.planned,
            stats=target.pending,
            lagging=ctx.lagging,
            batch_id=ctx.batch_id,
        ).valid_through_ms
        target.lagging = ctx.lagging
        with self._stats_lock:
            self.stats.records += records
            self.stats.last_commit_wall_ms = int(time.time() * 1000)
            self.stats.last_valid_through_ms = valid
            total = self.stats.records
        self._emit(
            CommitEvent(
                pipeline=self.pipeline.name,
                table=target.name,
                batch_id=ctx.batch_id,
                records=records,
                total_records=total,
                valid_through_ms=valid,
                seconds=time.monotonic() - ctx.started,
                offsets=marker.offsets,
                max_timestamps={tp: int(ts) for tp, ts in stamps.items() if ts is not None},
                bytes_written=written_bytes,
            )
        )

    def _dead_letters_of(
        self,
        ctx: _BatchContext,
        frame: DataFrame,
        target: Target,
        routed: _TableStats | None,
        seen: dead_capture.Failing | None,
    ) -> None:
        """Send a table's failing records of the batch to the dead-letter queue.

        ``seen`` lists them as the write found them: where they are (topic, partition,
        offset) and, for those it carried (:func:`dead_capture.observed`), their raw record;
        the others are read and decoded again. None (a replayed batch) looks at the whole
        batch.
        """
        from pyspark.sql import functions as F

        assert self.dead_letters is not None
        pause = os.environ.get(_DEAD_PAUSE_ENV)
        if pause:
            time.sleep(float(pause))
        schema = self.plan.schema_of(ctx.batch)
        columns = self._adapt(schema, target, ctx.batch_id, routed.with_values if routed else None)
        started = time.monotonic()
        own = _own_error(columns.error, routed is not None)
        headers = c.HEADERS in frame.columns
        bad: DataFrame | None
        if self.cached or seen is None:
            # The cache holds the batch's raw records; a replay (None) looks at all of it.
            source = frame
            if routed is not None:
                source = source.where(_of_table(target.name, routed))
            bad = source.where(F.col(c.OP).isin(*c.WRITTEN_OPS) & own.isNotNull()).select(
                *_dead_source_columns(headers), own.alias(dead_capture.ERROR_COLUMN)
            )
        elif not seen.missing:
            # Every one carried in the write's pass: no Spark job at all.
            self.dead_letters.write_carried(
                seen.records,
                seen.carried_rows if self.dead_letters.topic is not None else list,
                headers,
                planned=ctx.planned,
                lagging=ctx.lagging,
                batch_id=ctx.batch_id,
                query_id=self._query_id or "",
                seen=seen.positions,
                source="" if routed is None else target.name,
            )
            bad = None
        else:
            # Carried in the write's pass; only records too large for that are read again.
            parts = []
            missing = seen.missing
            if len(missing) > _MAX_POSITIONS:
                # Many: read the whole batch again rather than build a huge filter.
                parts.append(frame)
            else:
                carried = seen.carried_rows()
                if carried:
                    parts.append(dead_capture.carried_frame(self._spark(), carried, headers))
                if missing:
                    parts.append(self.plan.run(ctx.batch.where(_raw_positions(missing))))
            parts = [
                part
                if dead_capture.ERROR_COLUMN in part.columns
                else part.where(F.col(c.OP).isin(*c.WRITTEN_OPS) & own.isNotNull()).select(
                    *_dead_source_columns(headers), own.alias(dead_capture.ERROR_COLUMN)
                )
                for part in parts
            ]
            bad = parts[0]
            for part in parts[1:]:
                bad = bad.unionByName(part)
        if bad is not None:
            self.dead_letters.write(
                bad,
                F.col(dead_capture.ERROR_COLUMN),
                planned=ctx.planned,
                lagging=ctx.lagging,
                batch_id=ctx.batch_id,
                query_id=self._query_id or "",
                seen=None if seen is None else seen.positions,
                source="" if routed is None else target.name,
            )
        log.info(
            "%s: batch %d: dead letters of %s sent in %.2fs",
            self.pipeline.name,
            ctx.batch_id,
            target.name,
            time.monotonic() - started,
        )

    def _metrics(
        self, partitions: tuple[tuple[str, int], ...], *, flagged: bool = False
    ) -> list[Column]:
        """Observed while the batch is written: records, largest timestamp per partition.

        ``flagged``: observed before the write's filter, on rows flagged :data:`_WANTED`
        (written) and :data:`_DROPPED` (skipped as configured, counted as ``dropped``).
        """
        from pyspark.sql import functions as F

        cached = self._cache.get(("metrics", partitions, flagged))
        if cached is None:
            wanted = F.col(_WANTED) if flagged else F.lit(True)
            cached = [
                F.count(F.when(wanted, F.lit(1))).alias("records"),
                *[
                    F.max(
                        F.when(
                            wanted & (F.col(c.TOPIC) == t) & (F.col(c.PARTITION) == p),
                            F.col(c.TIMESTAMP_MS),
                        )
                    ).alias(f"ts_{i}")
                    for i, (t, p) in enumerate(partitions)
                ],
            ]
            if flagged:
                cached.append(F.count(F.when(F.col(_DROPPED), F.lit(1))).alias("dropped"))
            self._cache[("metrics", partitions, flagged)] = cached
        return list(cached)

    def finish(self) -> None:
        """Record what the last batches observed (exact valid-through) in a marker of its own.

        Called once the query has stopped. It commits no data, and only if this run's marker
        is still the table's newest one of the pipeline. A routed table that got no records
        in the last batches gets a marker of the last batch's offsets.
        """
        with self._busy:
            # Each table's marker is a few catalog round trips and a commit, mostly waiting.
            each(list(self.targets.values()), self._finish_one)

    def _finish_one(self, target: Target) -> None:
        """:meth:`finish` for one table."""
        last = target.last
        if (
            self.routed
            and self._previous is not None
            and (last is None or last.offsets != self._previous[1])
        ):
            state = markers.find_marker(target.table, self.pipeline.name)
            if state.marker is None or state.marker.offsets != self._previous[1]:
                self._commit_marker_only(
                    target,
                    state,
                    self._previous[1],
                    self._previous_lagging,
                    self._previous[0],
                )
            return
        if last is None or not target.pending:
            return
        state = markers.find_marker(target.table, self.pipeline.name)
        if not _ours(state, target):
            return
        final = markers.next_marker(
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
            return
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


class _Refit(Exception):
    """A new table would not get the columns' ids its files were written with."""


class _BadRecords(Exception):
    """A write met records marked bad; ``rows`` are the rows it wrote from."""

    def __init__(self, rows: DataFrame) -> None:
        super().__init__("bad records")
        self.rows = rows


@dataclass(frozen=True)
class _BatchContext:
    """What every table's write of one batch shares."""

    batch: DataFrame
    batch_id: int
    planned: TopicOffsets
    start: TopicOffsets | None
    lagging: set[tuple[str, int]]
    started: float


@dataclass(frozen=True)
class _TableStats:
    """One table's share of a routed batch."""

    #: Records to append.
    records: int
    #: The user columns holding a value in at least one of its records.
    with_values: set[str]
    #: Largest Kafka timestamp per partition among its records.
    timestamps: tuple[tuple[tuple[str, int], int | None], ...]
    #: The table's :data:`_ROUTE_HASH` in the batch's cache.
    route_hash: int | None = None


@dataclass(frozen=True)
class _Summary:
    """One aggregation over a routed batch."""

    bad: int
    #: Marked records a decoder may learn from (:func:`_learnable`).
    learnable: int
    unmatched: int
    #: Records dropped as configured (a filter, a skipped tombstone).
    filtered: int
    #: Tables with records to append.
    tables: dict[str, _TableStats]


def _summarise(
    frame: DataFrame, stamps: list[Column], partitions: tuple[tuple[str, int], ...]
) -> _Summary:
    """Count a routed batch's records per table, its marked and unmatched records, which
    columns hold values and the largest timestamps per table, in one job (which also fills
    the cache)."""
    from pyspark.sql import functions as F

    user = [n for n in frame.columns if not c.is_internal(n)]
    rows = (
        frame.groupBy(_ROUTE_TABLE)
        .agg(
            F.count(F.col(c.ERROR)).alias("bad"),
            F.sum(_learnable(F.col(c.ERROR)).cast("int")).alias("learnable"),
            F.sum((F.col(c.TABLE).isNull() & F.col(c.ERROR).isNull()).cast("int")).alias(
                "unmatched"
            ),
            # Once per record (the cache has a row per record and table).
            F.sum(
                (
                    (F.col(c.OP) == F.lit(c.OP_SKIP))
                    & F.col(c.ERROR).isNull()
                    & F.col(c.TABLE).isNotNull()
                    & (F.col(_ROUTE_TABLE) == F.col(c.TABLE)[0])
                ).cast("int")
            ).alias("filtered"),
            F.sum(F.col(c.OP).isin(*c.WRITTEN_OPS).cast("int")).alias("append"),
            F.first(F.col(_ROUTE_HASH)).alias("route_hash"),
            *[F.max(F.col(n).isNotNull()).alias(f"v{i}") for i, n in enumerate(user)],
            *stamps,
        )
        .collect()
    )
    tables = {
        str(r[_ROUTE_TABLE]): _TableStats(
            int(r["append"] or 0),
            {n for i, n in enumerate(user) if r[f"v{i}"]},
            tuple((tp, r[f"ts_{i}"]) for i, tp in enumerate(partitions)),
            r["route_hash"],
        )
        for r in sorted(rows, key=lambda r: str(r[_ROUTE_TABLE]))
        if r[_ROUTE_TABLE] is not None and int(r["append"] or 0) > 0
    }
    return _Summary(
        bad=sum(int(r["bad"] or 0) for r in rows),
        learnable=sum(int(r["learnable"] or 0) for r in rows),
        unmatched=sum(int(r["unmatched"] or 0) for r in rows),
        filtered=sum(int(r["filtered"] or 0) for r in rows),
        tables=tables,
    )


def _of_table(name: str, routed: _TableStats | None) -> Column:
    """A routed batch's rows for table ``name`` (by hash first: the cache's blocks are
    pruned by it)."""
    from pyspark.sql import functions as F

    mine = F.col(_ROUTE_TABLE) == F.lit(name)
    if routed is None or routed.route_hash is None:
        return mine
    return (F.col(_ROUTE_HASH) == F.lit(routed.route_hash)) & mine


def _learnable(error: Column) -> Column:
    """Whether a record's error is one a decoder may learn from (a new schema id, new JSON
    fields): such records replan the batch rather than go to the dead-letter queue."""
    from pyspark.sql import functions as F

    from frazil.decode.json import NEW_FIELDS

    reason = error["reason"]
    return error.isNotNull() & (
        reason.startswith("unknown schema id") | (reason == F.lit(NEW_FIELDS))
    )


def _own_error(error: Column, routed: bool) -> Column:
    """A table's own marks of a record (values it cannot take). In a routed batch the
    records marked before routing go to the dead-letter queue once, for the whole batch."""
    from pyspark.sql import functions as F

    return F.when(F.col(c.ERROR).isNull(), error) if routed else error


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


def _mapping_text(java_table: Any) -> str | None:
    from frazil.sink.evolution import NAME_MAPPING

    value = java_table.properties().get(NAME_MAPPING)
    return None if value is None else str(value)


def _pause() -> tuple[str, float] | None:
    value = os.environ.get(_PAUSE_ENV)
    if not value or ":" not in value:
        return None
    table, seconds = value.rsplit(":", 1)
    return table, float(seconds)


def _ours(state: markers.TableState, target: Target) -> bool:
    """Whether the table's newest marker of the pipeline is the one this run committed last."""
    return (
        state.marker is not None
        and target.last is not None
        and state.marker.commit_id == target.last.commit_id
    )


def _failure() -> Column:
    """What a write evaluates for a record marked bad: it fails the job, naming the record."""
    from pyspark.sql import functions as F

    return F.raise_error(
        F.format_string(
            f"{_BAD_RECORD} topic %s partition %d offset %d",
            F.col(c.TOPIC),
            F.col(c.PARTITION),
            F.col(c.OFFSET),
        )
    )


def each(items: Sequence[_T], call: Callable[[_T], _R]) -> list[_R]:
    """``call`` for each item, in order: inline for one, else FANOUT_THREADS at a time (a
    routed pipeline's tables: catalog round trips and commits, mostly waiting). The first
    failure, in order, is raised."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), FANOUT_THREADS)) as pool:
        return list(pool.map(call, items))
