"""The dead-letter topic: failing records sent to Kafka as they were read, with frazil's own
``frazil.errors.*`` headers, by an idempotent producer (:mod:`frazil.sink.dead_letters`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from frazil.errors import KafkaError
from frazil.sink.dead_letters.format import ERROR_CLASSES

if TYPE_CHECKING:
    from pyspark.sql import Row

# The logger name users filter on for the topic's warnings, whichever module holds the topic.
log = logging.getLogger("frazil.sink.deadletter")

#: Header prefix of frazil's own headers on dead-letter topic records.
HEADER_PREFIX = "frazil.errors."
#: Largest dead-letter record the producer sends (a record near the topic's maximum size,
#: plus frazil's headers).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


@dataclass
class DeadLetterTopic:
    """Sends dead-letter rows to a Kafka topic with an idempotent producer.

    Args:
        conf: librdkafka settings reaching the cluster (``bootstrap.servers`` and security).
        topic: The dead-letter topic; created (one partition) if missing.
    """

    conf: dict[str, Any]
    topic: str
    _producer: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Largest record the topic takes (its ``max.message.bytes``, at most frazil's own).
    _limit: int = MAX_MESSAGE_BYTES

    def _open(self) -> Any:
        with self._lock:  # a routed batch's tables send from several threads
            return self._opened()

    def _opened(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            from frazil.source.clients import KAFKA_CLIENT_LOGGER

            self._limit = min(MAX_MESSAGE_BYTES, self._ensure_topic())
            self._producer = Producer(
                {
                    **self.conf,
                    "enable.idempotence": True,
                    "acks": "all",
                    "message.max.bytes": MAX_MESSAGE_BYTES,
                    "compression.type": "zstd",
                    "logger": logging.getLogger(KAFKA_CLIENT_LOGGER),
                }
            )
        return self._producer

    def _ensure_topic(self) -> int:
        """Create the topic if missing; its ``max.message.bytes`` (frazil's own limit when it
        cannot be read)."""
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.admin._config import ConfigResource
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient(self.conf)
        listed = admin.list_topics(timeout=30)
        if self.topic in listed.topics:
            try:
                resource = ConfigResource(ConfigResource.Type.TOPIC, self.topic)
                found = admin.describe_configs([resource])[resource].result(30)
                return int(found["max.message.bytes"].value)
            except Exception as exc:  # not allowed to describe it: the broker says at send
                log.info("dead-letter topic %s: max.message.bytes unknown (%s)", self.topic, exc)
                return MAX_MESSAGE_BYTES
        futures = admin.create_topics(
            [
                NewTopic(
                    self.topic,
                    num_partitions=1,
                    replication_factor=-1,
                    config={"max.message.bytes": str(MAX_MESSAGE_BYTES)},
                )
            ]
        )
        try:
            futures[self.topic].result(30)
        except Exception as exc:  # created meanwhile by another run
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise KafkaError(f"cannot create dead-letter topic {self.topic!r}: {exc}") from None
        return MAX_MESSAGE_BYTES

    def send(self, rows: Iterable[Row] | Iterable[dict[str, Any]]) -> int:
        """Send ``rows`` (:func:`~frazil.sink.dead_letters.format.dead_letter_columns`) and
        wait until Kafka has them all.

        Returns:
            How many records were sent.

        Raises:
            KafkaError: A record was not written (the batch then stops before its tables
                commit, so nothing is lost).
        """
        producer = self._open()
        failures: list[str] = []
        too_large: list[str] = []
        sent = 0

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                return
            failures.append(str(err))
            if "MSG_SIZE_TOO_LARGE" in str(err) or "RECORD_TOO_LARGE" in str(err):
                too_large.append(_where(msg.headers() or []))

        for row in rows:
            headers = [(h["key"], h["value"]) for h in (row["headers"] or [])]
            headers += [
                (f"{HEADER_PREFIX}{name}", None if value is None else str(value).encode())
                for name, value in (
                    ("stage", row["stage"]),
                    ("exception.class", row["error_class"]),
                    ("exception.message", row["reason"]),
                    ("detail", row["detail"]),
                    ("topic", row["topic"]),
                    ("partition", row["partition"]),
                    ("offset", row["offset"]),
                    ("timestamp", _millis(row["timestamp"])),
                    ("pipeline", row["pipeline"]),
                    ("table", _get(row, "target_table")),
                )
            ]
            key, value = _fit(_bytes(row["key"]), _bytes(row["value"]), headers, self._limit)
            while True:
                try:
                    producer.produce(
                        self.topic,
                        key=key,
                        value=value,
                        headers=headers,
                        on_delivery=delivered,
                    )
                    sent += 1
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.5)
        remaining = producer.flush(60)
        if too_large:
            raise KafkaError(
                f"dead-letter topic {self.topic!r} refused {len(too_large)} record(s) as too "
                f"large (first: {too_large[0]}) although frazil cut them to {self._limit:,} "
                "bytes, its max.message.bytes: the broker's message.max.bytes is lower; raise "
                f"max.message.bytes of topic {self.topic} (kafka-configs.sh --alter "
                f"--entity-type topics --entity-name {self.topic} --add-config "
                "max.message.bytes=8388608) or the broker's message.max.bytes"
            )
        if remaining or failures:
            raise KafkaError(
                f"dead-letter topic {self.topic!r}: {len(failures) + remaining} of "
                f"{sent} record(s) not written"
                + (f" ({failures[0]})" if failures else " (timed out)")
            )
        return sent


def carried_topic_rows(
    rows: Iterable[Any], pipeline: str, has_headers: bool, table: str | None = None
) -> Iterator[dict[str, Any]]:
    """Dead-letter rows (as :func:`~frazil.sink.dead_letters.format.dead_letter_columns` makes
    them) of records carried out of the write's pass
    (:func:`frazil.engine.dead_capture.observed`), for the topic."""
    for row in rows:
        raw = row[5]
        stamp = raw[2]
        yield {
            "key": raw[0],
            "value": raw[1],
            "headers": raw[3] if has_headers else None,
            "topic": row[0],
            "partition": row[1],
            "offset": row[2],
            "timestamp": None
            if stamp is None
            else datetime.fromtimestamp(stamp / 1000, tz=timezone.utc),
            "stage": row[3],
            "reason": row[4],
            "detail": raw[-1],
            "error_class": ERROR_CLASSES.get(row[3], "FrazilError"),
            "pipeline": pipeline,
            "target_table": table,
        }


#: Bytes a record takes in Kafka besides its key, value and headers (record and batch
#: framing), counted generously.
_RECORD_OVERHEAD = 1024
#: Header saying a dead letter's value (or key) was cut to fit the topic: its full length.
TRUNCATED = "value.truncated"
KEY_TRUNCATED = "key.truncated"
#: Header of a dead letter sent without the record's own headers: their total size.
HEADERS_DROPPED = "headers.dropped"


def _fit(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, Any]], limit: int
) -> tuple[bytes | None, bytes | None]:
    """The key and value of a dead letter cut to fit a topic taking records of ``limit``
    bytes: the value first, then the key; each cut part gets a header with its full length
    (added to ``headers``). The full record is in the dead-letter table. Headers of the
    record's own that leave no room for frazil's are dropped (their size in a header)."""
    used = sum(len(k) + len(v or b"") for k, v in headers) + _RECORD_OVERHEAD
    if used + 3 * (len(HEADER_PREFIX) + len(HEADERS_DROPPED) + 12) > limit:
        own = [h for h in headers if not h[0].startswith(HEADER_PREFIX)]
        dropped = sum(len(k) + len(v or b"") for k, v in own)
        headers[:] = [h for h in headers if h[0].startswith(HEADER_PREFIX)]
        note = (f"{HEADER_PREFIX}{HEADERS_DROPPED}", str(dropped).encode())
        headers.append(note)
        used += len(note[0]) + len(note[1]) - dropped
    room = limit - used - 2 * (len(HEADER_PREFIX) + len(KEY_TRUNCATED) + 12)
    size = len(key or b"") + len(value or b"")
    if size <= room:
        return key, value
    if value is not None and len(value) > max(0, room - len(key or b"")):
        keep = max(0, room - len(key or b""))
        headers.append((f"{HEADER_PREFIX}{TRUNCATED}", str(len(value)).encode()))
        value = value[:keep]
    if key is not None and len(key) + len(value or b"") > room:
        headers.append((f"{HEADER_PREFIX}{KEY_TRUNCATED}", str(len(key)).encode()))
        key = key[: max(0, room - len(value or b""))]
    log.warning(
        "a dead letter of %d bytes was cut to fit the dead-letter topic's %d bytes "
        "(max.message.bytes); the dead-letter table, if any, has it whole (%s)",
        size,
        limit,
        _where(headers),
    )
    return key, value


def _where(headers: list[tuple[str, Any]]) -> str:
    """``topic/partition@offset`` of a dead letter, from frazil's headers."""
    found = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in headers if v}
    p = HEADER_PREFIX
    return f"{found.get(p + 'topic')}/{found.get(p + 'partition')}@{found.get(p + 'offset')}"


def _get(row: Row | dict[str, Any], name: str) -> Any:
    """A field of a row that may not have it (rows of an older dead-letter table)."""
    if isinstance(row, dict):
        return row.get(name)
    return row[name] if name in row.__fields__ else None


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _millis(value: Any) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)
