"""One pipeline inside the application: its tables, checkpoint, handler and query, started
where :class:`~frazil.engine.start_point.StartPoint` decides, the first batch sized by
:class:`~frazil.engine.warm_up.WarmUp`, and started again when a cause calls for it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from frazil.config.loader import load_config
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.batch import BatchHandler
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.live_plan import LivePlan
from frazil.engine.pipeline import build_pipeline
from frazil.engine.plan import BatchPlan
from frazil.engine.promotion import ConfigWatch
from frazil.engine.report import PipelineReport, combine_reports, table_report
from frazil.engine.restarts import RestartBudget
from frazil.engine.start_point import StartPoint
from frazil.engine.warm_up import WARM_UP_TRIGGER, WarmUp
from frazil.errors import FrazilError, KafkaError, TopicRecreated, first_line
from frazil.progress.events import Event
from frazil.progress.start import TableReset
from frazil.route.patterns import check_java_patterns
from frazil.sink.dead_letters.queue import DeadLetters
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.kafka import read_stream
from frazil.source.offsets import TopicOffsets
from frazil.source.options import source_options
from frazil.transform.check import config_problems

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

# The runner's logger: these lines were the runner's before it was split, and operators' log
# filters (and the tests) know them by that name.
log = logging.getLogger("frazil.engine.runner")


@dataclass
class PipelineRun:
    """One pipeline inside the application: its tables, checkpoint, handler and query."""

    spark: SparkSession
    config: FrazilConfig
    pipeline: PipelineConfig
    admin: JvmKafkaAdmin
    until_caught_up: bool
    on_event: Callable[[Event], None] | None
    #: The config file, followed for promoted columns between batches; None: not followed.
    config_path: Path | None = None
    handler: BatchHandler = field(init=False)
    query: StreamingQuery | None = None
    restarts: int = 0
    #: Restarts from the tables, bounded (a cause that comes back stops the run).
    budget: RestartBudget = field(default_factory=lambda: RestartBudget())
    start_point: StartPoint = field(init=False)
    warm_up: WarmUp = field(init=False)
    _started: bool = field(default=False, init=False)
    _starting: TopicOffsets | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        pipeline = self.pipeline
        built = build_pipeline(self.spark, self.config, pipeline)
        check_java_patterns(self.spark, pipeline)
        # errors.dlq_table against the route's template: the config refuses it (validate too).
        tables = TableSet(
            self.spark, self.config.catalog.name, pipeline, built.route, self.config.catalog.type
        )
        if pipeline.table is not None:
            # One table: created with the whole schema before the first batch. A routed
            # pipeline creates each table when records for it first arrive.
            tables.create(pipeline.table, built.shape.table_schema)
        checkpoint = Checkpoint(self.spark, self.config.checkpoint_for(pipeline))
        self.handler = BatchHandler.build(
            pipeline,
            LivePlan(
                pipeline.name,
                built.plan,
                replan=lambda: built.replan(self.spark),
                follow=self._follower(),
            ),
            tables,
            checkpoint,
            # Only a rate-limited read can leave partitions behind their end offset.
            admin=self.admin if pipeline.max_offsets_per_trigger else None,
            on_event=self.on_event,
            dead_letters=DeadLetters.open(self.spark, self.config, pipeline),
            topics=self.admin,
        )
        self.start_point = StartPoint(
            self.spark,
            self.config,
            pipeline,
            self.admin,
            self.handler.targets,
            tables,
            checkpoint,
        )
        self.warm_up = WarmUp(pipeline, self.admin, checkpoint)

    def _follower(self) -> Callable[[], tuple[BatchPlan, Callable[[], BatchPlan]] | None] | None:
        """The live plan's follower of :attr:`config_path`: the pipeline built again from the
        file when it promoted columns."""
        if self.config_path is None:
            return None
        watch = ConfigWatch(
            self.config_path,
            self.pipeline,
            lambda path: load_config(path, checks=config_problems),
        )

        def follow() -> tuple[BatchPlan, Callable[[], BatchPlan]] | None:
            promotion = watch.poll()
            if promotion is None:
                return None
            try:
                built = build_pipeline(self.spark, promotion.config, promotion.pipeline)
            except FrazilError as exc:
                log.warning(
                    "%s: the columns %s promoted do not build (%s); the run goes on without them",
                    self.pipeline.name,
                    ", ".join(promotion.columns),
                    first_line(exc),
                )
                return None
            watch.accept(promotion)
            # As a table's evolution is: a change operators should see in the run's output.
            log.warning(
                "%s: promoted to columns from %s: %s (new records fill them)",
                self.pipeline.name,
                self.config_path,
                ", ".join(promotion.columns),
            )
            return built.plan, lambda: built.replan(self.spark)

        return follow

    @property
    def start_reason(self) -> str:
        """Why the run starts where it does."""
        return self.start_point.reason

    @property
    def warming(self) -> bool:
        """Whether :attr:`query` is the short first query of an early first commit."""
        return self.warm_up.active

    def report(self) -> PipelineReport:
        """The run's report, read back from the pipeline's table(s)."""
        handler = self.handler

        targets = list(handler.targets.values())
        # All tables read in one round trip (a routed run's 1,000 tables: some ten each).
        facts = handler.ledger.handles().report_facts(self.pipeline.name) if targets else []
        by_target = {id(t): f for t, f in zip(targets, facts, strict=True)}

        def part(t: Target) -> PipelineReport:
            return table_report(
                self.spark,
                t.qualified,
                self.pipeline,
                handler.stats,
                self.start_point.resumed_from_table,
                start_reason=self.start_reason,
                marker=t.last,
                name=t.name,
                handle=t.table,
                facts=by_target[id(t)],
            )

        parts = [part(t) for t in targets]
        if self.pipeline.table is not None and len(parts) == 1:
            report = parts[0]
        else:
            report = combine_reports(self.pipeline, handler.stats, parts, self.start_reason)
        if handler.dead_letters is not None:
            counts = handler.dead_letters.counts
            report = dataclasses.replace(
                report,
                dead_letters={
                    f"{stage}: {reason}": n for (stage, reason), n in sorted(counts.items())
                },
                dead_lettered=sum(counts.values()),
            )
        return report

    def reset_preview(self, spec_text: str) -> list[TableReset]:
        """What ``--reset-offsets`` would do to each table, changing nothing
        (:meth:`StartPoint.reset_preview`)."""
        return self.start_point.reset_preview(spec_text)

    def prepare(self, reset_offsets: str | None) -> TopicOffsets | None:
        """Reconcile checkpoint and table; the exact starting offsets, or None for the config's."""
        return self.start_point.prepare(reset_offsets)

    def start(self, starting: TopicOffsets | None) -> None:
        """Start the streaming query (raw Kafka rows into the handler).

        An early first commit: the run's first start, with more records to catch up on than
        ``first_batch_max_offsets``, starts a query whose one batch reads that many (Spark's
        Kafka source reads ``maxOffsetsPerTrigger`` once per query), so a cold JVM commits
        within seconds; once that batch is committed, :meth:`hand_over` starts the
        pipeline's own query on the same checkpoint, whose batches take
        ``max_offsets_per_trigger`` (or everything). The batch is committed like any other
        (its offsets in the tables' snapshot and in Spark's commit log), so exactly-once is
        the same as across any restart.
        """
        first = None
        if not self._started:
            self._started = True
            first = self.warm_up.first_batch(starting)
        self.handler.new_query(self.start_point.topic_ids)
        self._starting = starting
        self._start_query(starting, first)

    def _partition_count(self) -> int | None:
        """The Kafka partitions the pipeline reads now (its fetches are sized to them), or
        None if Kafka does not say: Kafka's own fetch size then."""
        try:
            return sum(len(p) for p in self.admin.partitions(self.pipeline).values())
        except KafkaError as exc:
            log.debug("%s: partitions not counted: %s", self.pipeline.name, exc)
            return None

    def _start_query(self, starting: TopicOffsets | None, first: int | None) -> None:
        """Start a query on the pipeline's checkpoint; ``first``: the short first query's cap."""
        limited = first is not None or self.pipeline.max_offsets_per_trigger is not None
        # A rate-limited batch can leave partitions behind their end offset; Kafka's latest
        # offsets tell which.
        self.handler.watch_lagging(self.admin if limited else None)
        options = source_options(
            self.config,
            self.pipeline,
            starting,
            self.spark.sparkContext.defaultParallelism,
            max_offsets=first,
            partitions=self._partition_count(),
        )
        raw = read_stream(self.spark, options)
        stream = (
            raw.writeStream.foreachBatch(self.handler)
            .queryName(self.pipeline.name)
            .option("checkpointLocation", self.config.checkpoint_for(self.pipeline))
        )
        if first is not None:
            stream = stream.trigger(processingTime=WARM_UP_TRIGGER)
        elif self.until_caught_up:
            stream = stream.trigger(availableNow=True)
        else:
            millis = int(self.pipeline.trigger_seconds() * 1000)
            stream = stream.trigger(processingTime=f"{millis} milliseconds")
        self.query = stream.start()
        self.warm_up.started(capped=first is not None)
        self.handler.set_query_id(str(self.query.id))

    def hand_over(self) -> bool:
        """Replace the short first query by the pipeline's own once its batch is committed
        (:meth:`WarmUp.done`); the first query idles (its next trigger is an hour away) and
        stops at once.

        Returns:
            Whether the query was replaced.
        """
        query = self.query
        if not self.warm_up.active or query is None:
            return False
        if not query.isActive:
            self.warm_up.active = False  # it failed: the runner's restart or report takes over
            return False
        if not self.warm_up.done(query):
            return False
        query.stop()
        self.warm_up.active = False
        self._start_query(self._starting, None)
        log.info("%s: first batch committed; batches now take their full size", self.pipeline.name)
        return True

    def restart_cause(self) -> str | None:
        """Why the failed query should start again from the tables, or None (a failure to
        report): a table rolled back while it ran, topics it read were deleted (rotated topics
        under a pattern aged out, Spark's source stops when a partition disappears) or deleted
        and created again."""
        why = self.handler.take_restart()
        if why is not None:
            # A table rolled back while the query ran: its records after the rollback point
            # come back only from a query started at the tables' markers.
            return why
        error = self.handler.error
        if isinstance(error, TopicRecreated):
            return str(error)
        if error is not None:
            return None
        exc = self.query.exception() if self.query is not None else None
        spark = f" (Spark: {first_line(exc)})" if exc is not None else ""
        try:
            _, now = self.admin.describe(self.pipeline)
        except KafkaError as unreachable:  # Spark's failure is the one to report
            log.info(
                "%s: topics not checked after the failure: %s", self.pipeline.name, unreachable
            )
            return None
        known = self.handler.topic_ids_read
        recreated = sorted(
            f"{t} (topic id {old} -> {now[t]})"
            for t, old in known.items()
            if t in now and now[t] != old
        )
        if recreated:
            return f"topic(s) {', '.join(recreated)} were deleted and created again{spark}"
        committed = self.handler.checkpoint.committed_offsets()
        read = set(known) | (set(committed[1]) if committed else set())
        if self.pipeline.topics is not None:
            read |= set(self.pipeline.topics)
        gone = sorted(read - set(now))
        if gone:
            return f"topic(s) {', '.join(gone)} no longer exist{spark}"
        return None

    def restart_from_table(self, why: str) -> None:
        """Set the checkpoint aside and start again from the table's offsets.

        Raises:
            PipelineError: The pipeline restarted too often in a short time (the cause comes
                back at every start): it stops, naming the cause.
        """
        self.budget.spend(self.pipeline.name, why, self._restart_hint())
        self.restarts += 1
        if self.query is not None and self.query.isActive:
            self.query.stop()  # a batch stopped it (a topic created again): let it end first
        moved = self.handler.checkpoint.set_aside()
        log.warning(
            "%s: %s; restarting from the table's offsets (old checkpoint: %s)",
            self.pipeline.name,
            why,
            moved,
        )
        self.start(self.start_point.from_tables())

    def _restart_hint(self) -> str:
        index = next(
            (i for i, p in enumerate(self.config.pipelines) if p.name == self.pipeline.name), 0
        )
        key = "topics" if self.pipeline.topics is not None else "topic_pattern"
        return (
            f"if a topic is gone for good, take it out of pipelines[{index}].{key}; to say "
            "where to continue, run once with --reset-offsets earliest, latest or a JSON map "
            "(docs/exactly-once.md)"
        )
