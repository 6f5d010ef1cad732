"""Running a config's pipelines as one Spark application."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig, PipelineConfig
from frazil.decode import columns as c
from frazil.decode.json import decode_json, infer_schema, schema_from_config
from frazil.engine import fence
from frazil.engine.batch import BatchHandler, CommitEvent, StopRequested
from frazil.engine.report import PipelineReport, table_report
from frazil.errors import ConfigError, FrazilError, KafkaError, PipelineError
from frazil.sink.iceberg import IcebergTableWriter
from frazil.sink.table import ensure_table, qualified, table_exists
from frazil.source.kafka import (
    admin_config,
    list_partitions,
    read_stream,
    resume_offsets,
    source_options,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructField, StructType

log = logging.getLogger(__name__)

#: Records sampled to infer a schema when the config declares none.
INFER_SAMPLE = 1000


@dataclass
class _Running:
    pipeline: PipelineConfig
    table: str
    handler: BatchHandler
    query: StreamingQuery
    resumed_from_table: bool


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


def checkpoint_has_progress(spark: SparkSession, checkpoint: str) -> bool:
    """Whether Spark has planned any batch in this checkpoint (its offset log is not empty)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/") + "/offsets")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return False
    return any(status.getPath().getName().isdigit() for status in fs.listStatus(path))


def _decode_schema(
    spark: SparkSession, config: FrazilConfig, pipeline: PipelineConfig, table: str
) -> StructType:
    from pyspark.sql.types import StructType

    if pipeline.schema_ is not None:
        return schema_from_config(pipeline)
    if table_exists(spark, table):
        fields = [
            f for f in spark.table(table).schema.fields if not f.name.startswith(c.METADATA_PREFIX)
        ]
        return StructType(fields)
    options = {
        k: v
        for k, v in source_options(config, pipeline).items()
        if k not in ("startingOffsets", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss")
    }
    return infer_schema(spark, options, pipeline, INFER_SAMPLE)


def start_pipeline(
    spark: SparkSession,
    config: FrazilConfig,
    pipeline: PipelineConfig,
    *,
    until_caught_up: bool,
    on_commit: Callable[[CommitEvent], None] | None = None,
) -> _Running:
    """Create the table if needed and start the pipeline's streaming query."""
    table = qualified(config.catalog.name, pipeline.table)
    schema = _decode_schema(spark, config, pipeline, table)
    checkpoint = config.checkpoint_for(pipeline)
    starting = None
    resumed = False

    from pyspark.sql.types import StructType

    writer_schema = StructType(
        [
            *schema.fields,
            *_metadata_fields(pipeline),
        ]
    )
    _, created = ensure_table(spark, config.catalog.name, pipeline, writer_schema)
    writer = IcebergTableWriter(spark, table, pipeline.name, new_table=created)
    if writer.last is not None and not checkpoint_has_progress(spark, checkpoint):
        # The checkpoint is new or was lost: resume from the offsets committed to the table.
        starting = resume_offsets(config, pipeline, writer.last.offsets)
        resumed = True
        log.warning(
            "%s: no checkpoint progress in %s; resuming from the table's offsets",
            pipeline.name,
            checkpoint,
        )
    raw = read_stream(spark, source_options(config, pipeline, starting))
    decoded = decode_json(raw, schema, pipeline)
    handler = BatchHandler(pipeline=pipeline, writer=writer, on_commit=on_commit)
    stream = (
        decoded.writeStream.foreachBatch(handler)
        .queryName(pipeline.name)
        .option("checkpointLocation", checkpoint)
    )
    if until_caught_up:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(
            processingTime=f"{int(pipeline.trigger_seconds() * 1000)} milliseconds"
        )
    query = stream.start()
    handler.set_query_id(str(query.id))
    return _Running(pipeline, table, handler, query, resumed)


def _metadata_fields(pipeline: PipelineConfig) -> list[StructField]:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructType,
        TimestampType,
    )
    from pyspark.sql.types import StructField as Field

    types = {
        "topic": StringType(),
        "partition": IntegerType(),
        "offset": LongType(),
        "timestamp": TimestampType(),
        "key": StringType(),
        "headers": ArrayType(
            StructType([Field("key", StringType()), Field("value", BinaryType())])
        ),
    }
    return [Field(f"{c.METADATA_PREFIX}{m}", types[m]) for m in pipeline.kafka_metadata]


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
    on_commit: Callable[[CommitEvent], None] | None = None,
    on_started: Callable[[list[str]], None] | None = None,
    spark: SparkSession | None = None,
    stop_event: threading.Event | None = None,
) -> list[PipelineReport]:
    """Run pipelines until caught up, or until SIGINT/SIGTERM (or ``stop_event``).

    A stop request lets the micro-batch in flight finish and commit, then stops each query.

    Returns:
        One report per pipeline, read back from its table.

    Raises:
        FrazilError: A pipeline failed; the first failure is raised.
    """
    selected = select_pipelines(config, pipeline_names)
    for pipeline in selected:
        check_topics(config, pipeline)
        fence.acquire(config.state_dir, pipeline.name)
    if spark is None:
        from frazil.engine.session import build_spark

        spark = build_spark(config)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    for pipeline in selected:
        fence.record(config.state_dir, pipeline.name, jvm_pid)

    runs: list[_Running] = []
    with _Signals() as signals:
        stop = stop_event or signals.stop
        try:
            for pipeline in selected:
                runs.append(
                    start_pipeline(
                        spark,
                        config,
                        pipeline,
                        until_caught_up=until_caught_up,
                        on_commit=on_commit,
                    )
                )
            if on_started:
                on_started([r.pipeline.name for r in runs])
            _wait(runs, stop, signals.stop)
        finally:
            _stop_all(runs)
    _raise_first_failure(runs)
    return [
        table_report(
            spark,
            r.table,
            r.pipeline,
            r.handler.stats,
            r.resumed_from_table,
            marker=r.handler.writer.last,
        )
        for r in runs
    ]


def _wait(runs: list[_Running], *stops: threading.Event) -> None:
    while True:
        if any(s.is_set() for s in stops):
            return
        if any(r.handler.error for r in runs):
            return
        active = [r for r in runs if r.query.isActive]
        if not active:
            return
        if any(r.query.exception() is not None for r in runs):
            return
        try:
            active[0].query.awaitTermination(1)
        except Exception:  # the query failed: the caller reports why
            return


def _stop_all(runs: list[_Running]) -> None:
    """Let each in-flight batch finish, then stop the queries."""
    for r in runs:
        r.handler.closing = True
    for r in runs:
        r.handler.wait_idle()
        if r.query.isActive:
            r.query.stop()


def _raise_first_failure(runs: list[_Running]) -> None:
    for r in runs:
        if r.handler.error is not None and not isinstance(r.handler.error, StopRequested):
            raise r.handler.error
    for r in runs:
        exc = r.query.exception()
        if exc is None:
            continue
        text = str(exc)
        if "StopRequested" in text:
            continue
        log.info("pipeline %s failed:\n%s", r.pipeline.name, text)
        first = text.strip().splitlines()[0] if text.strip() else repr(exc)
        raise PipelineError(f"pipeline {r.pipeline.name!r} failed: {first}")


__all__ = ["FrazilError", "run", "select_pipelines", "start_pipeline"]
