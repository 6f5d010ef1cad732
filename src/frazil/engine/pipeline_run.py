"""One pipeline inside the application: its tables, checkpoint, handler and query, where it
starts (the tables against the checkpoint, ``--reset-offsets``) and why it starts again."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.batch import BatchHandler
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.deadletters import DeadLetters
from frazil.engine.live_plan import LivePlan
from frazil.engine.pipeline import build_pipeline
from frazil.engine.report import PipelineReport, combine_reports, table_report
from frazil.engine.restarts import RestartBudget
from frazil.engine.threads import each
from frazil.errors import KafkaError, TopicRecreated, first_line
from frazil.maintenance.expiry import RETIRES, to_retire
from frazil.progress import markers
from frazil.progress.events import Event
from frazil.progress.start import (
    TableReset,
    decide_start,
    parse_reset,
    reset_marker,
    resolve_reset,
    resume_offsets,
)
from frazil.route.patterns import check_java_patterns
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.kafka import TopicOffsets, read_stream, records_between, source_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

# The runner's logger: these lines were the runner's before it was split, and operators' log
# filters (and the tests) know them by that name.
log = logging.getLogger("frazil.engine.runner")

#: The trigger interval of the short first query of an early first commit: its first batch
#: runs at once, then it idles until :meth:`PipelineRun.hand_over` replaces it.
WARM_UP_TRIGGER = "1 hour"
#: Seconds the short first query may sit without a batch before it is replaced anyway (its
#: first trigger found nothing to read: records removed by retention since the count).
WARM_UP_IDLE_S = 30.0


@dataclass
class PipelineRun:
    """One pipeline inside the application: its tables, checkpoint, handler and query."""

    spark: SparkSession
    config: FrazilConfig
    pipeline: PipelineConfig
    admin: JvmKafkaAdmin
    until_caught_up: bool
    on_event: Callable[[Event], None] | None
    handler: BatchHandler = field(init=False)
    query: StreamingQuery | None = None
    start_reason: str = ""
    resumed_from_table: bool = False
    restarts: int = 0
    #: Kafka's topic ids the next query's starting offsets are decided on.
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: Restarts from the tables, bounded (a cause that comes back stops the run).
    budget: RestartBudget = field(default_factory=lambda: RestartBudget())
    #: The reset :meth:`reset_preview` showed and the offsets it resolved.
    _previewed: tuple[str, TopicOffsets] | None = field(default=None, init=False)
    #: Whether :attr:`query` is the short first query of an early first commit.
    warming: bool = False
    _started: bool = field(default=False, init=False)
    _starting: TopicOffsets | None = field(default=None, init=False)
    _warm_since: float = field(default=0.0, init=False)

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
        self.handler = BatchHandler.build(
            pipeline,
            LivePlan(pipeline.name, built.plan, replan=lambda: built.replan(self.spark)),
            tables,
            Checkpoint(self.spark, self.config.checkpoint_for(pipeline)),
            # Only a rate-limited read can leave partitions behind their end offset.
            admin=self.admin if pipeline.max_offsets_per_trigger else None,
            on_event=self.on_event,
            dead_letters=DeadLetters.open(self.spark, self.config, pipeline),
            topics=self.admin,
        )

    def _states(self) -> list[markers.TableState]:
        return [
            markers.find_marker(t.table, self.pipeline.name) for t in self.handler.targets.values()
        ]

    def _recreated(self, states: list[markers.TableState]) -> list[tuple[str, str, str]]:
        """Topics the tables' markers recorded under another id than Kafka's now (deleted and
        created again), each said at WARNING once."""
        found = sorted(
            {r for s in states for r in markers.recreated_topics(s.marker, self.topic_ids)}
        )
        for topic, old, new in found:
            log.warning(
                "%s: topic %s was deleted and created again (topic id %s, now %s): it is read "
                "from its start; the tables' offsets of the old topic no longer apply",
                self.pipeline.name,
                topic,
                old,
                new,
            )
        return found

    def _state(self, states: list[markers.TableState]) -> markers.TableState:
        """The tables' state for deciding where to start: one table's own; for several, where
        every table is complete (a checkpoint beyond it is ahead of some table — one rolled
        back, say — whose records would never come back: the run starts from the tables)."""
        if len(states) == 1:
            return states[0]
        for target, state in zip(self.handler.targets.values(), states, strict=True):
            if state.marker is None and state.total_records > 0:
                # The same refusal as for one table (decide_start), naming this table.
                decide_start(self.pipeline.name, target.name, state, None, False)
        return markers.TableState(
            markers.merge_markers([s.marker for s in states], lowest=True),
            None,
            sum(s.total_records for s in states),
        )

    def _resume_marker(self, states: list[markers.TableState]) -> markers.Marker | None:
        """Where a restart from the tables starts: where every table is complete."""
        return markers.merge_markers([s.marker for s in states], lowest=True)

    def _current_states(
        self,
    ) -> tuple[dict[str, list[int]], list[str], list[markers.TableState]]:
        """Kafka's partitions and topic ids now (kept in :attr:`topic_ids`), the topics
        created again since the tables' markers (said at WARNING), and the tables' states as
        they stand for Kafka's topics now (the old offsets of those topics left out)."""
        partitions, self.topic_ids = self.admin.describe(self.pipeline)
        states = self._states()
        recreated = [t for t, _, _ in self._recreated(states)]
        return partitions, recreated, [markers.current_state(s, self.topic_ids) for s in states]

    def report(self) -> PipelineReport:
        """The run's report, read back from the pipeline's table(s)."""
        handler = self.handler

        def part(t: Target) -> PipelineReport:
            return table_report(
                self.spark,
                t.qualified,
                self.pipeline,
                handler.stats,
                self.resumed_from_table,
                start_reason=self.start_reason,
                marker=t.last,
                name=t.name,
                handle=t.table,
            )

        parts = each(list(handler.targets.values()), part)
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

    def _reset_offsets(self, spec_text: str) -> TopicOffsets:
        """Where ``--reset-offsets`` makes the pipeline continue, per partition Kafka has now."""
        spec = parse_reset(spec_text)
        current, self.topic_ids = self.admin.describe(self.pipeline)
        return resolve_reset(
            spec,
            current,
            self.admin.offsets(current, "earliest"),
            self.admin.offsets(current, "latest"),
        )

    def _reset_targets(self) -> dict[str, Target]:
        # Every table the route can name, not only those the run knows by their markers: a
        # table whose marker expired is what the refusal sends users here for.
        targets = self.handler.targets
        for name, found in self.handler.tables.nameable().items():
            targets.setdefault(name, found)
        return targets

    def reset_preview(self, spec_text: str) -> list[TableReset]:
        """What ``--reset-offsets`` would do to each table, changing nothing: the rows and
        the pipeline's marker there, and where the reset makes it continue. The offsets are
        kept for :meth:`reset`, so what was confirmed is what is recorded."""
        offsets = self._reset_offsets(spec_text)
        self._previewed = (spec_text, offsets)
        found = []
        for target in self._reset_targets().values():
            state = markers.find_marker(target.table, self.pipeline.name)
            found.append(
                TableReset(
                    target.name,
                    self.pipeline.name,
                    spec_text,
                    state.total_records,
                    state.marker,
                    offsets,
                    merges=target.settings.write.merges,
                )
            )
        return found

    def reset(self, spec_text: str) -> TopicOffsets:
        """Record ``--reset-offsets`` durably in every table, and return where to start (the
        offsets :meth:`reset_preview` showed, if it was asked)."""
        previewed = self._previewed
        if previewed is not None and previewed[0] == spec_text:
            offsets = previewed[1]
        else:
            offsets = self._reset_offsets(spec_text)
        marker = reset_marker(self.pipeline.name, spec_text, offsets, self.topic_ids)
        targets = self._reset_targets()
        names = [p.name for p in self.config.pipelines]
        for target in targets.values():
            summary = marker.to_summary()
            # Markers of pipelines not in this config (the pipeline's former name, one
            # removed) stop pinning expiry from here on.
            retired = to_retire(self.spark, target.qualified, names)
            if retired:
                summary[RETIRES] = json.dumps(retired)
                log.info("%s: %s: retiring markers %s", self.pipeline.name, target.name, retired)
            target.table.commit_summary_only(summary)
        self.handler.checkpoint.set_aside()
        log.warning("%s: offsets reset to %s (%s)", self.pipeline.name, spec_text, offsets)
        return offsets

    def prepare(self, reset_offsets: str | None) -> TopicOffsets | None:
        """Reconcile checkpoint and table; the exact starting offsets, or None for the config's."""
        if reset_offsets is not None:
            self.start_reason = f"offsets reset to {reset_offsets}"
            return self.reset(reset_offsets)
        partitions, recreated, states = self._current_states()
        state = self._state(states)
        checkpoint = self.handler.checkpoint
        committed = checkpoint.committed_offsets()
        start = decide_start(
            self.pipeline.name,
            self.pipeline.describe_target(),
            state,
            committed[1] if committed else None,
            checkpoint.has_progress(),
            recreated,
        )
        self.start_reason = start.reason
        if start.set_aside:
            moved = checkpoint.set_aside()
            log.warning(
                "%s: %s; old checkpoint moved to %s", self.pipeline.name, start.reason, moved
            )
        if start.from_table:
            self.resumed_from_table = True
            # INFO: a start from the table is how frazil recovers; what calls for a look (a
            # checkpoint set aside, a topic created again) was said at WARNING above.
            log.info("%s: %s", self.pipeline.name, start.reason)
            return resume_offsets(self._resume_marker(states), partitions)
        return None

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
            first = self._first_batch(starting)
        self.handler.new_query(self.topic_ids)
        self._starting = starting
        self._start_query(starting, first)

    def _start_query(self, starting: TopicOffsets | None, first: int | None) -> None:
        """Start a query on the pipeline's checkpoint; ``first``: the short first query's cap."""
        limited = first is not None or self.pipeline.max_offsets_per_trigger is not None
        # A rate-limited batch can leave partitions behind their end offset; Kafka's latest
        # offsets tell which (the cursor asks only then).
        self.handler.cursor.admin = self.admin if limited else None
        options = source_options(
            self.config,
            self.pipeline,
            starting,
            self.spark.sparkContext.defaultParallelism,
            max_offsets=first,
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
        self.warming = first is not None
        self._warm_since = time.monotonic()
        self.handler.set_query_id(str(self.query.id))

    def _first_batch(self, starting: TopicOffsets | None) -> int | None:
        """The first batch's cap of an early first commit, or None for none: off, no smaller
        than ``max_offsets_per_trigger``, or no more to read than the cap."""
        cap = self.pipeline.first_batch_max_offsets
        limit = self.pipeline.max_offsets_per_trigger
        if not cap or (limit is not None and limit <= cap):
            return None
        backlog = self._backlog(starting)
        if backlog is None or backlog <= cap:
            return None
        log.info(
            "%s: %d records to read; the first batch takes %d of them, to commit early",
            self.pipeline.name,
            backlog,
            cap,
        )
        return cap

    def _backlog(self, starting: TopicOffsets | None) -> int | None:
        """Records between where the query starts and Kafka's latest offsets; None when the
        first batch is not the query's to size (one planned and not committed runs again
        with its planned range) or the query starts at the latest offsets."""
        checkpoint = self.handler.checkpoint
        start: TopicOffsets
        if checkpoint.has_progress():
            committed = checkpoint.committed_offsets()
            if committed is None or committed[0] != checkpoint.last_planned():
                return None
            start = committed[1]
        elif starting:
            start = starting
        elif self.pipeline.starting_offsets == "latest":
            return None
        else:
            start = {}
        partitions = self.admin.partitions(self.pipeline)
        earliest = self.admin.offsets(partitions, "earliest")
        return records_between(start, earliest, self.admin.offsets(partitions, "latest"))

    def hand_over(self) -> bool:
        """Replace the short first query by the pipeline's own once its batch is committed.

        Spark posts a query's progress after the batch's commit log entry, so the first
        progress says the batch is done; the query then idles (its next trigger is an hour
        away) and stops at once. A first trigger that found nothing to read is replaced
        after :data:`WARM_UP_IDLE_S`.

        Returns:
            Whether the query was replaced.
        """
        query = self.query
        if not self.warming or query is None:
            return False
        if not query.isActive:
            self.warming = False  # it failed: the runner's restart or report takes over
            return False
        if query.lastProgress is None:
            idle = not query.status["isTriggerActive"]
            if not idle or time.monotonic() - self._warm_since < WARM_UP_IDLE_S:
                return False
        query.stop()
        self.warming = False
        self._start_query(self._starting, None)
        log.info("%s: first batch committed; batches now take their full size", self.pipeline.name)
        return True

    def restart_cause(self) -> str | None:
        """Why the failed query should start again from the tables, or None (a failure to
        report): a table rolled back while it ran, topics it read were deleted (rotated topics
        under a pattern aged out, Spark's source stops when a partition disappears) or deleted
        and created again."""
        if self.handler.restart is not None:
            # A table rolled back while the query ran: its records after the rollback point
            # come back only from a query started at the tables' markers.
            why, self.handler.restart = self.handler.restart, None
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
        known = self.handler.cursor.query_ids
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
        partitions, _, states = self._current_states()
        self.start(resume_offsets(self._resume_marker(states), partitions))

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
