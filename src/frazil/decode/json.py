"""JSON values, decoded in the JVM: by frazil's own decoder or by Spark's ``from_json``.

``json_decoder: frazil`` decodes with ``dev.frazil.spark.JsonDecoder`` (src/frazil/jvm/java):
one pass of Jackson's byte parser over the value into the schema's row, with a reason for
each record that does not decode. ``json_decoder: spark`` decodes with ``from_json``, the
reasons worked out from Spark's expressions for the records it could not read. Both read the
same values into the same rows (tests compare them on every type); a schema with a type the
frazil decoder does not read (intervals, variants) is decoded by ``from_json``.

The schema is declared (``schema:``), read from a JSON Schema (``schema_file`` or the
registry's ``subject``), or inferred from a sample of the topics (declared and inferred
schemas: :mod:`frazil.decode.json_infer`). Values in the Schema
Registry wire format (confluent-kafka's ``JSONSerializer``: magic byte 0 and a 4-byte schema
id before the document) decode the same as plain JSON: a JSON document never starts with a
zero byte, so the header is recognised and skipped whatever the schema source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.decoding import DEFAULT_JSON_DECODER, JsonDecoderName
from frazil.decode import connect_types, variant, variant_rest, wire
from frazil.decode.connect_types import Semantics
from frazil.decode.errors import EMPTY, decode_error
from frazil.decode.json_infer import INFER_SAMPLE, infer_schema, json_text, schema_from_fields
from frazil.decode.json_reasons import mismatch_reason, unknown_fields
from frazil.decode.json_schema import json_schema_to_spark
from frazil.decode.registry import BuildContext, Decoded, Decoder, Format, register
from frazil.decode.shapes import in_record_order, merge_fields
from frazil.errors import ConfigError
from frazil.jvm.columns import jvm_column
from frazil.source.kafka import sample_topics

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

#: The decoder's corrupt-record field inside the parsed struct (never a column of the batch).
_CORRUPT = c.JSON_CORRUPT
#: Characters of a bad value quoted in its error detail.
_QUOTED_CHARS = 200
#: Records sampled for a Debezium envelope's embedded Connect schema (its semantic types),
#: and for a wrapped key's: spread over the partitions, at least CONNECT_SAMPLE_EACH from each.
CONNECT_SAMPLE = 20
CONNECT_SAMPLE_EACH = 5
#: Reason of a record holding fields the (inferred) schema does not have yet; the decoder
#: learns them from the batch (:meth:`JsonDecoder.learn`).
NEW_FIELDS = "fields not in the schema yet"
#: Records sampled from a batch to learn new fields from.
LEARN_SAMPLE = 10_000
#: Reason of a Debezium envelope whose embedded Connect schema was not met yet; the decoder
#: learns it from the batch (:meth:`JsonDecoder.learn`).
NEW_SCHEMA = "an embedded Connect schema not met yet"
#: New embedded schemas taken in from one batch at a time.
SCHEMAS_LEARNED = 100


@dataclass
class JsonDecoder:
    """Decodes JSON objects into ``schema``'s fields.

    A value that is not a JSON object (malformed, an array, a string, a number, ``null``,
    empty) or whose fields do not convert to the declared types is marked with stage
    ``decode``; a null value (a tombstone) is not an error.

    Attributes:
        schema: The fields decoded.
        timestamp_format: The format of timestamp strings, if not ISO-8601.
        evolving: The schema was inferred and may grow: a record with a field the schema
            does not have (at any depth: structs, list elements, map values) is marked, and
            :meth:`learn` adds the batch's new fields before the batch is planned again.
        strict: Fields the schema does not have are errors (``schema_evolution: freeze``).
    """

    schema: StructType
    timestamp_format: str | None = None
    evolving: bool = False
    strict: bool = False
    #: The Debezium envelopes' embedded Connect schemas (JSON text) met so far, the first
    #: sampled when the pipeline started: their semantic types map the row's fields
    #: (:mod:`frazil.decode.connect_types`).
    connect_schemas: tuple[str, ...] = ()
    #: Each envelope's embedded schema is checked against those met (by its hash): a new one
    #: is learned from (its columns, in their types), one Connect cannot read is a dead
    #: letter with the reason in :attr:`bad_schemas`.
    watch_schemas: bool = False
    known_schemas: frozenset[int] = frozenset()
    bad_schemas: dict[int, str] = dataclass_field(default_factory=dict)
    #: ``frazil`` (frazil's JVM decoder) or ``spark`` (``from_json``).
    engine: JsonDecoderName = DEFAULT_JSON_DECODER
    #: Routed, with a shape that grows while running: a table whose records come later (a
    #: source table added, a pattern's new topic) brings columns unknown at the start.
    learns_record_types: bool = False
    #: What the start found that a dry run should say: sampled envelopes whose embedded
    #: schema Connect cannot read (their columns are not in the shape).
    start_notes: tuple[str, ...] = ()
    _version: int = 0

    @property
    def scalar(self) -> bool:
        """JSON objects decode into a struct."""
        return False

    def version(self) -> object:
        """Grows with each learned shape."""
        return self._version

    def semantics(self) -> Semantics:
        """The semantic types the envelopes' embedded Connect schemas met so far state."""
        if not self.connect_schemas:
            return connect_types.NONE
        return connect_types.from_connect_schemas([json.loads(t) for t in self.connect_schemas])

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Add the fields of the batch's records that the schema does not have yet."""
        from pyspark.sql import functions as F

        if self.watch_schemas and self._learn_schemas(raw, column):
            return True
        if not self.evolving:
            return False
        text = json_text(F.col(column))
        wanted = F.col(column).isNotNull() & unknown_fields(text, self.schema)
        if self.watch_schemas:
            # Fields are learned from envelopes whose schema Connect reads, in its types;
            # a malformed one's row must not add columns on its way to the dead letters.
            embedded = self.embedded_schema(F.col(column))
            wanted &= embedded.isNull() | F.xxhash64(embedded).isin(*self.known_schemas)
        values = [r[0] for r in raw.where(wanted).select(text).limit(LEARN_SAMPLE).collect()]
        if not values:
            return False
        spark = raw.sparkSession
        options = {"inferTimestamp": "true", "prefersDecimal": "false"}
        if self.timestamp_format:
            options["timestampFormat"] = self.timestamp_format
        found = spark.read.options(**options).json(spark.sparkContext.parallelize(values, 1))
        merged = merge_fields(self.schema, in_record_order(found.schema, values))
        if merged == self.schema:
            return False
        self.schema = merged
        self._version += 1
        return True

    def _learn_schemas(self, raw: DataFrame, column: str) -> bool:
        """Take in the embedded Connect schemas of the batch not met yet: the columns of one
        Connect reads are added (with :attr:`evolving`), one it cannot read is remembered
        with the reason. Returns whether any was new."""
        from pyspark.sql import functions as F

        from frazil.decode.debezium import read_envelope

        text = self.embedded_schema(F.col(column))
        digest = F.xxhash64(text)
        met = [*self.known_schemas, *self.bad_schemas]
        new = (
            raw.where(F.col(column).isNotNull() & text.isNotNull() & ~digest.isin(met))
            .select(digest.alias("digest"), text.alias("text"))
            .dropDuplicates(["digest"])
            .limit(SCHEMAS_LEARNED)
            .collect()
        )
        if not new:
            return False
        known, accepted, bad = set(self.known_schemas), list(self.connect_schemas), {}
        schema = self.schema
        for row in new:
            try:
                found = read_envelope(json.loads(row["text"]))
            except ValueError:
                found = read_envelope(row["text"])
            if isinstance(found, str):
                bad[int(row["digest"])] = found
                continue
            known.add(int(row["digest"]))
            accepted.append(row["text"])
            if self.evolving:
                schema = merge_fields(schema, found)
        self.known_schemas = frozenset(known)
        self.connect_schemas = tuple(accepted)
        self.bad_schemas = {**self.bad_schemas, **bad}
        self.schema = schema
        self._version += 1
        return True

    def decode(self, data: Column) -> Decoded:
        """The parsed struct, and the mark of records that do not decode."""
        decoded = self._decode_unchecked(data)
        return self._check_schemas(decoded) if self.watch_schemas else decoded

    def _decode_unchecked(self, data: Column) -> Decoded:
        if self.engine == "frazil" and frazil_reads(self.schema):
            return self._decode_frazil(data)
        return self._decode_spark(data)

    def embedded_schema(self, data: Column) -> Column:
        """The embedded ``schema`` of a ``{schema, payload}`` value as this decoder writes
        it when it decodes the value (an object read as text): the text each record's schema
        is checked by, so that what is learned and what is checked hash alike."""
        decoded = self._decode_unchecked(data)
        assert decoded.fields is not None
        return decoded.fields["schema"]

    def _check_schemas(self, decoded: Decoded) -> Decoded:
        """Marks envelopes whose embedded schema was not met yet (to learn from) or that
        Connect cannot read (dead letters)."""
        from pyspark.sql import functions as F

        assert decoded.fields is not None
        text = decoded.fields["schema"]
        digest = F.xxhash64(text)
        detail = F.substring(text, 1, _QUOTED_CHARS)
        check = F.when(text.isNull() | digest.isin(*self.known_schemas), F.lit(None))
        for key, reason in self.bad_schemas.items():
            check = check.when(digest == F.lit(key), decode_error(F.lit(reason), detail))
        check = check.otherwise(decode_error(F.lit(NEW_SCHEMA), detail))
        # The schema's verdict comes first: a new schema is learned before the row is judged
        # by it (its new fields, its types), a malformed one is the record's reason.
        error = F.coalesce(check.cast(c.ERROR_DDL), decoded.error)
        return Decoded(value=decoded.value, error=error, fields=decoded.fields)

    def _unknown_reason(self) -> str | None:
        if self.strict:
            return "fields not in the table's schema (schema_evolution: freeze)"
        return NEW_FIELDS if self.evolving else None

    def _decode_frazil(self, data: Column) -> Decoded:
        """Decoded by frazil's JVM decoder: one call per record gives the row and a reason."""
        from pyspark.sql import functions as F

        result = frazil_column(data, self.schema, self.timestamp_format, self._unknown_reason())
        reason = result["error"]
        detail = F.when(reason == F.lit(EMPTY), F.lit("")).otherwise(
            F.substring(json_text(data), 1, _QUOTED_CHARS)
        )
        error = F.when(reason.isNotNull(), decode_error(reason, detail))
        decoded = result["data"]
        fields = {f.name: decoded[f.name] for f in self.schema.fields}
        return Decoded(value=decoded, error=error.cast(c.ERROR_DDL), fields=fields)

    def _decode_spark(self, data: Column) -> Decoded:
        """Decoded by Spark's ``from_json``."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        with_corrupt = StructType([*self.schema.fields, StructField(_CORRUPT, StringType())])
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
        if self.timestamp_format:
            options["timestampFormat"] = self.timestamp_format
        text = json_text(data)
        parsed = F.from_json(text, with_corrupt, options)
        corrupt = parsed[_CORRUPT]
        # Only evaluated for bad records: tells a broken document from a type mismatch.
        is_object = F.from_json(text, "map<string,string>").isNotNull()
        reason = F.when(is_object, mismatch_reason(text, parsed, self.schema)).otherwise(
            F.lit("not a JSON object (malformed JSON, an array, a string, a number or null)")
        )
        error = (
            F.when(data.isNull(), F.lit(None))
            .when(parsed.isNull(), decode_error(F.lit(EMPTY), F.lit("")))
            .when(
                corrupt.isNotNull(),
                decode_error(reason, F.substring(corrupt, 1, _QUOTED_CHARS)),
            )
        )
        if self.evolving or self.strict:
            why = (
                "fields not in the table's schema (schema_evolution: freeze)"
                if self.strict
                else NEW_FIELDS
            )
            error = error.when(
                unknown_fields(text, self.schema),
                decode_error(F.lit(why), F.substring(text, 1, _QUOTED_CHARS)),
            )
        # A null key or value (tombstone) decodes to null, not to a struct of nulls.
        value = F.when(
            data.isNotNull(), F.struct(*[parsed[f.name].alias(f.name) for f in self.schema.fields])
        )
        fields = {f.name: parsed[f.name] for f in self.schema.fields}
        return Decoded(value=value, error=error.cast(c.ERROR_DDL), fields=fields)


_DECODER_CLASS = "dev.frazil.spark.JsonDecoder"
#: Spark types frazil's JVM decoder reads (others fall back to ``from_json``).
_READ_TYPES = (
    "string", "bigint", "int", "smallint", "tinyint", "double", "float", "boolean",
    "timestamp", "timestamp_ntz", "date", "binary",
)  # fmt: skip


def frazil_reads(data_type: DataType) -> bool:
    """Whether frazil's JVM decoder reads every type of ``data_type`` (structs, arrays, maps
    of string keys, decimals and the scalar types of :data:`_READ_TYPES`)."""
    from pyspark.sql.types import ArrayType, DecimalType, MapType, StringType, StructType

    if isinstance(data_type, StructType):
        return all(frazil_reads(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return frazil_reads(data_type.elementType)
    if isinstance(data_type, MapType):
        return isinstance(data_type.keyType, StringType) and frazil_reads(data_type.valueType)
    if isinstance(data_type, DecimalType):
        return True
    return str(data_type.simpleString()) in _READ_TYPES


def frazil_column(
    data: Column, schema: StructType, timestamp_format: str | None, unknown: str | None
) -> Column:
    """``struct<data: schema, error: string>`` of frazil's JVM decoder over ``data``.

    The decoder is a Catalyst expression of its own (``dev.frazil.spark.JsonDecoder``), not a
    UDF registered by name: the column works in any session, a streaming query's clone
    included, and it writes Spark's internal rows directly. The session's time zone is read
    once here; the decoder resolves it once per task.
    """
    from pyspark.sql import SparkSession

    zone = SparkSession.active().conf.get("spark.sql.session.timeZone") or "UTC"
    return jvm_column(
        "dev.frazil.spark.JsonDecoder",
        "column",
        data,
        schema.json(),
        timestamp_format,
        zone,
        unknown,
    )


def _build(context: BuildContext) -> Decoder:
    part = context.decoding
    if part.variant is not None:
        whole = variant.build(context)
        if part.schema_ is None:
            # Landed whole: no schema to read, infer or learn.
            return whole
        engine, timestamp_format = context.pipeline.value.json_decoder, part.timestamp_format

        def reader(schema: StructType, strict: bool) -> Decoder:
            return JsonDecoder(schema, timestamp_format, strict=strict, engine=engine)

        return variant_rest.TypedRestDecoder(
            schema_from_fields(part.schema_), part.variant, whole, reader
        )
    if context.part == "key" and part.source() == "inferred" and context.batch_options:
        from frazil.decode import connect_key

        # Keys of Connect's JSON converter with schemas.enable: the key is the payload.
        wrapped = connect_key.wrapped_key_schemas(_sampled(context, "key"))
        if wrapped:
            engine = context.pipeline.value.json_decoder
            return connect_key.build(wrapped, JsonDecoder, engine=engine)
    connect: list[tuple[Any, bytes]] = []
    unread: list[str] = []
    if context.pipeline.defaults.write.debezium and context.part == "value":
        connect, unread = _connect_schemas(context)
    decoder, watched = _build_decoder(context, [schema for schema, _ in connect])
    decoder.start_notes = tuple(
        f"a sampled Debezium envelope's embedded schema is not one Kafka Connect reads "
        f"({reason}): its records go to the dead-letter queue with that reason, and its "
        "columns are not among the columns shown"
        for reason in unread
    )
    if connect:
        decoder.connect_schemas = tuple(json.dumps(schema) for schema, _ in connect)
        if watched:
            # Each envelope's embedded schema is checked against those met, hashed as the
            # decoder writes it.
            decoder.watch_schemas = True
            values = [value for _, value in connect]
            decoder.known_schemas = _digests_of(context.spark, decoder, values)
    if context.pipeline.route is not None and (decoder.evolving or decoder.watch_schemas):
        decoder.learns_record_types = True
    return decoder


def _digests_of(spark: SparkSession, decoder: JsonDecoder, values: list[bytes]) -> frozenset[int]:
    """The hashes of ``values``' embedded schemas as ``decoder`` writes them."""
    from pyspark.sql import functions as F

    rows = spark.createDataFrame([(bytearray(v),) for v in values], "value binary")
    text = decoder.embedded_schema(F.col("value"))
    return frozenset(int(row[0]) for row in rows.select(F.xxhash64(text)).collect())


def _connect_schemas(context: BuildContext) -> tuple[list[tuple[Any, bytes]], list[str]]:
    """The embedded Connect schemas of the sampled Debezium records that have one (JSON
    converter with ``schemas.enable=true``), read once at start, each with a record's value:
    one per source table for a pipeline over a topic per table, and the older and newer
    schema of a table changed within the sample; only those Connect reads. Empty without
    one. Second: why each sampled schema Connect cannot read is not read."""
    from frazil.decode.debezium import read_envelope

    if context.batch_options is None:
        return [], []
    found = connect_types.connect_schemas_of(_sampled(context, "value"))
    # One Connect cannot read is not taken in: met again while running, its records are
    # marked with the reason (JsonDecoder.learn).
    readable, unread = [], []
    for schema, value in found:
        read = read_envelope(schema)
        if isinstance(read, str):
            unread.append(read)
        else:
            readable.append((schema, value))
    return readable, unread


def _sampled(context: BuildContext, column: str) -> list[bytes]:
    """Non-null ``column`` values (``key``, ``value``) from the start of every partition of
    the topics: :data:`CONNECT_SAMPLE`, at least :data:`CONNECT_SAMPLE_EACH` from each."""
    assert context.batch_options is not None
    options = context.batch_options
    return sample_topics(context.spark, options, column, CONNECT_SAMPLE, CONNECT_SAMPLE_EACH)


def _build_decoder(
    context: BuildContext, connect: list[Any] | None = None
) -> tuple[JsonDecoder, bool]:
    """The decoder, and whether it checks each envelope's embedded Connect schema (read by
    it, or a declared row schema's envelope with the schema as text)."""
    pipeline, part = context.pipeline, context.decoding
    declared = part.schema_
    schema_file = part.schema_file
    # Only a value has a timestamp_format (a key's is always None).
    timestamp_format = part.timestamp_format
    # The switch is written on the value; a JSON key decodes with the same decoder.
    engine = pipeline.value.json_decoder
    freeze = pipeline.defaults.schema_evolution == "freeze" and context.part == "value"
    if declared is not None:
        # A declared schema is the contract: other fields are ignored, or errors under freeze.
        schema = schema_from_fields(declared)
        if pipeline.defaults.write.debezium and context.part == "value":
            from frazil.decode.debezium import envelope_schema

            # The declared fields are the row's: the records are its change events. An
            # embedded Connect schema is still checked: one Connect cannot read marks its
            # record, as the JSON converter would refuse it.
            schema = envelope_schema(schema, strict=freeze, embedded=bool(connect))
            decoder = JsonDecoder(schema, timestamp_format, strict=freeze, engine=engine)
            return decoder, bool(connect)
        return JsonDecoder(schema, timestamp_format, strict=freeze, engine=engine), False
    if schema_file is not None:
        try:
            document = json.loads(Path(schema_file).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{context.config_key('schema_file')}: cannot read JSON Schema {schema_file}: {exc}"
            ) from None
        return JsonDecoder(
            json_schema_to_spark(document, schema_file), timestamp_format, engine=engine
        ), False
    if part.source() == "registry":
        found = wire.subject_schemas(context, "JSON", "a JSON Schema")
        subject, latest = found.subject, found.latest
        where = f"subject {subject!r} version {latest.version} (id {latest.schema_id})"
        return JsonDecoder(
            json_schema_to_spark(json.loads(latest.text), where), timestamp_format, engine=engine
        ), False
    # Inferred: the existing table's shape keeps the decoded columns stable across restarts;
    # fields met later are learned batch by batch (or refused under freeze).
    evolving = context.part == "value" and not freeze
    if connect:
        from frazil.decode.debezium import connect_envelope

        # Debezium with its schema embedded: the envelope's shape is stated, not guessed
        # (each sampled schema's fields, in the order met).
        envelope = None
        for one in filter(None, (connect_envelope(schema) for schema in connect)):
            envelope = one if envelope is None else merge_fields(envelope, one)
        if envelope is not None:
            return JsonDecoder(envelope, timestamp_format, evolving, freeze, engine=engine), True
    if context.table_schema is not None:
        return JsonDecoder(
            context.table_schema, timestamp_format, evolving, freeze, engine=engine
        ), False
    assert context.batch_options is not None
    schema = infer_schema(
        context.spark, context.batch_options, pipeline, INFER_SAMPLE, column=context.part
    )
    return JsonDecoder(schema, timestamp_format, evolving, freeze, engine=engine), False


register(Format(name="json", build=_build))
