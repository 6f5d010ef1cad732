"""Create a topic and fill it with generated events, as fast as possible or at a steady rate."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import KafkaError as _LibKafkaError
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

# The public home of NewTopic is confluent_kafka.admin, which does not re-export it for type
# checkers; cimpl is where it is defined (and typed).
from confluent_kafka.cimpl import NewTopic
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from frazil.errors import KafkaError
from frazil.generate.payments import PaymentGenerator
from frazil.source.clients import KAFKA_CLIENT_LOGGER

#: Makes one record per call: ``(key, value)``; a ``None`` key lets Kafka pick the partition.
EventFactory = Callable[[], tuple[bytes | None, bytes]]

#: Producer settings frazil always uses; ``producer_config`` in :func:`produce_events` overrides.
#: Idempotence with ``acks=all`` means a retried batch is never written twice; lingering a few
#: milliseconds and compressing with LZ4 (cheap on CPU, readable by Spark's Kafka client) let
#: librdkafka send large batches.
DEFAULT_PRODUCER_CONFIG: Final[Mapping[str, Any]] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.timeout.ms": 120_000,
    "client.id": "frazil-generate",
}

# Events produced between two progress updates / delivery-callback polls when not rate limited.
_CHUNK: Final = 5_000
# Bounds of one sleep while waiting for rate-limit tokens. Short slices keep delivery callbacks
# flowing; the floor matters because Producer.poll rounds its timeout down to whole milliseconds,
# so shorter waits would busy-spin a CPU core.
_MIN_WAIT_SLICE_S: Final = 0.001
_MAX_WAIT_SLICE_S: Final = 0.005
# How long every broker may refuse connections before the generator gives up (a broker just
# started may refuse for a moment).
_REFUSED_GRACE_S: Final = 3.0
# How long to block in poll() when librdkafka's local queue is full.
_BUFFER_FULL_POLL_S: Final = 0.05


@dataclass(frozen=True)
class TopicStatus:
    """What :func:`ensure_topic` found or did.

    Attributes:
        topic: The topic name.
        partitions: How many partitions the topic has now.
        created: Whether this call created the topic.
    """

    topic: str
    partitions: int
    created: bool


@dataclass(frozen=True)
class ProduceReport:
    """The outcome of :func:`produce_events`: every event counted here was acknowledged.

    Attributes:
        topic: The topic written to.
        count: How many events were delivered.
        seconds: Wall time from the first produce call until the final flush returned.
        bytes: Total size of the values delivered (uncompressed, keys excluded).
        partition_counts: Delivered events per partition.
    """

    topic: str
    count: int
    seconds: float
    bytes: int
    partition_counts: Mapping[int, int] = field(default_factory=dict)

    @property
    def events_per_second(self) -> float:
        """Average delivered events per second (0 when nothing was timed)."""
        return self.count / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready data (partition numbers become string keys)."""
        return {
            "topic": self.topic,
            "count": self.count,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(self.events_per_second, 1),
            "bytes": self.bytes,
            "partition_counts": {str(p): n for p, n in sorted(self.partition_counts.items())},
        }


def ensure_topic(
    bootstrap: str, topic: str, partitions: int = 4, timeout: float = 30.0
) -> TopicStatus:
    """Create ``topic`` with ``partitions`` partitions and replication factor 1 if it is missing.

    An existing topic is left as it is, even with a different partition count: the returned
    status says how many partitions it has, so the caller can report the difference.

    Args:
        bootstrap: Kafka ``bootstrap.servers``.
        topic: Topic name.
        partitions: Partition count for a newly created topic.
        timeout: Seconds to wait for the broker's metadata and for the creation.

    Returns:
        The topic's partition count and whether it was created by this call.

    Raises:
        KafkaError: The broker is unreachable or refused to create the topic.
        ValueError: ``partitions`` is less than 1.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    down = _BrokersDown()
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        # librdkafka's own lines (a "Connection refused" every 50 ms) go through Python
        # logging, quiet unless --verbose; error_cb tells when no broker answers.
        "logger": logging.getLogger(KAFKA_CLIENT_LOGGER),
        "error_cb": down.on_error,
    }
    admin = AdminClient(conf)
    existing = _partition_count(admin, bootstrap, topic, timeout, down)
    if existing is not None:
        return TopicStatus(topic, existing, created=False)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if (
            isinstance(error, _LibKafkaError)
            and error.code() == _LibKafkaError.TOPIC_ALREADY_EXISTS
        ):
            # Someone else created it between our metadata read and the create request.
            raced = _partition_count(admin, bootstrap, topic, timeout, down)
            return TopicStatus(topic, raced if raced is not None else partitions, created=False)
        raise KafkaError(f"could not create topic {topic!r} on {bootstrap}: {exc}") from exc
    except TimeoutError as exc:
        raise KafkaError(
            f"creating topic {topic!r} on {bootstrap} did not finish within {timeout:g} s"
        ) from exc
    return TopicStatus(topic, partitions, created=True)


class _BrokersDown:
    """Collects librdkafka's error callbacks: whether every broker refused, and why."""

    def __init__(self) -> None:
        self.all_down = False
        self.reason: str | None = None

    def on_error(self, error: _LibKafkaError) -> None:
        if error.code() == _LibKafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        elif error.code() in (_LibKafkaError._TRANSPORT, _LibKafkaError._RESOLVE):
            # "127.0.0.1:9999/bootstrap: Connect to ipv4#127.0.0.1:9999 failed: Connection
            # refused (after 0ms in state CONNECT)": the broker is named by the message already.
            self.reason = re.sub(r"^\S+/\S+: ", "", error.str())


def _partition_count(
    admin: AdminClient, bootstrap: str, topic: str, timeout: float, down: _BrokersDown
) -> int | None:
    # Listing all topics (instead of asking for this one) never triggers broker auto-creation.
    # Asked in slices: once every broker has refused for a while (nothing listens there),
    # waiting out the whole timeout would only delay the same answer.
    started = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - started)
        try:
            metadata = admin.list_topics(timeout=max(0.1, min(1.0, left)))
            break
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            waited = time.monotonic() - started
            if down.all_down and waited >= _REFUSED_GRACE_S:
                why = down.reason or str(exc)
                raise KafkaError(
                    f"Kafka does not answer at {bootstrap} (--bootstrap-servers): {why}"
                ) from None
            if waited >= timeout:
                raise KafkaError(
                    f"could not read topic metadata from {bootstrap} within {timeout:g} s: {exc}"
                ) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


class TokenBucket:
    """Rate limiter that holds a long-run average rate against the monotonic clock.

    Tokens accrue continuously at ``rate`` per second up to ``burst``; each event spends one.
    Because accrual is computed from elapsed time rather than from how long we slept, sleeping
    too long or too short does not drift the average, as long as the bucket does not fill up
    during a sleep. The default ``burst`` of one second's worth also lets a producer that
    stalled briefly (a busy CPU, a slow broker) catch up instead of losing that time.

    Args:
        rate: Tokens (events) per second; must be positive.
        burst: Bucket capacity; defaults to one second's worth (at least 1).
        clock: Monotonic clock in seconds.
    """

    __slots__ = ("_burst", "_clock", "_last", "_rate", "_tokens")

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self._rate = float(rate)
        self._burst = max(1.0, burst if burst is not None else rate)
        self._clock = clock
        self._last = clock()
        # One token up front so the first event goes out at once.
        self._tokens = 1.0

    def take(self, most: int, wait: Callable[[float], object] = time.sleep) -> int:
        """Block until at least one token is available, then spend up to ``most`` of them.

        Args:
            most: The largest number of tokens wanted (at least 1).
            wait: Called with the seconds to wait (at most a few milliseconds at a time);
                a producer passes its ``poll`` so delivery callbacks run while it waits.

        Returns:
            How many tokens were spent, between 1 and ``most``.
        """
        while True:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
            self._last = now
            if self._tokens >= 1.0:
                granted = min(most, int(self._tokens))
                self._tokens -= granted
                return granted
            needed = (1.0 - self._tokens) / self._rate
            wait(min(max(needed, _MIN_WAIT_SLICE_S), _MAX_WAIT_SLICE_S))


class _DeliveryTracker:
    """Collects delivery reports; librdkafka calls it from ``poll``/``flush`` on this thread."""

    __slots__ = ("failed", "fatal", "first_error", "partition_counts", "value_bytes")

    def __init__(self) -> None:
        self.partition_counts: dict[int, int] = {}
        self.value_bytes = 0
        self.failed = 0
        self.first_error: str | None = None
        self.fatal: str | None = None

    def on_delivery(self, err: _LibKafkaError | None, msg: Any) -> None:
        if err is None:
            partition = msg.partition()
            self.partition_counts[partition] = self.partition_counts.get(partition, 0) + 1
            self.value_bytes += len(msg)
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = str(err)

    def on_error(self, err: _LibKafkaError) -> None:
        # Non-fatal errors (a broker connection dropping) are retried by librdkafka; a fatal one
        # (the idempotent producer lost its guarantees) means the run must stop.
        if err.fatal() and self.fatal is None:
            self.fatal = str(err)


def produce_events(
    bootstrap: str,
    topic: str,
    count: int,
    rate: float | None = None,
    progress: bool = True,
    *,
    event_factory: EventFactory | None = None,
    seed: int | None = None,
    producer_config: Mapping[str, Any] | None = None,
    flush_timeout: float = 120.0,
    console: Console | None = None,
) -> ProduceReport:
    """Produce ``count`` events to ``topic`` and wait until every one is acknowledged.

    The topic is not created here; call :func:`ensure_topic` first (otherwise the broker's
    auto-creation, if enabled, decides the partition count).

    Args:
        bootstrap: Kafka ``bootstrap.servers``.
        topic: Destination topic.
        count: How many events to produce.
        rate: Target events per second, held on average over the whole run; ``None`` produces
            as fast as the client and broker allow.
        progress: Show a progress bar on ``console``; it is never shown when the console is not
            a terminal (e.g. in CI).
        event_factory: Makes each ``(key, value)`` record; defaults to
            ``PaymentGenerator(seed)``.
        seed: Seed for the default payment generator; ignored with ``event_factory``.
        producer_config: librdkafka settings layered over :data:`DEFAULT_PRODUCER_CONFIG`.
        flush_timeout: Seconds to wait at the end for outstanding deliveries.
        console: Where the progress bar goes; defaults to standard error.

    Returns:
        What was delivered, how long it took and how events spread over partitions.

    Raises:
        KafkaError: Any event failed delivery, deliveries were still pending after
            ``flush_timeout``, or the producer hit a fatal error.
        ValueError: ``count`` is negative or ``rate`` is not positive.
    """
    if count < 0:
        raise ValueError(f"count must not be negative, got {count}")
    if rate is not None and not rate > 0:
        raise ValueError(f"rate must be positive, got {rate}")
    factory: EventFactory = event_factory if event_factory is not None else PaymentGenerator(seed)
    tracker = _DeliveryTracker()
    try:
        producer = Producer(
            {
                **DEFAULT_PRODUCER_CONFIG,
                **(producer_config or {}),
                "bootstrap.servers": bootstrap,
                "on_delivery": tracker.on_delivery,
                "error_cb": tracker.on_error,
                # librdkafka's own lines (a transient "Failed to acquire idempotence PID")
                # go through Python logging: quiet unless --verbose.
                "logger": logging.getLogger(KAFKA_CLIENT_LOGGER),
            }
        )
    except KafkaException as exc:
        raise KafkaError(f"invalid Kafka producer configuration: {exc}") from exc
    out = console if console is not None else Console(stderr=True)
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
        disable=not (progress and out.is_terminal),
        transient=False,
    )
    produce = producer.produce
    poll = producer.poll
    started = time.monotonic()
    # Created last so that setup time does not fill the bucket and start with a burst.
    bucket = TokenBucket(rate) if rate is not None else None
    with bar:
        task = bar.add_task(f"producing to {topic}", total=count)
        sent = 0
        while sent < count:
            if bucket is None:
                n = min(_CHUNK, count - sent)
            else:
                n = bucket.take(min(_CHUNK, count - sent), poll)
            for _ in range(n):
                key, value = factory()
                while True:
                    try:
                        produce(topic, value, key)
                        break
                    except BufferError:
                        # librdkafka's local queue is full: serve delivery reports to drain it.
                        poll(_BUFFER_FULL_POLL_S)
                    except KafkaException as exc:
                        raise KafkaError(f"could not produce to topic {topic!r}: {exc}") from exc
            sent += n
            poll(0)
            if tracker.fatal is not None:
                raise KafkaError(f"producer to topic {topic!r} failed: {tracker.fatal}")
            bar.update(task, completed=sent)
        bar.update(task, description=f"flushing {topic}")
        remaining = producer.flush(flush_timeout)
        bar.update(task, description=f"produced to {topic}")
    seconds = time.monotonic() - started
    if tracker.fatal is not None:
        raise KafkaError(f"producer to topic {topic!r} failed: {tracker.fatal}")
    if remaining > 0:
        raise KafkaError(
            f"{remaining} of {count} events to topic {topic!r} were still undelivered "
            f"after waiting {flush_timeout:g} s (is {bootstrap} reachable?)"
        )
    if tracker.failed:
        raise KafkaError(
            f"{tracker.failed} of {count} events to topic {topic!r} failed delivery; "
            f"first error: {tracker.first_error}"
        )
    return ProduceReport(
        topic=topic,
        count=sum(tracker.partition_counts.values()),
        seconds=seconds,
        bytes=tracker.value_bytes,
        partition_counts=dict(sorted(tracker.partition_counts.items())),
    )
