"""The batch writer: a batch written one of three ways, what the decoders can learn from its
bad records, and what follows its tables' commits (dead letters, the commits recorded).

* one table: :class:`~frazil.engine.table_write.TableWriter`'s one pass;
* several tables: :class:`~frazil.engine.routed_job.RoutedJob`'s one Spark job, its files
  committed by :class:`~frazil.engine.routed_commit.RoutedCommitter`;
* what that job leaves, and upsert/CDC with several tables or a dead-letter queue:
  :class:`~frazil.engine.cached_write.CachedWrite`.

Each way commits and hands back what it committed (:mod:`~frazil.engine.outcomes`); the
learning and the rejection of bad records (:meth:`BatchWriter._learned`), the dead letters
and the ledger's record of each commit (:meth:`BatchWriter.record`) are done here, once for
all three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.bad_records import BadRecords, rejected
from frazil.engine.cached_write import CachedWrite
from frazil.engine.dead_sender import DeadLetterSender
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.outcomes import Bad, Written, Wrote
from frazil.engine.routed_commit import RoutedCommitter
from frazil.engine.routed_job import Outcome, RoutedJob
from frazil.engine.table_rows import ObservedMetrics
from frazil.engine.table_write import TableWriter
from frazil.engine.threads import each_outcome
from frazil.engine.window import BatchWindow
from frazil.errors import FrazilError
from frazil.progress import table_markers
from frazil.sink.dead_letters.queue import DeadLetters
from frazil.sink.tables import TableSet

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class BatchWriter:
    """Writes each batch one of three ways and settles what they committed.

    Attributes:
        pipeline: The pipeline.
        live: The live plan.
        tables: Opens and creates the pipeline's tables.
        ledger: The pipeline's tables, the run's commits and counts.
        dead_letters: Where failing records go (``errors.tolerance: all``); None: they stop
            the pipeline.
    """

    pipeline: PipelineConfig
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    dead_letters: DeadLetters | None = None
    _single: TableWriter = field(init=False)
    _routed_job: RoutedJob = field(init=False)
    _routed_commit: RoutedCommitter = field(init=False)
    _cached: CachedWrite = field(init=False)
    #: The dead-letter senders of the one-table way and of the cached way.
    _dead: DeadLetterSender | None = field(init=False, default=None)
    _dead_cached: DeadLetterSender | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        spark = self.tables.spark
        adapter = ColumnAdapter(spark, self.ledger)
        metrics = ObservedMetrics()
        if self.dead_letters is not None:
            self._dead, self._dead_cached = (
                DeadLetterSender(self.dead_letters, spark, self.live, adapter, cached)
                for cached in (False, True)
            )

        def writer() -> TableWriter:
            return TableWriter(
                spark,
                self.pipeline,
                self.live,
                adapter,
                self.ledger,
                metrics,
                dead_letters=self.dead_letters is not None,
            )

        self._single = writer()
        self._routed_job = RoutedJob(
            spark, self.pipeline, self.live, self.tables, self.ledger, adapter
        )
        self._routed_commit = RoutedCommitter(spark, self.pipeline, self.tables, self.ledger)
        self._cached = CachedWrite(
            self.pipeline.name, self.live, self.tables, self.ledger, writer(), metrics
        )

    @property
    def cached(self) -> bool:
        """Whether batches are decoded once into a cache before their tables are written:
        with several tables, and for upsert/CDC with a dead-letter queue, whose failing
        records are found in the cache before the MERGE. One table's MERGE without one takes
        the one pass, as an append does: its source (the batch, collapsed per key) is read
        once and observed as it streams by."""
        return not self.live.plan.single or (
            self.pipeline.defaults.write.merges and self.dead_letters is not None
        )

    def write(self, window: BatchWindow, states: dict[str, table_markers.TableState]) -> Wrote:
        """Steps 4 and 5: the batch written one of three ways (one table; the routed job and
        its commits; the cached way), what each table's commit holds handed back."""
        if not self.cached:
            return self._write_single(window, states)
        job = self._routed_job.write(window, states)
        if isinstance(job, Outcome):
            done = self._routed_commit.commit(window, job, states)
            if isinstance(done, Wrote):
                return done
            if done.wrote is not None:
                # Tables it created before it found it could not go on: they join the
                # pipeline's, and the cached way finds the batch in them.
                self.record(window, done.wrote)
                states = self.ledger.states()
        return self._write_cached(window, states)

    def _write_single(
        self, window: BatchWindow, states: dict[str, table_markers.TableState]
    ) -> Wrote:
        """One table: decode, check and append in a single Spark job, observed as it runs.

        With a dead-letter queue, records a decoder may learn from (a new schema id, new JSON
        fields) still stop the first attempt, so that the table evolves rather than their
        records going to the queue; once nothing more can be learned, they go there too.
        """
        name, target = next(iter(self.ledger.targets.items()))
        attempt, learn = 0, True
        while True:
            frame = self.live.plan.run(window.batch)
            written = self._single.write(window, frame, target, states[name], None, learn=learn)
            if isinstance(written, Written):
                return Wrote({name: written})
            if not self._learned(window, written, attempt):
                if not learn:
                    raise self._rejected(written.rows, window)
                learn = False  # nothing more to learn: the records go to the queue
            attempt += 1

    def _write_cached(
        self, window: BatchWindow, states: dict[str, table_markers.TableState]
    ) -> Wrote:
        """The cached way, planned again as long as the decoders learn from the batch."""
        attempt = 0
        while True:
            batch = self._cached.decode(window)
            try:
                if batch.bad is not None and self._learned(window, batch.bad, attempt):
                    batch.release()
                    attempt += 1
                    continue
                if batch.bad is not None:
                    # Records failing before routing, before any table commits: a crash
                    # afterwards replays the batch, and the dead-letter table's marker keeps
                    # its records once.
                    assert self._dead_cached is not None
                    self._dead_cached.send_unrouted(window, batch.frame, self.pipeline.table)
            except BaseException:
                batch.release()
                raise
            return self._cached.write(window, batch, states)

    def _learned(self, window: BatchWindow, bad: Bad, attempt: int) -> bool:
        """Step 5: whether a decoder learned from the batch's marked records (nothing was
        committed: the batch is planned and written again). Otherwise, with a dead-letter
        queue, they go there; without one, the pipeline stops, naming the first ones.

        Raises:
            PipelineError: Nothing was learned and there is no dead-letter queue.
        """
        if bad.may_learn and self.live.learn(window.batch, window.batch_id, attempt):
            return True
        if self.dead_letters is None:
            raise self._rejected(bad.rows, window)
        return False

    def _rejected(self, rows: DataFrame, window: BatchWindow) -> FrazilError:
        """The error that stops the batch, naming its first marked records."""
        return rejected(
            rows,
            self.pipeline.name,
            self.pipeline.value.format,
            window.batch_id,
            no_dlq=self.dead_letters is None,
        )

    def record(self, window: BatchWindow, wrote: Wrote) -> None:
        """Step 6: each table's failing records to the dead-letter queue once it committed
        (the tables' at once), then each commit kept for the table's next marker and
        reported; then a table's write that failed stops the batch.

        Raises:
            Exception: A table's write failed (a marked record: the rejection naming it), or
                its dead letters could not be sent (its commit is not recorded).
        """
        failure: BaseException | None = None
        rejection: FrazilError | None = None
        try:
            filtered = wrote.filtered + sum(w.filtered for w in wrote.tables.values())
            self.ledger.count(unmatched=wrote.unmatched, filtered=filtered)
            failing = [(n, w) for n, w in wrote.tables.items() if w.failing is not None]
            sender = self._dead_cached if self.cached else self._dead

            def send(item: tuple[str, Written]) -> None:
                assert sender is not None and item[1].failing is not None
                sender.send(window, item[1].target, item[1].failing)

            errors = {
                name: error
                for (name, _), error in zip(failing, _failures(failing, send), strict=True)
                if error is not None
            }
            for name, written in wrote.tables.items():
                if written.marker is not None and name not in errors:
                    self.ledger.committed(window, name, written)
            failure = wrote.failure or next(iter(errors.values()), None)
            if isinstance(failure, BadRecords):
                # Named from the batch's rows while they are kept (a local checkpoint let go
                # cannot be read again).
                rejection = self._rejected(failure.rows, window)
        finally:
            wrote.release()
        if rejection is not None:
            raise rejection from None
        if failure is not None:
            raise failure


def _failures(
    items: list[tuple[str, Written]], call: Callable[[tuple[str, Written]], None]
) -> list[BaseException | None]:
    """Each item's failure of ``call``, or None: the items at once (:func:`each_outcome`),
    but one inline (one table's dead letters go from the handler's thread, as its write)."""
    if len(items) != 1:
        return [error for _, error in each_outcome(items, call)]
    try:
        call(items[0])
    except Exception as exc:
        return [exc]
    return [None]
