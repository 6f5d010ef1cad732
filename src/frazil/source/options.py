"""Options of Spark's Kafka source for a pipeline: what it reads, how it fetches, how it
splits partitions over cores and how it rides out a partition leader's failover."""

from __future__ import annotations

from collections.abc import Mapping

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.source.offsets import TopicOffsets, offsets_to_json

#: What frazil reads unless ``kafka.properties`` says ``isolation.level: read_uncommitted``:
#: records of aborted transactions never, records of open ones once they commit.
DEFAULT_ISOLATION_LEVEL = "read_committed"
#: Records one poll of Spark's Kafka reader may return (Kafka's default: 500). After every
#: poll the reader asks the broker for the partition's earliest and latest offsets (two
#: ListOffsets round trips, ``InternalKafkaConsumer.getAvailableOffsetRange``), so a poll's
#: size sets how often a task pays them: at 500 records they were 12.7% of the steady
#: state's samples, and 20,000 cut the task threads' CPU to 0.76x (docs/benchmarks.md,
#: "Where the CPU goes in the steady state"). A poll
#: still returns only what the consumer has fetched (``max.partition.fetch.bytes``, 1 MiB).
DEFAULT_MAX_POLL_RECORDS = 20_000
#: Kafka's own ``max.poll.records``: never fewer.
MIN_POLL_RECORDS = 500
#: Records one poll of a sampling batch read may return: Kafka's own default.
SAMPLE_POLL_RECORDS = 500
#: Bytes of fetched records the pipeline's Kafka consumers may hold at once, over the
#: consumers Spark keeps for it: Kafka's default per partition (``max.partition.fetch.bytes``,
#: 1 MiB) times Spark's default consumer cache (``spark.kafka.consumer.cache.capacity``, 64).
#: A cached consumer can hold a fetched response it has not returned yet.
FETCH_BUDGET_BYTES = 64 << 20
#: Kafka's own ``max.partition.fetch.bytes``: never less.
MIN_FETCH_BYTES = 1 << 20
#: Enough for a poll of DEFAULT_MAX_POLL_RECORDS records of a few hundred bytes.
MAX_FETCH_BYTES = 8 << 20
#: The consumers' socket receive buffer with larger fetches (Kafka's default: 64 KiB).
FETCH_RECEIVE_BUFFER_BYTES = 1 << 20


def isolation_level(config: FrazilConfig) -> str:
    """The Kafka isolation level the pipeline reads with (``read_committed`` by default).

    Spark's source and frazil's own offset reads (latest offsets for lag, lagging partitions
    and ``--reset-offsets latest``) use the same one, so that "latest" is the last stable
    offset exactly when the source stops there. The config checks the value.
    """
    return config.kafka.properties.get("isolation.level", DEFAULT_ISOLATION_LEVEL)


def source_options(
    config: FrazilConfig,
    pipeline: PipelineConfig,
    starting_offsets: TopicOffsets | None = None,
    parallelism: int | None = None,
    max_offsets: int | None = None,
    partitions: int | None = None,
) -> dict[str, str]:
    """Options for ``spark.readStream.format("kafka")``.

    Args:
        config: The whole config (for the Kafka connection).
        pipeline: The pipeline being read.
        starting_offsets: Exact positions to start from when the checkpoint is new (recovery
            from offsets stored in the table); otherwise the pipeline's ``starting_offsets``.
        parallelism: The cores Spark runs tasks on (its default parallelism); when given,
            hot partitions are split so that no core sits idle (see :func:`split_options`).
        max_offsets: The most records per batch, in place of the pipeline's
            ``max_offsets_per_trigger`` (the small first batch of an early first commit).
        partitions: The Kafka partitions the pipeline reads now; when given, each
            consumer's fetches are sized to them (see :func:`fetch_options`).
    """
    options = {
        "kafka.bootstrap.servers": config.kafka.bootstrap_servers,
        # Headers are read for the metadata column, and for the dead-letter queue, which
        # keeps failing records' headers.
        "includeHeaders": str(
            "headers" in pipeline.kafka_metadata or pipeline.errors.dead_letters
        ).lower(),
        # Losing data silently is never acceptable: fail if offsets were deleted under us.
        "failOnDataLoss": "true",
        # A task whose range ends at the log end otherwise waits for the broker's parked
        # fetch (Kafka's default 500 ms) before it finishes: up to half a second per wave of
        # tasks in every batch that catches up (bench/freshness). kafka.properties can override.
        "kafka.fetch.max.wait.ms": "50",
        # Transactional producers (Debezium's exactly-once source, Kafka Streams, Flink's
        # exactly-once sinks) abort transactions and send their records again: reading
        # uncommitted records would ingest the aborted copies too. kafka.properties can
        # override it.
        "kafka.isolation.level": DEFAULT_ISOLATION_LEVEL,
        # Fewer polls per task, each followed by the reader's two offset requests (above), but
        # none larger than a batch's share of a partition. kafka.properties can override it.
        "kafka.max.poll.records": str(poll_records(pipeline.max_offsets_per_trigger, partitions)),
    }
    options.update(_failover_options(config.kafka.properties))
    if pipeline.topics is not None:
        options["subscribe"] = ",".join(pipeline.topics)
    else:
        assert pipeline.topic_pattern is not None
        options["subscribePattern"] = pipeline.topic_pattern
    if starting_offsets:
        options["startingOffsets"] = offsets_to_json(starting_offsets)
    else:
        options["startingOffsets"] = pipeline.starting_offsets
    cap = max_offsets or pipeline.max_offsets_per_trigger
    if cap:
        options["maxOffsetsPerTrigger"] = str(cap)
    if pipeline.min_partitions:
        options["minPartitions"] = str(pipeline.min_partitions)
    elif parallelism is not None:
        options.update(split_options(pipeline, parallelism, cap))
    if partitions is not None:
        options.update(fetch_options(partitions, parallelism or 1, len(config.pipelines)))
    for key, value in config.kafka.properties.items():
        options[f"kafka.{key}"] = value
    return options


def poll_records(cap: int | None, partitions: int | None) -> int:
    """``max.poll.records``: :data:`DEFAULT_MAX_POLL_RECORDS`, or a batch's share of a
    partition when ``max_offsets_per_trigger`` makes it smaller (never below Kafka's 500).
    """
    if not cap or not partitions:
        return DEFAULT_MAX_POLL_RECORDS
    share = -(-cap // partitions)
    return max(MIN_POLL_RECORDS, min(DEFAULT_MAX_POLL_RECORDS, share))


def fetch_options(partitions: int, parallelism: int = 1, pipelines: int = 1) -> dict[str, str]:
    """Larger fetches where few partitions are read: fewer polls per task.

    A poll of Spark's Kafka reader returns at most what one fetch brought (1 MiB per
    partition by Kafka's default, ~5,000 records of 200 bytes), and each poll is followed by
    the reader's two offset requests. Up to 8 MiB a partition lets a poll return
    ``max.poll.records``: the task threads took 0.91x the CPU on 2M records in 4 partitions
    (docs/benchmarks.md, "Larger Kafka fetches"). The size is :data:`FETCH_BUDGET_BYTES`,
    shared by the config's ``pipelines`` (their queries share the JVM's consumer cache), over
    the consumers Spark may keep for this one (a partition each, and the pieces of split
    partitions: up to ``parallelism`` more), so many partitions keep Kafka's 1 MiB and the
    memory bound it gives. ``kafka.properties`` overrides both settings.
    """
    consumers = max(partitions, 1) + max(parallelism, 0)
    size = min(MAX_FETCH_BYTES, FETCH_BUDGET_BYTES // max(pipelines, 1) // consumers)
    if size <= MIN_FETCH_BYTES:
        return {}
    return {
        "kafka.max.partition.fetch.bytes": str(size),
        "kafka.receive.buffer.bytes": str(FETCH_RECEIVE_BUFFER_BYTES),
    }


#: How long one of Spark's Kafka admin calls (the latest offsets of each batch) may take.
FAILOVER_API_TIMEOUT_MS = 10_000
#: Attempts at them: 18 of 10 s (+1 s apart) keep the ~3 minutes Kafka's defaults gave
#: (3 of 60 s) before a query fails for a Kafka that does not answer.
FAILOVER_OFFSET_ATTEMPTS = 18


def _failover_options(properties: Mapping[str, str]) -> dict[str, str]:
    """Options that let ingestion resume soon after a partition leader dies.

    Spark's admin client sends each batch's ListOffsets to the partitions' leaders; when a
    leader is killed, the call waits for that dead node until ``default.api.timeout.ms``
    (Kafka's 60 s) before it fails and Spark asks again with fresh metadata: ingestion
    stalled for over a minute (tests/integration/test_broker_failover.py). A shorter call,
    tried more often, resumes within seconds of the new leader's election. Left out when
    ``kafka.properties`` sets either timeout (Kafka's admin refuses an API timeout below the
    request timeout).
    """
    options = {"fetchOffset.numRetries": str(FAILOVER_OFFSET_ATTEMPTS)}
    if not {"default.api.timeout.ms", "request.timeout.ms"} & set(properties):
        options["kafka.default.api.timeout.ms"] = str(FAILOVER_API_TIMEOUT_MS)
        options["kafka.request.timeout.ms"] = str(FAILOVER_API_TIMEOUT_MS)
    return options


def split_options(
    pipeline: PipelineConfig, parallelism: int, max_offsets: int | None = None
) -> dict[str, str]:
    """Kafka source options that keep every core busy when a few partitions carry the traffic.

    Spark reads each Kafka partition's offset range in one task, so a topic with fewer busy
    partitions than cores leaves cores idle, and a hot partition makes one task the whole
    batch. Spark can split ranges without a shuffle: ``minPartitions`` (at least as many tasks
    as cores) and ``maxRecordsPerPartition`` (no task with more than its share of a full
    batch). Consecutive pieces of one partition are read by separate consumers and land in
    separate files; the batch's offsets, and so exactly-once, do not change.

    Not applied when the user sets ``pipelines[].min_partitions`` (``1`` turns splitting off).
    ``max_offsets`` is the batch's cap when it is not ``max_offsets_per_trigger``.
    """
    cores = max(parallelism, 1)
    options = {"minPartitions": str(cores)}
    cap = max_offsets or pipeline.max_offsets_per_trigger
    if cap:
        share = -(-cap // cores)  # ceiling division
        options["maxRecordsPerPartition"] = str(share)
    return options
