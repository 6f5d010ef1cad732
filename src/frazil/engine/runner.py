"""Running a config's pipelines as one Spark application."""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.batch import BatchHandler, StopRequested
from frazil.engine.checkpoint import Checkpoint
from frazil.engine.deadletters import DeadLetters
from frazil.engine.live_plan import LivePlan
from frazil.engine.observers import Observers
from frazil.engine.pipeline import build_pipeline
from frazil.engine.report import PipelineReport, combine_reports, table_report
from frazil.engine.threads import each
from frazil.errors import (
    ConfigError,
    FrazilError,
    KafkaError,
    PipelineError,
    TopicRecreated,
    first_line,
)
from frazil.progress import fence, markers
from frazil.progress.events import CommitEvent, Event
from frazil.progress.start import (
    decide_start,
    parse_reset,
    reset_marker,
    resolve_reset,
    resume_offsets,
)
from frazil.route.patterns import check_java_patterns
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.kafka import (
    TopicOffsets,
    admin_config,
    list_partitions,
    read_stream,
    source_options,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from frazil.maintenance.passes import MaintenanceThread

log = logging.getLogger(__name__)


def select_pipelines(config: FrazilConfig, names: list[str] | None) -> list[PipelineConfig]:
    """The pipelines to run: all of them, or those named (in config order).

    Raises:
        ConfigError: A name matches no pipeline.
    """
    if not names:
        return list(config.pipelines)
    known = [p.name for p in config.pipelines]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"--pipeline {', '.join(unknown)}: no such pipeline (defined: {', '.join(known)})"
        )
    return [p for p in config.pipelines if p.name in names]


def check_topics(config: FrazilConfig, pipeline: PipelineConfig) -> None:
    """Fail fast, before Spark starts, if Kafka is unreachable or listed topics are missing.

    Spark's Kafka source would otherwise wait silently for a topic that does not exist. When
    ``kafka.properties`` hold settings only Java clients understand (a JAAS config), the check
    cannot authenticate as Spark will, so a failure to connect is only a warning then.

    Raises:
        KafkaError: Kafka does not answer at ``kafka.bootstrap_servers``.
        PipelineError: A topic in ``pipelines[i].topics`` does not exist.
    """
    try:
        found = list_partitions(config, pipeline)
    except KafkaError as exc:
        if not admin_config(config)[1]:
            raise
        log.warning("%s: topics not checked before start: %s", pipeline.name, exc)
        return
    if pipeline.topics is None:
        if not found:
            log.warning(
                "%s: no topic matches /%s/ yet; waiting for one to appear",
                pipeline.name,
                pipeline.topic_pattern,
            )
        return
    missing = [t for t in pipeline.topics if t not in found]
    if missing:
        index = config.pipelines.index(pipeline)
        raise PipelineError(
            f"pipelines[{index}].topics: topic(s) {', '.join(missing)} do not exist at "
            f"{config.kafka.bootstrap_servers} (create them, e.g. `frazil generate`, or fix "
            "the name)"
        )


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

    def __post_init__(self) -> None:
        pipeline = self.pipeline
        built = build_pipeline(self.spark, self.config, pipeline)
        check_java_patterns(self.spark, pipeline)
        names = built.route.names()
        dead = pipeline.errors.dlq_table
        if dead is not None and names is not None and names.fullmatch(dead):
            raise ConfigError(
                f"pipeline {pipeline.name!r}: errors.dlq_table {dead!r} is a name the route "
                "can produce for the records' tables; give the dead-letter queue a table "
                "the route cannot name"
            )
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
            report = dataclasses.replace(
                report,
                dead_letters={
                    f"{stage}: {reason}": n
                    for (stage, reason), n in sorted(handler.dead_letters.counts.items())
                },
            )
        return report

    def reset(self, spec_text: str) -> TopicOffsets:
        """Record ``--reset-offsets`` durably in every table, and return where to start."""
        spec = parse_reset(spec_text)
        current, self.topic_ids = self.admin.describe(self.pipeline)
        offsets = resolve_reset(
            spec,
            current,
            self.admin.offsets(current, "earliest"),
            self.admin.offsets(current, "latest"),
        )
        marker = reset_marker(self.pipeline.name, spec_text, offsets, self.topic_ids)
        # Every table the route can name, not only those the run knows by their markers: a
        # table whose marker expired is what the refusal sends users here for.
        targets = self.handler.targets
        for name, found in self.handler.tables.nameable().items():
            targets.setdefault(name, found)
        for target in targets.values():
            target.table.commit_summary_only(marker.to_summary())
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
            log.warning("%s: %s", self.pipeline.name, start.reason)
            return resume_offsets(self._resume_marker(states), partitions)
        return None

    def start(self, starting: TopicOffsets | None) -> None:
        """Start the streaming query (raw Kafka rows into the handler)."""
        options = source_options(
            self.config, self.pipeline, starting, self.spark.sparkContext.defaultParallelism
        )
        raw = read_stream(self.spark, options)
        stream = (
            raw.writeStream.foreachBatch(self.handler)
            .queryName(self.pipeline.name)
            .option("checkpointLocation", self.config.checkpoint_for(self.pipeline))
        )
        if self.until_caught_up:
            stream = stream.trigger(availableNow=True)
        else:
            millis = int(self.pipeline.trigger_seconds() * 1000)
            stream = stream.trigger(processingTime=f"{millis} milliseconds")
        self.handler.new_query(self.topic_ids)
        self.query = stream.start()
        self.handler.set_query_id(str(self.query.id))

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


@dataclass
class RestartBudget:
    """Restarts from the tables allowed in a window of time: a cause that comes back at
    every start (a topic deleted and created again over and over, one that stays away) stops
    the run with that cause instead of restarting forever.

    Attributes:
        limit: Restarts allowed within ``window_s``.
        window_s: The window, in seconds.
        clock: ``time.monotonic`` (tests give their own).
    """

    limit: int = 5
    window_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    _times: list[float] = field(default_factory=list)

    def spend(self, pipeline: str, why: str, hint: str) -> None:
        """Count one restart.

        Raises:
            PipelineError: ``limit`` restarts were made within ``window_s`` already.
        """
        now = self.clock()
        self._times = [t for t in self._times if now - t < self.window_s]
        if len(self._times) >= self.limit:
            raise PipelineError(
                f"pipeline {pipeline!r}: restarted from its tables {len(self._times)} times "
                f"within {self.window_s:g} s and the cause is back: {why}. Stopped instead of "
                f"restarting again; {hint}"
            )
        self._times.append(now)


class _Signals:
    """SIGINT/SIGTERM request a graceful stop instead of killing the driver."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: give up waiting
        self.stop.set()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def run(
    config: FrazilConfig,
    *,
    pipeline_names: list[str] | None = None,
    until_caught_up: bool = False,
    reset_offsets: str | None = None,
    on_commit: Callable[[CommitEvent], None] | None = None,
    on_event: Callable[[Event], None] | None = None,
    on_started: Callable[[list[str]], None] | None = None,
    spark: SparkSession | None = None,
    stop_event: threading.Event | None = None,
    metrics_port: int | None = None,
) -> list[PipelineReport]:
    """Run pipelines until caught up, or until SIGINT/SIGTERM (or ``stop_event``).

    A stop request lets the micro-batch in flight finish and commit, then stops each query.

    Args:
        reset_offsets: ``earliest``, ``latest`` or a JSON offsets map: where the selected
            pipelines continue, recorded durably in their tables (see docs/exactly-once.md).
        metrics_port: Serve Prometheus metrics on this port (overrides ``metrics.port``).

    Returns:
        One report per pipeline, read back from its table.

    Raises:
        FrazilError: A pipeline failed; the first failure is raised.
    """
    selected = select_pipelines(config, pipeline_names)
    if reset_offsets is not None:
        parse_reset(reset_offsets)  # a bad argument fails before Spark starts
    for pipeline in selected:
        check_topics(config, pipeline)

    def dispatch(event: Event) -> None:
        if on_event is not None:
            on_event(event)
        if on_commit is not None and isinstance(event, CommitEvent):
            on_commit(event)

    with fence.hold(config.state_dir, [p.name for p in selected]) as run_fence:
        if spark is None:
            from frazil.engine.session import build_spark

            spark = build_spark(config, run_token=run_fence.token)
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        run_fence.record_jvm(int(jvm.java.lang.ProcessHandle.current().pid()))
        admin = JvmKafkaAdmin(spark, config)
        runs: list[PipelineRun] = []
        observers = Observers.start(config, metrics_port)
        observers.runs = runs
        observed = observers.wrap(dispatch)
        try:
            with _Signals() as signals:
                stop = stop_event or signals.stop
                try:
                    for pipeline in selected:
                        pipeline_run = PipelineRun(
                            spark, config, pipeline, admin, until_caught_up, observed
                        )
                        pipeline_run.handler.stops = (stop, signals.stop)
                        runs.append(pipeline_run)
                        pipeline_run.start(pipeline_run.prepare(reset_offsets))
                    if on_started:
                        on_started([r.pipeline.name for r in runs])
                    upkeep = _inline_maintenance(spark, config, selected, until_caught_up)
                    try:
                        _wait(runs, stop, signals.stop)
                    finally:
                        if upkeep is not None:
                            upkeep.stop.set()
                            upkeep.join(timeout=600)
                finally:
                    _stop_all(runs)
            _raise_first_failure(runs)
            for r in runs:
                r.handler.finish()
            return [r.report() for r in runs]
        finally:
            observers.stop()
            admin.close()


def _inline_maintenance(
    spark: SparkSession, config: FrazilConfig, selected: list[PipelineConfig], once: bool
) -> MaintenanceThread | None:
    """``maintenance: {mode: inline}``: passes over the run's own tables on a thread of their
    own while the run goes on (not for a run that stops once caught up)."""
    if config.maintenance.mode != "inline" or once:
        return None
    from frazil.maintenance.passes import MaintenanceThread

    thread = MaintenanceThread(spark, config, selected, threading.Event())
    thread.start()
    log.info(
        "inline maintenance: a pass every %s, within %s",
        config.maintenance.interval,
        config.maintenance.budget,
    )
    return thread


def _failed(r: PipelineRun) -> bool:
    if r.handler.error is not None:
        return True
    return r.query is not None and not r.query.isActive and r.query.exception() is not None


def _wait(runs: list[PipelineRun], *stops: threading.Event) -> None:
    while True:
        if any(s.is_set() for s in stops):
            return
        for r in runs:
            if _failed(r):
                # Topics come and go (rotated topics under a pattern aged out by retention, a
                # topic deleted and created again): Spark's source stops, or the batch does
                # when a topic has another id. Start again from the tables, which name the
                # topics Kafka has now (a topic created again from its start); a cause that
                # comes back at every start stops the run (RestartBudget).
                why = r.restart_cause()
                if why:
                    r.restart_from_table(why)
        if any(_failed(r) for r in runs):
            return
        active = [r for r in runs if r.query is not None and r.query.isActive]
        if not active:
            return
        try:
            query = active[0].query
            assert query is not None
            query.awaitTermination(1)
        except Exception:  # the query failed: the loop above decides what to do
            continue


def _stop_all(runs: list[PipelineRun]) -> None:
    """Let each in-flight batch finish, then stop the queries."""
    for r in runs:
        r.handler.closing = True
    for r in runs:
        r.handler.wait_idle()
        if r.query is not None and r.query.isActive:
            r.query.stop()


def _raise_first_failure(runs: list[PipelineRun]) -> None:
    for r in runs:
        if r.handler.error is not None and not isinstance(r.handler.error, StopRequested):
            raise r.handler.error
    for r in runs:
        exc = r.query.exception() if r.query is not None else None
        if exc is None:
            continue
        text = str(exc)
        if "StopRequested" in text:
            continue
        log.info("pipeline %s failed:\n%s", r.pipeline.name, text)
        first = text.strip().splitlines()[0] if text.strip() else repr(exc)
        raise PipelineError(f"pipeline {r.pipeline.name!r} failed: {first}")


__all__ = ["FrazilError", "run", "select_pipelines"]
