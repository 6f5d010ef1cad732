"""The micro-batch handler that Spark calls through ``foreachBatch``.

The handler keeps the run's lifecycle and takes each batch through its steps; each role it
hands out lives in a module of its own (see docs/architecture.md, "One micro-batch"):

* :mod:`~frazil.engine.window` — the batch window and the markers its commits carry;
* :mod:`~frazil.engine.ledger` — the pipeline's tables, commits, counts, events, idle markers;
* :mod:`~frazil.engine.live_plan` — the plan, rebuilt when a batch teaches the decoders;
* :mod:`~frazil.engine.batch_write` — the batch written one of three ways, its bad records
  learned from or rejected, its dead letters sent and its commits recorded; the ways:
  :mod:`~frazil.engine.table_write` (one table's rows in one commit),
  :mod:`~frazil.engine.routed_job` with :mod:`~frazil.engine.routed_commit` (a routed
  batch's files for all of its tables in one Spark job, and their commits) and
  :mod:`~frazil.engine.cached_write` (the cached way), each handing back
  :mod:`~frazil.engine.outcomes`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.engine.batch_write import BatchWriter
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.ledger import BatchStats, TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.py4j_replies import prompt_replies
from frazil.engine.window import BatchCursor, BatchWindow
from frazil.errors import CommitError, FrazilError, StaleMarker, TableRolledBack
from frazil.progress import offset_rules, table_markers
from frazil.progress.events import BatchDone, BatchSkipped, BatchStarted, Event
from frazil.sink.dead_letters.queue import DeadLetters
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

__all__ = ["BatchHandler", "BatchStats", "StopRequested"]


class StopRequested(FrazilError):
    """A batch began after shutdown was requested; Spark replays it on the next run."""


#: Times one batch is planned again because another run's commits came in between.
MOVED_ATTEMPTS = 5


@dataclass
class BatchHandler:
    """Runs one pipeline's plan on each micro-batch and commits each table exactly once.

    :meth:`__call__` takes one micro-batch through its steps (see :meth:`_handle`). When the
    run ends, :meth:`finish` records the last observations (exact valid-through) in a marker
    without data.

    Attributes:
        pipeline: The pipeline.
        live: The live plan.
        tables: Opens and creates the pipeline's tables.
        ledger: The pipeline's tables, the run's commits and counts.
        cursor: Where the stream is (the batch windows).
        dead_letters: Where failing records go (``errors.tolerance: all``); None: they stop
            the pipeline.
        error: The error that stopped the last batch, if any.
        failure: Any other exception that stopped the last batch (a library's: Spark's, the
            JVM's), kept to report: Spark passes it on as the text of a Python traceback.
        restart: Why the query must start again from the tables' markers (a rollback).
        closing: Set once the run stops: no batch starts.
        stops: Stop requests (SIGTERM, the caller's event): no batch starts once one is set.
    """

    pipeline: PipelineConfig
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    cursor: BatchCursor
    dead_letters: DeadLetters | None = None
    error: FrazilError | None = None
    failure: Exception | None = None
    restart: str | None = None
    closing: bool = False
    stops: tuple[threading.Event, ...] = ()
    _query_id: str | None = None
    _query_id_set: threading.Event = field(default_factory=threading.Event)
    _busy: threading.Lock = field(default_factory=threading.Lock)
    _writer: BatchWriter = field(init=False)

    @classmethod
    def build(
        cls,
        pipeline: PipelineConfig,
        live: LivePlan,
        tables: TableSet,
        checkpoint: Checkpoint,
        *,
        admin: JvmKafkaAdmin | None = None,
        on_event: Callable[[Event], None] | None = None,
        dead_letters: DeadLetters | None = None,
        topics: JvmKafkaAdmin | None = None,
    ) -> BatchHandler:
        """A handler writing the pipeline's tables known now (and those its batches meet).

        Args:
            pipeline: The pipeline.
            live: Its live plan.
            tables: Opens and creates its tables.
            checkpoint: The query's checkpoint (its offset log plans each batch).
            admin: Kafka's latest offsets, to find partitions a rate-limited batch leaves
                behind; None without a rate limit.
            on_event: Receives the run's events.
            dead_letters: The dead-letter queue; None: failing records stop the pipeline.
            topics: Kafka's topic ids, checked before each batch (a topic deleted and
                created again under the query stops it); None: not checked.
        """
        known = tables.known()
        tables.warn_if_written_otherwise(known)
        return cls(
            pipeline=pipeline,
            live=live,
            tables=tables,
            ledger=TableLedger(
                pipeline.name, known, tables, on_event, slack_ms=pipeline.slack_ms()
            ),
            cursor=BatchCursor(checkpoint, admin, topics, slack_ms=pipeline.slack_ms()),
            dead_letters=dead_letters,
        )

    def __post_init__(self) -> None:
        self._writer = BatchWriter(
            self.pipeline, self.live, self.tables, self.ledger, self.dead_letters
        )

    # -- lifecycle with the runner ------------------------------------------------------

    @property
    def targets(self) -> dict[str, Target]:
        """The tables the pipeline writes, by config name."""
        return self.ledger.targets

    @property
    def stats(self) -> BatchStats:
        """What the handler has done since the run started."""
        return self.ledger.stats

    @property
    def checkpoint(self) -> Checkpoint:
        """The query's checkpoint."""
        return self.cursor.checkpoint

    def new_query(self, topic_ids: dict[str, str] | None = None) -> None:
        """Forget what belonged to the previous streaming query (a restart from the table).

        Args:
            topic_ids: Kafka's topic ids the query's starting offsets were decided on.
        """
        self.error = None
        self.failure = None
        self.restart = None
        self.closing = False
        self.cursor.new_query(topic_ids)
        self.ledger.forget_seen()
        self._query_id_set.clear()

    def watch_lagging(self, admin: JvmKafkaAdmin | None) -> None:
        """Ask ``admin`` for Kafka's latest offsets at each batch, to tell the partitions a
        rate-limited batch left behind their end offset; None: none can lag."""
        self.cursor.admin = admin

    def take_restart(self) -> str | None:
        """Why the query should start again from the tables (a table rolled back while it
        ran), once; None if nothing calls for it."""
        why, self.restart = self.restart, None
        return why

    @property
    def topic_ids_read(self) -> dict[str, str]:
        """The topic ids the query's offsets refer to (those of topics it discovered since it
        started included)."""
        return self.cursor.query_ids

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
            # The JVM opened this callback's connection: its replies get no wait from here.
            prompt_replies(batch.sparkSession)
            try:
                self._handle_again_if_moved(batch, batch_id)
            except TableRolledBack as exc:
                self.restart = str(exc)
                raise
            except FrazilError as exc:
                self.error = exc
                raise
            except Exception as exc:
                self.failure = exc
                raise

    def _handle_again_if_moved(self, batch: DataFrame, batch_id: int) -> None:
        """:meth:`_handle`, planned again from the tables' new state when the catalog refused
        a commit on a stale marker (another run committed in between; a rollback is found by
        the next attempt's step 2)."""
        for attempt in range(1, MOVED_ATTEMPTS + 1):
            try:
                self._handle(batch, batch_id)
                return
            except StaleMarker as stale:
                if attempt == MOVED_ATTEMPTS:
                    raise CommitError(
                        f"pipeline {self.pipeline.name!r}: batch {batch_id} was overtaken "
                        f"{MOVED_ATTEMPTS} times in a row by other commits of the pipeline; "
                        f"the last: {stale}. Another run of this pipeline is writing its "
                        "tables: stop one of them"
                    ) from None
                log.warning(
                    "%s: batch %d: %s; planning it again", self.pipeline.name, batch_id, stale
                )

    def finish(self) -> None:
        """Record what the last batches observed (exact valid-through) in a marker of its own.

        Called once the query has stopped. It commits no data, and only if this run's marker
        is still the table's newest one of the pipeline. A routed table that got no records
        in the last batches gets a marker of the last batch's offsets.
        """
        with self._busy:
            self.ledger.finish(self.cursor.last, self.routed, self._query_id or "")

    # -- one micro-batch ----------------------------------------------------------------

    @property
    def routed(self) -> bool:
        """Whether records fan out to several tables."""
        return not self.live.plan.single

    def _handle(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch, in order:

        1. **Planned range.** Read the batch's planned offsets from the checkpoint's offset
           log (every partition, idle ones included), and Kafka's ids of its topics: a topic
           deleted and created again since the query started stops the batch before anything
           is read (the runner restarts from the tables).
        2. **Table states and the skip.** Read each table's marker by walking its snapshot
           ancestry (the offsets of a topic recorded under another id, the old topic of a
           name created again, left out). A marker behind what the run saw before (a
           rollback) stops the query, which starts again from the tables. If the whole range
           is already in every table (a replay, another run), skip the batch without reading
           it.
        3. **Window.** Where the batch starts (the previous batch's end) and which
           partitions it leaves behind; each table's marker is built from it before any data
           is read (offsets from the planned range, valid-through from what earlier batches
           observed).
        4. **Write, one of three ways** (:class:`~frazil.engine.batch_write.BatchWriter`),
           with the columns the config file promoted (:mod:`~frazil.engine.promotion`).
           One table: one pass that decodes, checks and appends (or merges), observed as it
           runs. Several: the one job writes all of them when it can; otherwise, as for
           upsert/CDC, the cached way writes them concurrently from the batch decoded once.
           Each table's columns are matched to the batch's by field id (the table evolves in
           a commit of its own if needed), rows below its marker are dropped (the offset
           filter), and it gets one commit whose summary carries its marker.
        5. **Bad records.** A record marked with an error fails its write's job, so nothing
           of it is committed. If a decoder can learn from the batch (a new schema id, a new
           JSON field), the batch is planned again and written again; otherwise, with a
           dead-letter queue, its failing records leave the writes (in the cached way,
           records failing before routing go to the queue before any table commits), or,
           without one, the first ones are named (stage, topic, partition, offset) and the
           pipeline stops.
        6. **Dead letters, record commits, idle markers.** Each way hands back what each
           table's commit holds: once the tables committed, their failing records go to the
           dead-letter queue, then each commit is kept for the table's next marker and
           reported; routed tables without records get a marker now and then. The catalog
           refuses a commit whose table got another marker of the pipeline since step 2
           (another run, a rollback): nothing of it is committed and the batch is planned
           again (:meth:`_handle_again_if_moved`).
        7. **Remember the window**: the next batch starts at its end.
        """
        self._query_id_set.wait()
        started = time.monotonic()
        self.ledger.emit(BatchStarted(self.pipeline.name, batch_id))
        # 1. planned range, and the ids of its topics (a topic created again stops here)
        planned = self.cursor.planned(batch_id)
        topic_ids = self.cursor.topic_ids(self.pipeline.name, planned)
        # 2. table states (without the old offsets of topics created again) and the skip
        states = self._states(topic_ids)
        if self._skipped(batch_id, planned, states):
            return
        # 3. window
        window = self.cursor.open(
            batch, batch_id, planned, started, self._query_id or "", topic_ids
        )
        # 4.-5. write one of three ways; bad records teach the decoders, or leave, or stop it
        self.live.take_promotions()
        wrote = self._writer.write(window, states)
        # 6. dead letters after the commits, the commits recorded, idle markers
        self._writer.record(window, wrote)
        self.ledger.mark_idle(window, states, set(wrote.tables))
        # 7. remember the window
        self._done(window)

    def _states(self, topic_ids: dict[str, str]) -> dict[str, table_markers.TableState]:
        """Step 2: the tables' states, held against what the run saw of them before."""
        states = {
            name: table_markers.current_state(state, topic_ids)
            for name, state in self.ledger.states().items()
        }
        self.ledger.check_moved(states)
        return states

    def _skipped(
        self, batch_id: int, planned: TopicOffsets, states: dict[str, table_markers.TableState]
    ) -> bool:
        """Step 2's skip: whether the batch is wholly in its tables already (then skipped).

        Only one table can vouch for a whole batch: a routed batch may hold records for a
        table not known yet (created by the batch that crashed), so it is always read, and
        each table's write skips what its own marker covers. A batch in dead-letter mode is
        read too: its dead letters follow the commit (docs/exactly-once.md).
        """
        if (
            self.routed
            or self.dead_letters is not None
            or not planned
            or not all(offset_rules.covered(s.marker, planned) for s in states.values())
        ):
            return False
        # Normal after a stop (Spark plans the batch the tables already hold again): nothing
        # for an operator to do.
        log.info("%s: batch %d is already in its tables, skipping", self.pipeline.name, batch_id)
        self.stats.skipped_batches += 1
        self.cursor.skipped(batch_id, planned)
        self.ledger.emit(BatchSkipped(self.pipeline.name, batch_id))
        return True

    def _done(self, window: BatchWindow) -> None:
        """Step 7: the window remembered (the next batch starts at its end), and reported."""
        self.cursor.done(window)
        self.stats.batches += 1
        self.stats.last_batch_id = window.batch_id
        # One event for the whole batch, after its tables' commits: `frazil run` prints a line
        # per batch (not per table) and follows the backlog with it.
        self.ledger.emit(
            BatchDone(
                self.pipeline.name,
                window.batch_id,
                time.monotonic() - window.started,
                offsets=window.planned,
                read=window.records,
            )
        )
