"""Produce records the way Confluent's clients do: confluent-kafka's own serializers.

Every helper serializes with confluent-kafka's Schema Registry serializers (AvroSerializer,
JSONSerializer, ProtobufSerializer) against a real registry, normally the session's local
Apicurio (the ``schema_registry_url`` fixture), so records carry the registry wire format
(magic byte 0, the 4-byte schema id, [protobuf message indexes], the payload) and the schemas
land under the TopicNameStrategy subjects ``<topic>-value`` and ``<topic>-key``.

Records go to partition ``n % partitions`` in order, so tests know where each one is.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from frazil.errors import KafkaError
from frazil.generate.producer import ensure_topic

#: Turns one record into its key (None: no key).
KeyOf = Callable[[Any], Any]
#: A confluent-kafka serializer: (object, context) -> bytes.
Serialize = Callable[[Any, SerializationContext], bytes | None]


@dataclass(frozen=True)
class Produced:
    """What a ``produce_*`` helper wrote.

    Attributes:
        count: Records produced.
        value_schema_id: The schema id in the values' header (None without records).
        key_schema_id: The schema id in the keys' header, if keys were serialized with a
            schema.
        values: The serialized values, in order (wire format, as written to Kafka).
    """

    count: int
    value_schema_id: int | None
    key_schema_id: int | None
    values: list[bytes]


def registry_client(registry_url: str, **conf: Any) -> SchemaRegistryClient:
    """A new client of the registry.

    A new one, not a shared one: the client caches schemas by id whatever ``fmt`` was
    asked, so only a client that has not seen an id shows what the registry answers for it.
    """
    return SchemaRegistryClient({"url": registry_url, **conf})


def schema_id_of(data: bytes) -> int:
    """The schema id in a wire-format record (after the magic byte)."""
    if len(data) < 5 or data[0] != 0:
        raise ValueError(f"not in the registry wire format: {data[:8]!r}")
    return int.from_bytes(data[1:5], "big")


def register_schema(
    registry_url: str,
    subject: str,
    schema_str: str,
    schema_type: str = "AVRO",
    references: Sequence[SchemaReference] = (),
) -> RegisteredSchema:
    """Register ``schema_str`` as a version of ``subject`` (or find the version it already is).

    Args:
        registry_url: The registry's Confluent-compatible URL.
        subject: The subject, e.g. ``orders-value``.
        schema_str: The schema text (Avro JSON, JSON Schema, ``.proto`` text ...).
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF``.
        references: Schemas it imports, e.g. ``SchemaReference("money.proto",
            "money.proto", 1)`` (name as imported, subject, version).

    Returns:
        The registered version: ``schema_id``, ``subject`` and ``version``.
    """
    client = registry_client(registry_url)
    schema = Schema(schema_str, schema_type, list(references))
    schema_id = client.register_schema(subject, schema)
    # The registration answer holds the id only (Apicurio, like older Confluent
    # registries); the version comes from a lookup.
    found = client.lookup_schema(subject, schema)
    if found.schema_id != schema_id:
        raise AssertionError(f"{subject}: registered id {schema_id}, lookup says {found}")
    return found


def produce_avro(
    bootstrap: str,
    registry_url: str,
    topic: str,
    schema_str: str | Schema | None,
    records: Iterable[Mapping[str, Any] | None],
    key: KeyOf | None = None,
    *,
    key_schema_str: str | None = None,
    partitions: int = 1,
    serializer_conf: Mapping[str, Any] | None = None,
) -> Produced:
    """Produce ``records`` (dicts) as Avro with confluent-kafka's ``AvroSerializer``.

    The serializer registers ``schema_str`` under ``<topic>-value`` on first use
    (``auto.register.schemas``), or finds its id if registered already.

    Args:
        bootstrap: Kafka bootstrap address.
        registry_url: The registry's Confluent-compatible URL.
        topic: Created with ``partitions`` partitions if missing.
        schema_str: The values' Avro schema (JSON text), or a ``Schema`` with references
            (the named types it uses from other subjects), or None with
            ``serializer_conf={"use.latest.version": True, "auto.register.schemas": False}``
            to write with the subject's latest version.
        records: The values; None produces a tombstone (null value).
        key: Gives each record's key; without ``key_schema_str`` the key is sent as is
            (``str`` as UTF-8, ``bytes``, or None).
        key_schema_str: Serialize keys with ``AvroSerializer`` and this schema
            (``<topic>-key``).
        partitions: Partition count of a new topic; record ``n`` goes to ``n % partitions``.
        serializer_conf: Extra ``AvroSerializer`` settings (for values and keys).

    Returns:
        What was written, with the schema ids.
    """
    client = registry_client(registry_url)
    conf = dict(serializer_conf or {})
    value = AvroSerializer(client, schema_str, conf=conf)
    key_serializer = AvroSerializer(client, key_schema_str, conf=conf) if key_schema_str else None
    return produce_serialized(
        bootstrap, topic, records, value, key, key_serializer, partitions=partitions
    )


def produce_json_schema(
    bootstrap: str,
    registry_url: str,
    topic: str,
    schema_str: str | Schema | None,
    records: Iterable[Mapping[str, Any] | None],
    key: KeyOf | None = None,
    *,
    key_schema_str: str | None = None,
    partitions: int = 1,
    serializer_conf: Mapping[str, Any] | None = None,
) -> Produced:
    """Produce ``records`` as JSON with confluent-kafka's JSON Schema ``JSONSerializer``.

    The serializer validates every record against ``schema_str`` (a record that does not
    match raises ``SerializationError`` before anything of it is sent) and registers the
    schema under ``<topic>-value``. Arguments as for :func:`produce_avro`.
    """
    client = registry_client(registry_url)
    conf = dict(serializer_conf or {})
    value = JSONSerializer(schema_str, client, conf=conf)
    key_serializer = JSONSerializer(key_schema_str, client, conf=conf) if key_schema_str else None
    return produce_serialized(
        bootstrap, topic, records, value, key, key_serializer, partitions=partitions
    )


def produce_protobuf(
    bootstrap: str,
    registry_url: str,
    topic: str,
    messages: Sequence[Any],
    key: KeyOf | None = None,
    *,
    partitions: int = 1,
    serializer_conf: Mapping[str, Any] | None = None,
) -> Produced:
    """Produce protobuf ``messages`` (all of one class) with ``ProtobufSerializer``.

    The serializer registers the message's ``.proto`` file under ``<topic>-value`` and each
    file it imports under the file's name (its references), except protobuf's well-known
    types (``google/protobuf/*.proto``), which it leaves out. Arguments as for
    :func:`produce_avro`; keys are sent as is.
    """
    if not messages:
        raise ValueError("produce_protobuf needs at least one message (it takes their class)")
    conf = {"use.deprecated.format": False, **(serializer_conf or {})}
    value = ProtobufSerializer(type(messages[0]), registry_client(registry_url), conf)
    return produce_serialized(bootstrap, topic, messages, value, key, None, partitions=partitions)


def produce_serialized(
    bootstrap: str,
    topic: str,
    records: Iterable[Any],
    value_serializer: Serialize,
    key: KeyOf | None = None,
    key_serializer: Serialize | None = None,
    *,
    partitions: int = 1,
) -> Produced:
    """Produce ``records`` through any confluent-kafka serializer; see :func:`produce_avro`.

    Raises:
        KafkaError: If a record could not be delivered.
    """
    ensure_topic(bootstrap, topic, partitions=partitions)
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"partition {msg.partition()}: {err}")

    values: list[bytes] = []
    value_ids: set[int] = set()
    key_ids: set[int] = set()
    count = 0
    for n, record in enumerate(records):
        data = value_serializer(record, value_ctx) if record is not None else None
        if data is not None:
            values.append(data)
            value_ids.add(schema_id_of(data))
        raw_key = key(record) if key is not None else None
        if key_serializer is not None and raw_key is not None:
            key_bytes = key_serializer(raw_key, key_ctx)
            if key_bytes is not None:
                key_ids.add(schema_id_of(key_bytes))
        else:
            key_bytes = raw_key.encode() if isinstance(raw_key, str) else raw_key
        producer.produce(
            topic, key=key_bytes, value=data, partition=n % partitions, on_delivery=on_delivery
        )
        count += 1
    remaining = producer.flush(30)
    if remaining or failures:
        raise KafkaError(
            f"producing to {topic}: {remaining} record(s) not delivered; " + "; ".join(failures[:5])
        )
    return Produced(count, _one(value_ids, "value"), _one(key_ids, "key"), values)


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[Any]:
    """The first ``count`` records of ``topic`` (confluent-kafka ``Message`` objects).

    Reads every partition from its start, in partition order; no consumer group (assigned,
    not subscribed: no rebalance to wait for).

    Raises:
        AssertionError: If fewer than ``count`` arrive within ``timeout`` seconds.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"registry-helpers-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    messages: list[Any] = []
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    if len(messages) < count:
        raise AssertionError(f"{topic}: {len(messages)} of {count} records within {timeout}s")
    return sorted(messages, key=lambda m: (m.partition(), m.offset()))


def protobuf_classes(proto_files: Sequence[Path], include: Sequence[Path] = ()) -> dict[str, Any]:
    """Python message classes of ``.proto`` files, compiled with grpcio-tools' protoc.

    Built in a descriptor pool of their own (not protobuf's process-wide default pool), so
    tests may compile files of the same name with different contents.

    Args:
        proto_files: The files; their folders and ``include`` are the import paths, as are
            protoc's well-known types (``google/protobuf/timestamp.proto`` ...).
        include: More import folders.

    Returns:
        Message class by full name (``package.Message``), nested messages included.
    """
    import grpc_tools
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    folders = dict.fromkeys([*(p.parent for p in proto_files), *include, well_known])
    with tempfile.TemporaryDirectory(prefix="frazil-proto-") as work:
        out = Path(work) / "set.pb"
        done = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", *(f"-I{f}" for f in folders),
             "--include_imports", f"--descriptor_set_out={out}",
             *(str(p) for p in proto_files)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"protoc failed on {list(proto_files)}:\n{done.stderr}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    classes: dict[str, Any] = {}

    def add(descriptor: Any) -> None:
        classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
        for nested in descriptor.nested_types:
            add(nested)

    for file in files.file:
        for message in pool.FindFileByName(file.name).message_types_by_name.values():
            add(message)
    return classes


def _one(ids: set[int], what: str) -> int | None:
    if len(ids) > 1:
        raise AssertionError(f"one serializer wrote {what}s with several schema ids: {ids}")
    return next(iter(ids), None)
