"""Protobuf values, decoded in the JVM by frazil's own Spark UDF (src/frazil/jvm/java).

spark-protobuf is not available from the Maven repository frazil can reach, so frazil ships a
small Java decoder (a direct ``CodedInputStream`` walk into Spark rows, on protobuf-java)
compiled once at setup. One UDF instance knows every writer schema met so far and picks each
record's by its schema id; it fills the reader shape by field name, so several schema
versions decode into one shape. The type mapping is the Java side's (``ProtobufTypes``): the
plan asks it for the reader shape, so the two cannot disagree.

Schemas come from a ``schema_file`` (``.proto``, compiled with protoc from grpcio-tools; or a
``.desc``/``.pb`` descriptor set) with ``message``, for plain Protobuf; or from the Schema
Registry, for its wire format (magic byte, schema id, message indexes): each schema's
``.proto`` text (or base64 descriptor) and its references are compiled the same way
(:mod:`frazil.decode.protobuf_schemas`).
"""

from __future__ import annotations

import itertools
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.decode import connect_types, wire
from frazil.decode.connect_types import Semantics
from frazil.decode.errors import decode_error, hex_prefix
from frazil.decode.protobuf_schemas import (
    Descriptors,
    compile_registered,
    load_file,
    message_names,
    only_message,
    same_message,
)
from frazil.decode.registry import BuildContext, Decoded, Format, register
from frazil.decode.schema_registry import RegisteredSchema, SchemaRegistry
from frazil.errors import ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

_DECODER_CLASS = "dev.frazil.spark.ProtobufDecoder"
#: How the mark of a record of a message the reader does not read ends
#: (``ProtobufDecoder.ANOTHER_MESSAGE``): a routed pipeline learns that message from it.
ANOTHER_MESSAGE = "another message type"
#: That mark's text: "schema id 7: a message 'shop.Sale' where the reader reads 'web.Click':
#: another message type".
_OTHER_MESSAGE = re.compile(r"schema id (\d+): a message '([^']+)' where the reader reads ")
_names = itertools.count()


def _jvm_decoders(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm


def spark_schema(spark: SparkSession, compiled: Descriptors, message: str | None) -> StructType:
    """The reader shape of ``message`` (the root file's first message if None), from the JVM.

    The mapping lives in one place, the Java decoder's (``ProtobufTypes``), so the plan's
    schema and the decoded rows cannot disagree.

    Raises:
        ValueError: No such message; the message lists the file's messages.
    """
    import json

    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import StructType

    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(compiled.data)
    root = next(f for f in files.file if f.name == compiled.root)
    names = message_names(root)
    if (message is None and not root.message_type) or (
        message is not None and message not in names
    ):
        raise ValueError(
            f"no message {message!r} in {compiled.root} (messages: {', '.join(names) or 'none'})"
        )
    helper = getattr(_jvm_decoders(spark).dev.frazil.spark, "ProtobufDecoder$Descriptors")
    text = helper.sparkSchemaJson(compiled.data, compiled.root, message)
    return StructType.fromJson(json.loads(text))


def _register(
    spark: SparkSession, decoder: Any, reader: StructType, also: SparkSession | None = None
) -> str:
    """Register a Java decoder instance as a session UDF; returns its name.

    ``also``: a second session to register it in. A streaming query runs its batches in a
    clone of the session made when it started, which does not see UDFs registered later in
    the original: a decoder that learns mid-run registers in both.
    """
    result = (
        f'{{"type":"struct","fields":[{{"name":"data","type":{reader.json()},"nullable":true,'
        '"metadata":{}},{"name":"error","type":"string","nullable":true,"metadata":{}}]}'
    )
    name = f"frazil_protobuf_{next(_names)}_{uuid.uuid4().hex[:6]}"
    for session in (spark, also):
        if session is not None:
            jsession = session._jsparkSession
            jsession.udf().register(name, decoder, jsession.parseDataType(result))
    return name


def plain_udf(spark: SparkSession, compiled: Descriptors, message: str, reader: StructType) -> str:
    """The UDF decoding plain ``message`` values into ``reader``."""
    java = _jvm_decoders(spark).dev.frazil.spark.ProtobufDecoder
    return _register(spark, java(compiled.data, compiled.root, message, reader.json()), reader)


def wire_udf(
    spark: SparkSession,
    writers: dict[int, Descriptors],
    reader: StructType,
    registry_url: str,
    also: SparkSession | None = None,
    *,
    messages: tuple[str, ...],
) -> str:
    """One UDF decoding the wire format of every known writer id into ``reader``.

    One instance for all ids (it picks the writer by the value's id) so that each record is
    decoded by a single call: a ``CASE`` over one UDF per id made Spark call the UDF once per
    column it feeds. ``messages``: the full names of the messages it reads; a record of
    another is marked (:data:`ANOTHER_MESSAGE`).
    """
    jvm = _jvm_decoders(spark)
    ids = sorted(writers)
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    java_ids = gateway.new_array(jvm.int, len(ids))
    byte_arrays = gateway.new_array(jvm.byte, len(ids), 0)
    roots = gateway.new_array(jvm.java.lang.String, len(ids))
    for i, schema_id in enumerate(ids):
        java_ids[i] = schema_id
        byte_arrays[i] = writers[schema_id].data
        roots[i] = writers[schema_id].root
    names = gateway.new_array(jvm.java.lang.String, len(messages))
    for i, name in enumerate(messages):
        names[i] = name
    java = jvm.dev.frazil.spark.ProtobufDecoder
    decoder = java(java_ids, byte_arrays, roots, reader.json(), registry_url, names)
    return _register(spark, decoder, reader, also)


@dataclass
class ProtobufDecoder:
    """Decodes Protobuf values (plain or wire format) into one reader shape.

    Attributes:
        spark: The session the UDFs are registered in.
        schema: The reader shape.
        message: The message's full name (plain), or the reader's message (registry).
        udf: The UDF decoding every known writer (or the plain message).
        registry: The schema registry (wire format).
        writers: The compiled schema of each known writer id (wire format).
    """

    spark: SparkSession
    schema: StructType
    message: str | None
    udf: str = ""
    registry: SchemaRegistry | None = None
    writers: dict[int, Descriptors] = field(default_factory=dict)
    #: Whether a newer writer with fields the reader lacks becomes the reader
    #: (``schema_evolution: evolve``).
    evolve: bool = False
    #: Whether a record of another message is read as its own, that message's fields joining
    #: the shape (a routed pipeline: topics of different messages), rather than marked.
    learns_record_types: bool = False
    #: The other messages read so far (full names), besides :attr:`message`.
    others: list[str] = field(default_factory=list)

    @property
    def scalar(self) -> bool:
        """A message decodes into a struct."""
        return False

    @property
    def messages(self) -> tuple[str, ...]:
        """The full names of the messages read: records of any other are marked."""
        return tuple(n for n in (self.message, *self.others) if n is not None)

    def version(self) -> object:
        """The UDF in use: a new one is registered when writers are learned."""
        return self.udf

    def add_writers(
        self, schemas: list[RegisteredSchema], batch_session: SparkSession | None = None
    ) -> bool:
        """Compile writer schemas and register a UDF knowing them; False if none compiled.

        ``batch_session``: the session of the streaming batch being decoded (see
        :func:`_register`).
        """
        assert self.registry is not None
        added = False
        for schema in schemas:
            if schema.schema_type != "PROTOBUF" or schema.schema_id in self.writers:
                continue
            try:
                self.writers[schema.schema_id] = compile_registered(self.registry, schema)
            except ValueError as exc:
                # Its records stay marked as of an unknown schema id: say why it is unknown.
                log.warning(
                    "schema id %s (%s) does not compile, so its records are marked as of an"
                    " unknown schema id: %s",
                    schema.schema_id,
                    schema.subject or "no subject",
                    exc,
                )
                continue
            added = True
        if added or not self.udf:
            self._register(batch_session)
        return added

    def _register(self, batch_session: SparkSession | None) -> None:
        assert self.registry is not None
        self.udf = wire_udf(
            self.spark,
            self.writers,
            self.schema,
            self.registry.url,
            batch_session,
            messages=self.messages,
        )

    def semantics(self) -> Semantics:
        """Protobuf carries no Kafka Connect semantic types."""
        return connect_types.NONE

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Fetch and compile the writer schemas of the batch's ids not known yet; in a routed
        pipeline, take in the other messages its records are (their fields join the shape);
        under ``evolve``, the fields newer writers add to the messages read."""
        if self.registry is None:
            return False
        found = []
        for schema_id in sorted(wire.ids_in(raw, column) - set(self.writers)):
            schema = self.registry.by_id(schema_id)
            if schema is not None:
                found.append(schema)
        session = raw.sparkSession
        added = self.add_writers(found, session)
        taken = self._other_messages(raw, column) if self.learns_record_types else []
        from frazil.decode.shapes import merge_fields

        merged = self.schema
        for schema_id, name in taken:
            merged = merge_fields(merged, spark_schema(self.spark, self.writers[schema_id], name))
        if added and self.evolve:
            for schema in sorted(found, key=lambda f: f.schema_id):
                for name in self.messages:
                    if schema.schema_id not in self.writers:
                        continue
                    try:
                        shape = spark_schema(self.spark, self.writers[schema.schema_id], name)
                    except ValueError:
                        continue  # the message is not in that writer: nothing to take from it
                    merged = merge_fields(merged, shape)
        if merged != self.schema or taken:
            # The new fields join the reader (at any depth): fields match by name, so older
            # writers decode into it with the new fields null.
            self.schema = merged
            self._register(session)
        return added or bool(taken)

    def _other_messages(self, raw: DataFrame, column: str) -> list[tuple[int, str]]:
        """The batch's records' messages the decoder does not read yet, each with a writer
        id that has it (its records' marks name both), now read too."""
        from pyspark.sql import functions as F

        error = F.call_function(self.udf, F.col(column))["error"]
        marks = raw.select(error.alias("e")).where(F.col("e").endswith(ANOTHER_MESSAGE))
        taken: dict[str, int] = {}
        for row in marks.distinct().collect():
            found = _OTHER_MESSAGE.match(row["e"])
            if found is not None:
                taken.setdefault(found.group(2), int(found.group(1)))
        self.others.extend(sorted(taken))
        return [(schema_id, name) for name, schema_id in sorted(taken.items())]

    def decode(self, data: Column) -> Decoded:
        """The decoded struct, and the mark of records that do not decode."""
        from pyspark.sql import functions as F

        result = F.call_function(self.udf, data)
        error = F.when(result["error"].isNotNull(), decode_error(result["error"], hex_prefix(data)))
        return Decoded(value=result["data"], error=error.cast(c.ERROR_DDL))


def _build(context: BuildContext) -> ProtobufDecoder:
    spark = context.spark
    message = context.decoding.message
    schema_file = context.decoding.schema_file
    if schema_file is not None:
        key = context.config_key("schema_file")
        compiled = load_file(Path(schema_file), message, key, context.config_key("message"))
        try:
            reader = spark_schema(spark, compiled, message)
        except ValueError as exc:
            raise ConfigError(f"{context.config_key('message')}: {exc}") from None
        assert message is not None
        return ProtobufDecoder(
            spark, reader, message, udf=plain_udf(spark, compiled, message, reader)
        )
    found = wire.subject_schemas(context, "PROTOBUF", "Protobuf", all_versions=True)
    registry, versions, latest, subject = (
        found.registry,
        found.versions,
        found.latest,
        found.subject,
    )
    try:
        compiled = compile_registered(registry, latest)
        message = message or only_message(compiled, context.config_key("message"))
        reader = spark_schema(spark, compiled, message)
    except ValueError as exc:
        raise ConfigError(
            f"{context.key_path}: subject {subject!r} version {latest.version}: {exc}"
        ) from None
    decoder = ProtobufDecoder(
        spark,
        reader,
        message,
        registry=registry,
        evolve=context.pipeline.defaults.schema_evolution == "evolve" and context.part == "value",
        # Routed: topics of different messages (a subject each) go to tables of their own.
        learns_record_types=context.pipeline.route is not None,
    )
    decoder.writers[latest.schema_id] = compiled
    decoder.add_writers([v for v in versions if v.schema_id != latest.schema_id])
    if decoder.evolve:
        _keep_dropped(decoder, latest.schema_id)
    # The subject's older versions' own message, where a version renamed its package: still
    # the records' message, read by field name (another topic's message is not).
    renamed = {same_message(w, message) for w in decoder.writers.values()} - {None, message}
    if renamed:
        decoder.others = sorted(n for n in renamed if n is not None)
        decoder._register(None)
    return decoder


def _keep_dropped(decoder: ProtobufDecoder, latest: int) -> None:
    """The subject's older versions' fields the newest dropped join the reader (at any depth),
    newest first: their records, still in the topic, keep those values, as Avro's reader and a
    table's columns keep them; the newest version's records read them as null."""
    from frazil.decode.shapes import merge_fields

    assert decoder.message is not None
    merged = decoder.schema
    for schema_id in sorted(decoder.writers, reverse=True):
        name = same_message(decoder.writers[schema_id], decoder.message)
        if schema_id == latest or name is None:
            continue
        try:
            merged = merge_fields(
                merged, spark_schema(decoder.spark, decoder.writers[schema_id], name)
            )
        except ValueError:
            continue  # not a message of that writer: nothing to keep from it
    if merged != decoder.schema:
        decoder.schema = merged
        decoder._register(None)


register(Format(name="protobuf", build=_build))
