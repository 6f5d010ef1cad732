"""Running a config's pipelines as one Spark application."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.batch import StopRequested
from frazil.engine.kafka_watch import KafkaWatch, outage_error
from frazil.engine.observers import Observers
from frazil.engine.pipeline_run import PipelineRun
from frazil.engine.report import PipelineReport
from frazil.errors import (
    ConfigError,
    FrazilError,
    KafkaError,
    PipelineError,
    PipelineFailed,
)
from frazil.progress import fence
from frazil.progress.events import CommitEvent, Event, MaintenanceDone
from frazil.progress.start import (
    TableReset,
    parse_reset,
    table_names,
)
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.clients import admin_config, list_partitions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
            f"{config.kafka.bootstrap_servers} (fix the name, or create them in Kafka; "
            "`frazil generate` fills a topic with sample payments)"
        )


def check_registry(config: FrazilConfig, pipelines: list[PipelineConfig]) -> None:
    """Fail fast, before Spark starts, if a pipeline's schemas come from a schema registry
    that does not answer (each request is retried with backoff, so this takes ~15 s at most
    with the default ``schema_registry.retries``).

    Raises:
        RegistryUnavailableError: The registry did not answer after every retry.
    """
    if config.schema_registry is None:
        return
    subjects = [
        part.subject_name(p.topics)
        for p in pipelines
        for part in (p.value, p.key)
        if part is not None and part.source() == "registry"
    ]
    if not subjects:
        return
    from frazil.decode.schema_registry import SchemaRegistry

    # One request tells whether the registry answers; the first subject gives the message
    # the pipeline's own first request would.
    SchemaRegistry(config.schema_registry).check(subjects[0])


class StoppedNow(BaseException):
    """A second Ctrl-C: the run stops at once, without waiting for the batch in flight.

    A ``BaseException`` (as ``KeyboardInterrupt`` is) so that no ``except Exception`` on the
    way up takes it for a failure, and not a ``KeyboardInterrupt``, which Py4J logs with a
    stack trace when it interrupts a call into the JVM. What the batch in flight wrote is not
    committed, so nothing is lost or doubled: the next run reads it again from the tables'
    offsets (docs/exactly-once.md).
    """


#: What the first stop request does, said as soon as it arrives.
STOPPING = "stopping after the batch in flight commits"
#: What a first Ctrl-C adds: how not to wait.
AGAIN = " (Ctrl-C again to stop now)"


class _Signals:
    """SIGINT/SIGTERM request a graceful stop instead of killing the driver; a second SIGINT
    stops at once (:class:`StoppedNow`).

    Args:
        on_stopping: Called with :data:`STOPPING` (and :data:`AGAIN` after a Ctrl-C) when the
            first request arrives, so the user hears at once what the run does while the
            batch in flight finishes.
    """

    def __init__(self, on_stopping: Callable[[str], None] | None = None) -> None:
        self.stop = threading.Event()
        self._previous: dict[int, object] = {}
        self._on_stopping = on_stopping

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stop.is_set():
            if signum == signal.SIGINT:
                raise StoppedNow  # a second Ctrl-C: give up waiting
            return
        self.stop.set()
        if self._on_stopping is not None:
            self._on_stopping(STOPPING + (AGAIN if signum == signal.SIGINT else ""))

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
    on_stopping: Callable[[str], None] | None = None,
    spark: SparkSession | None = None,
    stop_event: threading.Event | None = None,
    metrics_port: int | None = None,
    confirm_reset: Callable[[list[TableReset]], bool] | None = None,
    config_path: Path | None = None,
) -> list[PipelineReport]:
    """Run pipelines until caught up, or until SIGINT/SIGTERM (or ``stop_event``).

    A stop request lets the micro-batch in flight finish and commit, then stops each query.

    Args:
        reset_offsets: ``earliest``, ``latest`` or a JSON offsets map: where the selected
            pipelines continue, recorded durably in their tables (see docs/exactly-once.md).
        metrics_port: Serve Prometheus metrics on this port (overrides ``metrics.port``).
        on_stopping: Told at once, in words, what a first SIGINT/SIGTERM does.
        confirm_reset: Asked before ``reset_offsets`` changes a table that holds data of its
            pipeline (rows and a marker), with what each table holds and what the reset
            does to it; it answers whether to go on, or raises. None: no one is asked.
        config_path: The file ``config`` was loaded from, checked before each batch for
            columns promoted while the pipelines run (:mod:`~frazil.engine.promotion`);
            None: not followed.

    Returns:
        One report per pipeline, read back from its table.

    Raises:
        FrazilError: A pipeline failed; the first failure is raised.
        StoppedNow: A second SIGINT: the run stopped without waiting for the batch in flight.
    """
    selected = select_pipelines(config, pipeline_names)
    if reset_offsets is not None:
        parse_reset(reset_offsets)  # a bad argument fails before Spark starts

    def dispatch(event: Event) -> None:
        if on_event is not None:
            on_event(event)
        if on_commit is not None and isinstance(event, CommitEvent):
            on_commit(event)

    with fence.hold(config.state_dir, [p.name for p in selected]) as run_fence:
        starting = None
        if spark is None:
            from frazil.engine.session import build_spark
            from frazil.engine.spark_start import SparkStart

            token = run_fence.token
            starting = SparkStart(lambda: build_spark(config, run_token=token))
        # While the JVM starts: a missing topic or a registry that does not answer fails in
        # seconds, the JVM going with the process.
        for pipeline in selected:
            check_topics(config, pipeline)
        check_registry(config, selected)
        for warning in config.catalog.warnings():
            log.warning("%s", warning)
        if starting is not None:
            spark = starting.result()
        assert spark is not None
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        run_fence.record_jvm(int(jvm.java.lang.ProcessHandle.current().pid()))
        admin = JvmKafkaAdmin(spark, config)
        runs: list[PipelineRun] = []
        observers = Observers.start(config, metrics_port, admin)
        observers.runs = runs
        observed = observers.wrap(dispatch)
        try:
            with _Signals(on_stopping) as signals:
                stop = stop_event or signals.stop
                try:
                    for pipeline in selected:
                        pipeline_run = PipelineRun(
                            spark, config, pipeline, admin, until_caught_up, observed, config_path
                        )
                        pipeline_run.handler.stops = (stop, signals.stop)
                        runs.append(pipeline_run)
                    if reset_offsets is not None and confirm_reset is not None:
                        # Every pipeline's tables are shown, and the answer given, before
                        # any of them is reset.
                        _confirm_reset(runs, reset_offsets, confirm_reset)
                    for pipeline_run in runs:
                        pipeline_run.start(pipeline_run.prepare(reset_offsets))
                    if on_started:
                        on_started([r.pipeline.name for r in runs])
                    upkeep = _inline_maintenance(spark, config, selected, until_caught_up, observed)
                    try:
                        _wait(runs, stop, signals.stop)
                    finally:
                        if upkeep is not None:
                            upkeep.stop.set()
                            upkeep.join(timeout=600)
                except StoppedNow:
                    # Waiting for the batch in flight is what the user chose not to do; the
                    # queries die with the driver, their uncommitted batch is read again.
                    for r in runs:
                        r.handler.closing = True
                    raise
                except BaseException:
                    _stop_all(runs)
                    raise
                else:
                    _stop_all(runs)
            _raise_first_failure(runs)
            for r in runs:
                r.handler.finish()
            return [r.report() for r in runs]
        finally:
            _close(observers, admin, stopping_now=isinstance(sys.exc_info()[1], StoppedNow))


def _close(observers: Observers, admin: JvmKafkaAdmin, *, stopping_now: bool) -> None:
    """Stop the observers and the JVM's Kafka admin.

    After a second Ctrl-C the call into the JVM that the signal interrupted can leave Py4J's
    connection unusable ("py4j does not exist in the JVM"): what fails then is the closing,
    not the run, and the user asked to stop now — the JVM goes with the process.
    """
    try:
        observers.stop()
        admin.close()
    except Exception as exc:
        if not stopping_now:
            raise
        log.debug("closing after a second Ctrl-C: %s", exc)


def _confirm_reset(
    runs: list[PipelineRun], spec: str, confirm: Callable[[list[TableReset]], bool]
) -> None:
    """Ask ``confirm`` before a reset reads again or skips what tables hold.

    Raises:
        PipelineError: The answer was no; nothing was changed.
    """
    resets = [found for r in runs for found in r.reset_preview(spec)]
    held = [found for found in resets if found.destructive]
    if held and not confirm(held):
        names = table_names([found.table for found in held])
        raise PipelineError(f"--reset-offsets {spec} not applied to {names}: nothing was changed")


def _inline_maintenance(
    spark: SparkSession,
    config: FrazilConfig,
    selected: list[PipelineConfig],
    once: bool,
    emit: Callable[[Event], None],
) -> MaintenanceThread | None:
    """``maintenance: {mode: inline}``: passes over the run's own tables on a thread of their
    own while the run goes on (not for a run that stops once caught up); each action's end
    is emitted as a :class:`~frazil.progress.events.MaintenanceDone`."""
    if config.maintenance.mode != "inline" or once:
        return None
    from frazil.maintenance.actions import ActionResult
    from frazil.maintenance.passes import MaintenanceThread

    def done(result: ActionResult) -> None:
        # The event is the result as the progress layer (below maintenance) carries it.
        emit(MaintenanceDone(**dataclasses.asdict(result)))

    thread = MaintenanceThread(spark, config, selected, threading.Event(), on_result=done)
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
    watches = [KafkaWatch(r.pipeline.name, r.config.kafka.bootstrap_servers) for r in runs]
    while True:
        if any(s.is_set() for s in stops):
            return
        for r, watch in zip(runs, watches, strict=True):
            _look(r, watch)
            r.hand_over()
            if _failed(r):
                # Topics come and go (rotated topics under a pattern aged out by retention, a
                # topic deleted and created again): Spark's source stops, or the batch does
                # when a topic has another id. Start again from the tables, which name the
                # topics Kafka has now (a topic created again from its start); a cause that
                # comes back at every start stops the run (RestartBudget).
                why = r.restart_cause()
                if not why:
                    return  # a failure to report
                r.restart_from_table(why)
        # A failure found after its run's look above (a batch failing meanwhile, on Spark's
        # thread) waits for the next look: deciding here would report a restartable one.
        active = [r for r in runs if r.query is not None and r.query.isActive]
        if not active:
            return
        try:
            query = active[0].query
            assert query is not None
            if any(r.warming for r in runs):
                # A short first query runs: look often, so that the pipeline's own query
                # starts as soon as the first batch is committed.
                time.sleep(0.1)
                continue
            query.awaitTermination(1)
        except Exception:  # the query failed: the loop above decides what to do
            continue


def _look(r: PipelineRun, watch: KafkaWatch) -> None:
    """Give the run's query status to its Kafka watch (a batch waiting on Kafka is said)."""
    query = r.query
    try:
        status = query.status if query is not None and query.isActive else None
    except Exception:  # the query ended meanwhile: the loop decides what that means
        status = None
    watch.look(status)


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
        if r.handler.restart is not None:
            # The batch in flight at the stop found a table rolled back: the records after
            # the rollback point are read again by the next start, from the tables' markers
            # (a restart now would only be stopped again).
            log.warning(
                "%s: stopped as a table went back: %s; the next start reads its records "
                "again from the tables' markers",
                r.pipeline.name,
                r.handler.restart,
            )
            continue
        log.info("pipeline %s failed:\n%s", r.pipeline.name, text)
        failure = r.handler.failure
        if failure is not None:
            # The batch's own exception: Spark's says only that the callback raised, the
            # cause a line deep in the Python traceback it quotes.
            raise PipelineFailed(r.pipeline.name, failure) from failure
        outage = outage_error(r.pipeline.name, r.config.kafka.bootstrap_servers, text)
        if outage is not None:
            raise outage
        first = text.strip().splitlines()[0] if text.strip() else repr(exc)
        raise PipelineError(f"pipeline {r.pipeline.name!r} failed: {first}")


__all__ = ["FrazilError", "run", "select_pipelines"]
