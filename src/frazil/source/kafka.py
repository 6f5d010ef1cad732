"""Spark Kafka source options for a pipeline, and partition discovery for resuming."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import KafkaError

#: The logger librdkafka's messages go to (the generator's producer, the dead-letter topic's):
#: quiet unless ``--verbose``.
KAFKA_CLIENT_LOGGER = "frazil.kafka.client"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: ``TopicOffsets`` maps topic -> partition -> next offset to read (Spark's JSON shape).
TopicOffsets = dict[str, dict[int, int]]

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
        # Fewer polls per task, each followed by the reader's two offset requests (above).
        # kafka.properties can override it.
        "kafka.max.poll.records": str(DEFAULT_MAX_POLL_RECORDS),
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


def offsets_to_json(offsets: TopicOffsets) -> str:
    """Spark's ``startingOffsets`` JSON: ``{"topic": {"0": 42}}``."""
    return json.dumps(
        {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in offsets.items()},
        sort_keys=True,
        separators=(",", ":"),
    )


def offsets_from_json(text: str) -> TopicOffsets:
    """Inverse of :func:`offsets_to_json`."""
    raw = json.loads(text)
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in raw.items()}


def merge_offsets(base: TopicOffsets, newer: TopicOffsets) -> TopicOffsets:
    """Union of two offset maps, keeping the larger offset per partition."""
    merged = {topic: dict(parts) for topic, parts in base.items()}
    for topic, parts in newer.items():
        target = merged.setdefault(topic, {})
        for partition, offset in parts.items():
            target[partition] = max(offset, target.get(partition, -1))
    return merged


def records_between(start: TopicOffsets, earliest: TopicOffsets, latest: TopicOffsets) -> int:
    """Records from ``start`` to ``latest``, over the partitions of ``latest``.

    ``start`` is in Spark's JSON form: -2 is the earliest offset, -1 the latest; a partition it
    lacks is read from the earliest (as Spark reads a new partition), and an offset below the
    earliest (records removed by retention) counts from there.
    """
    total = 0
    for topic, parts in latest.items():
        for partition, end in parts.items():
            first = earliest.get(topic, {}).get(partition, end)
            at = start.get(topic, {}).get(partition, -2)
            at = first if at == -2 else end if at == -1 else max(at, first)
            total += max(end - at, 0)
    return total


#: Java client settings whose librdkafka setting has another name, same meaning.
_RENAMED = {
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
}
#: ``username="…"`` / ``password="…"`` options of a JAAS line (Java StreamTokenizer quoting).
_JAAS_OPTION = re.compile(r'([\w.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
#: JAAS login modules whose ``username`` and ``password`` are librdkafka's SASL credentials.
_JAAS_USER_PASSWORD_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)


def librdkafka_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``kafka.properties`` (written for Spark's Java Kafka client) in librdkafka's terms.

    The one place frazil translates between the two clients, so that Spark's source, the JVM
    admin and every confluent-kafka client (consumer groups, lag, the dead-letter topic, status)
    connect with the same settings:

    * ``sasl.jaas.config`` of the PLAIN or SCRAM login module: its ``username`` and
      ``password`` become ``sasl.username`` and ``sasl.password``;
    * ``ssl.truststore.location`` of a PEM trust store (``ssl.truststore.type: PEM``):
      ``ssl.ca.location``; inline ``ssl.truststore.certificates``: ``ssl.ca.pem``;
    * ``ssl.keystore.location`` of a PEM key store (key and certificate chain in one file):
      ``ssl.certificate.location`` and ``ssl.key.location``; of a PKCS12 one: librdkafka's
      own ``ssl.keystore.location``; inline ``ssl.keystore.key`` / ``ssl.keystore.certificate
      .chain``: ``ssl.key.pem`` / ``ssl.certificate.pem``; ``ssl.key.password`` is the same;
    * ``ssl.endpoint.identification.algorithm`` empty (Java's "off"): ``none``.

    Everything else is passed as it is; what librdkafka cannot use (a JKS trust store, an OAuth
    callback handler) it refuses, and :func:`admin_config` goes without.
    """
    props = dict(properties)
    out: dict[str, str] = {}
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        module = jaas.split(None, 1)[0] if jaas.strip() else ""
        options = {k: _jaas_unquote(v) for k, v in _JAAS_OPTION.findall(jaas)}
        if module in _JAAS_USER_PASSWORD_MODULES and {"username", "password"} <= set(options):
            out["sasl.username"] = options["username"]
            out["sasl.password"] = options["password"]
        else:
            out["sasl.jaas.config"] = jaas
    truststore_type = props.get("ssl.truststore.type", "JKS").upper()
    if truststore_type == "PEM" and "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props.pop("ssl.truststore.location")
        props.pop("ssl.truststore.type")
        props.pop("ssl.truststore.password", None)
    elif "ssl.truststore.certificates" in props:
        props.pop("ssl.truststore.type", None)
    keystore_type = props.get("ssl.keystore.type", "JKS").upper()
    if "ssl.keystore.location" in props and keystore_type in ("PEM", "PKCS12"):
        props.pop("ssl.keystore.type")
        if keystore_type == "PEM":
            location = props.pop("ssl.keystore.location")
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
    elif "ssl.keystore.key" in props:
        props.pop("ssl.keystore.type", None)
    if props.get("ssl.endpoint.identification.algorithm") == "":
        props["ssl.endpoint.identification.algorithm"] = "none"
    for key, value in props.items():
        out[_RENAMED.get(key, key)] = value
    return out


def _jaas_unquote(value: str) -> str:
    """The value of a double-quoted JAAS option (backslash escapes undone)."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), value)


def admin_config(config: FrazilConfig) -> tuple[dict[str, str | int | float | bool], list[str]]:
    """Settings for frazil's own (librdkafka) clients, and the keys they had to leave out.

    ``kafka.properties`` are written for Spark's Java Kafka client and translated by
    :func:`librdkafka_properties`; some (a JKS trust store, an OAuth callback handler) still
    mean nothing to librdkafka, which refuses them. If librdkafka refuses the set, the client
    goes without all of them and they are named, so callers can tell an incomplete client from
    an unreachable Kafka.
    """
    from confluent_kafka.admin import AdminClient

    conf: dict[str, str | int | float | bool] = {
        "bootstrap.servers": config.kafka.bootstrap_servers,
        # Connection failures become one clear error, not a stream of client log lines.
        "log_level": 0,
    }
    props = librdkafka_properties(config.kafka.properties)
    try:
        AdminClient({**conf, **props})
    except Exception:  # librdkafka rejects settings it cannot use when the client is created
        # Settings depend on each other (a SASL mechanism needs its credentials), so there is
        # no telling which one to drop: check without any of them.
        return conf, list(config.kafka.properties)
    conf.update(props)
    return conf, []


class AuthenticationWatch:
    """Notes librdkafka's authentication errors, which its calls only report as a timeout.

    A wrong SASL password makes a metadata or offsets request fail with "broker transport
    failure" or time out; the reason only reaches the client's error callback. Add
    :meth:`client_conf` to a client's settings, and after a failed call ask :meth:`message`.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.conf = dict(conf)
        self.errors: list[str] = []

    def client_conf(self) -> dict[str, Any]:
        """The settings, with an error callback feeding this watch."""
        return {**self.conf, "error_cb": self._on_error}

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError as LibKafkaError

        if error.code() == LibKafkaError._AUTHENTICATION:
            self.errors.append(str(error.str()))

    def message(self, client: Any) -> str | None:
        """The authentication failure the client met, if any (``None`` otherwise).

        Args:
            client: The failed call's client: its pending callbacks are served first.
        """
        with contextlib.suppress(Exception):
            client.poll(0.5)
        if not self.errors:
            return None
        return authentication_failure(self.conf, self.errors[-1])


def authentication_failure(conf: Mapping[str, Any], detail: str) -> str:
    """The message for Kafka refusing frazil's credentials: where, as whom, never the secret.

    Args:
        conf: The librdkafka settings (``bootstrap.servers``, ``sasl.username`` …).
        detail: librdkafka's reason (it names the mechanism, never the password).
    """
    user = conf.get("sasl.username")
    who = f" as user {user!r}" if user else ""
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    return (
        f"Kafka at {conf.get('bootstrap.servers', '?')} (kafka.bootstrap_servers) refused "
        f"frazil{who} over {protocol}: authentication failed; check the credentials in "
        f"kafka.properties and the environment variables they name ({detail})"
    )


def unreachable(bootstrap_servers: str, timeout: float = 2.0) -> str | None:
    """Why no bootstrap server takes a connection, in words (a host that does not resolve is
    told apart from a closed port); None if one does, or the list does not parse."""
    import socket

    reasons: list[str] = []
    for server in bootstrap_servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not port.isdigit():
            return None
        host = host.strip("[]")
        try:
            socket.getaddrinfo(host, int(port), proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError):
            reasons.append(f"host {host!r} does not resolve (a typo, or a name this machine's DNS "
                           "does not know)")  # fmt: skip
            continue
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return None
        except ConnectionRefusedError:
            reasons.append(f"{host}:{port} refused the connection (nothing listens on that port)")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    return "; ".join(reasons) if reasons else None


def list_partitions(
    config: FrazilConfig, pipeline: PipelineConfig, timeout: float = 10.0
) -> dict[str, list[int]]:
    """The partitions of the topics the pipeline subscribes to, as Kafka reports them now.

    Raises:
        KafkaError: Kafka did not answer within ``timeout`` seconds.
    """
    from confluent_kafka.admin import AdminClient

    client_conf, refused = admin_config(config)
    watch = AuthenticationWatch(client_conf)
    client = AdminClient(watch.client_conf())
    try:
        metadata = client.list_topics(timeout=timeout)
    except Exception as exc:  # confluent_kafka raises KafkaException with a cause inside
        refusal = watch.message(client)
        if refusal is not None:
            raise KafkaError(refusal) from None
        left_out = (
            f" (without kafka.properties {', '.join(refused)}, which only Java clients use)"
            if refused
            else ""
        )
        why = unreachable(config.kafka.bootstrap_servers)
        raise KafkaError(
            f"Kafka does not answer at {config.kafka.bootstrap_servers} "
            f"(kafka.bootstrap_servers) within {timeout:g}s{left_out}: "
            + (why if why is not None else str(exc))
        ) from None
    wanted = set(pipeline.topics or [])
    pattern = re.compile(pipeline.topic_pattern) if pipeline.topic_pattern else None

    def matches(name: str) -> bool:
        if pattern is not None:
            return bool(pattern.fullmatch(name))
        return name in wanted

    return {
        str(name): sorted(topic.partitions)
        for name, topic in metadata.topics.items()
        if matches(str(name)) and not str(name).startswith("__")
    }


def read_topics(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """The topics' records as they are now, from the earliest offsets to the latest, as one
    batch read (``options``: the source's, without a start or a rate limit)."""
    reader = spark.read.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame: DataFrame = (
        reader.option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
    )
    return frame


def sample_topics(
    spark: SparkSession, options: dict[str, str], column: str, total: int, minimum: int
) -> list[bytes]:
    """Non-null ``column`` values (``key``, ``value``) from the start of every partition of
    the topics, in one Spark job: ``total`` spread over the partitions, at least ``minimum``
    from each. A pipeline over a topic per source table (Debezium's layout) meets each
    table's shape; a ``limit`` would take them all from the first partition read."""
    from pyspark.sql import DataFrame

    from frazil.jvm.classes import java_class

    raw = read_topics(spark, options)
    frame = raw.where(raw[column].isNotNull()).select(column)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    sampled = java_class(jvm, "dev.frazil.spark.Samples").perPartition(frame._jdf, total, minimum)
    return [bytes(row[0]) for row in DataFrame(sampled, spark).collect()]


def read_stream(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """The raw Kafka stream (key, value, topic, partition, offset, timestamp, ...)."""
    reader = spark.readStream.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame: DataFrame = reader.load()
    return frame
