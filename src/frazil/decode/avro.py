"""Avro values with spark-avro's ``from_avro``: plain (``schema_file``) or Schema Registry.

In the registry's wire format each record names its writer schema (magic byte 0, a 4-byte schema
id, then the Avro binary). Every writer id known to the decoder gets its own ``from_avro`` with
that writer schema, resolved by Avro's schema resolution to one reader shape (the newest version
of the subject when the run starts); one ``CASE`` on the 5-byte header picks the branch, so each
record is decoded once, in the JVM.

Writer ids are prefetched (every version of the subject) when the decoder is built
(:mod:`frazil.decode.avro_build`); an id met later is fetched when a batch holds it
(:meth:`AvroDecoder.learn`), and the batch is planned again. An id the registry does not have
marks its records ("unknown schema id").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.decode import connect_types, wire
from frazil.decode.avro_limits import spark_reason, unreadable
from frazil.decode.avro_resolution import bridge
from frazil.decode.connect_types import Semantics
from frazil.decode.errors import decode_error, hex_prefix
from frazil.decode.registry import Decoded
from frazil.decode.schema_registry import RegisteredSchema, SchemaRegistry

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Characters of a marked record's JSON quoted in its error detail.
_DETAIL_CHARS = 200
#: Options of every ``from_avro``: a bad record is null (then marked), never an exception;
#: union members are named by type (``member_int``), not position, so adding a branch to a
#: union does not move the others.
_OPTIONS = {"mode": "PERMISSIVE", "enableStableIdentifiersForUnionType": "true"}


def from_avro(data: Column, schema_text: str, options: dict[str, str] | None = None) -> Column:
    """spark-avro's ``from_avro`` of ``data`` with ``schema_text`` as the writer schema, its
    options (:data:`_OPTIONS` and ``options``) one literal map: the tables of a batch are
    planned from several threads, and ``from_avro`` evaluates its options while a plan is
    optimized (see :mod:`frazil.jvm.literals`)."""
    from pyspark.sql import functions as F

    from frazil.jvm.literals import string_map

    return F.call_function(
        "from_avro", data, F.lit(schema_text), string_map({**_OPTIONS, **(options or {})})
    )


def avro_spark_type(spark: SparkSession, schema_text: str) -> Any:
    """The Spark type ``from_avro`` produces for an Avro schema (asked of spark-avro itself)."""
    from pyspark.sql import functions as F

    empty = spark.createDataFrame([], "data binary")
    return (
        empty.select(from_avro(F.col("data"), schema_text).alias("decoded"))
        .schema["decoded"]
        .dataType
    )


def _required_field(schema_text: str) -> str | None:
    """A field every decoded record has a value for (not a union with null), if any.

    spark-avro's PERMISSIVE mode turns an undecodable record into a struct of nulls, not a
    null struct: a null in a required field is how a bad record shows.
    """
    parsed = json.loads(schema_text)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    for f in parsed.get("fields", []):
        kind = f["type"]
        if not (isinstance(kind, list) and "null" in kind):
            return str(f["name"])
    return None


def _undecoded(value: Column, reader: str, scalar: bool) -> Column:
    """True for the value of a record spark-avro could not decode."""
    if scalar:
        return value.isNull()
    required = _required_field(reader)
    if required is None:
        # Every field is optional: a bad record cannot be told from one whose fields are all
        # null (see docs/formats.md).
        return value.isNull()
    return value.isNull() | value[required].isNull()


def _record_fields(schema_text: str) -> set[str] | None:
    parsed = json.loads(schema_text)
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        return {f["name"] for f in parsed.get("fields", [])}
    return None


@dataclass
class AvroDecoder:
    """Decodes Avro records (plain or wire format) into one reader shape.

    Attributes:
        schema: The reader shape as a Spark struct (scalar schemas: one field).
        scalar: Whether the reader schema is not a record.
        reader: The reader schema's Avro JSON.
        registry: The schema registry; None for plain Avro (``schema_file``).
        writers: Known writer schemas by id (wire format only).
        reader_id: The registry id of the reader schema, if it has one.
    """

    schema: StructType
    scalar: bool
    reader: str
    registry: SchemaRegistry | None = None
    writers: dict[int, RegisteredSchema] = field(default_factory=dict)
    reader_id: int | None = None
    #: Whether a writer schema with fields the reader lacks becomes the reader
    #: (``schema_evolution: evolve``); otherwise its records are marked.
    evolve: bool = False
    _unknown: set[int] = field(default_factory=set)
    #: Writers met while running whose record is another type than the reader's (another
    #: subject's schema): never the reader; their records are marked with the reason.
    _foreign: dict[int, str] = field(default_factory=dict)
    #: Writers Avro's resolution does not read as the reader, each with Avro's reason: their
    #: records are marked (never decoded into garbage or read as corrupt).
    _unresolved: dict[int, str] = field(default_factory=dict)
    #: Newer writers passed over as the reader: they cannot read the writers before them.
    _passed: set[int] = field(default_factory=set)
    #: Writers whose schema Spark cannot read (a recursive record, a decimal of more than 38
    #: digits), each with why: never the reader; their records are marked.
    _unreadable: dict[int, str] = field(default_factory=dict)

    def version(self) -> object:
        """The known writer ids and the reader: the projection depends on them."""
        return (tuple(sorted(self.writers)), self.reader_id)

    def owned(self) -> list[int]:
        """The writer ids of the reader's record type (not another's met while running)."""
        return sorted(i for i in self.writers if i not in self._foreign)

    def semantics(self) -> Semantics:
        """The reader schema's ``connect.name`` (and ``connect.parameters``) properties, as
        Kafka Connect's Avro converter writes them."""
        return connect_types.from_avro_schema(self.reader)

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Fetch the writer schemas of the batch's ids the decoder does not know yet.

        Under ``evolve``, the newest of them that has fields the reader lacks becomes the
        reader (the registry's compatibility rules make it read the older writers): the
        batch is then planned again with the new fields, and the table gains them.
        """
        if self.registry is None:
            return False
        return self.learn_ids(wire.ids_in(raw, column), raw.sparkSession)

    def learn_ids(self, ids: set[int], spark: SparkSession) -> bool:
        """:meth:`learn` for the schema ids a batch's records carry."""
        if self.registry is None:
            return False
        learned = False
        for schema_id in sorted(set(ids) - set(self.writers)):
            schema = self.registry.by_id(schema_id)
            if schema is None or schema.schema_type != "AVRO":
                self._unknown.add(schema_id)
                continue
            self.writers[schema_id] = schema
            why = unreadable(schema.text)
            other = another_record(schema.text, self.reader)
            if why is not None:
                self._unreadable[schema_id] = why
            elif other is not None:
                self._foreign[schema_id] = (
                    f"written with schema id {schema_id}, a record '{other[0]}' where the "
                    f"reader schema (id {self.reader_id}) is '{other[1]}': another record "
                    "type's schema, which Avro does not resolve against the reader's"
                )
            learned = True
        if self.evolve and not self.scalar:
            # Only forward: the newest writer becomes the reader, whatever it changed (fields
            # added, a type widened, an enum's symbol or a union's branch added: the older
            # reader cannot read its records), with the fields of the reader it dropped kept
            # (nullable), so that the older writers' records keep their values. Not a writer
            # whose schema cannot read those before it (a type changed as Avro does not
            # resolve, int to string: a version the registry's checks let through): every
            # older producer's records would stop decoding; its own are marked instead.
            newer = [
                i
                for i in self.writers
                if i > (self.reader_id or -1)
                and i not in self._foreign
                and i not in self._passed
                and i not in self._unreadable
            ]
            for candidate in sorted(newer, reverse=True):
                merged = keep_dropped(spark, self.writers[candidate].text, self.reader)
                older = [
                    w.text
                    for i, w in self.writers.items()
                    if i < candidate and i not in self._foreign
                ]
                if any(unresolved(spark, merged, text) for text in older):
                    self._passed.add(candidate)
                    continue
                if merged != self.reader:
                    try:
                        self.schema, _ = shape_of(spark, merged, "value")
                    except ValueError as exc:  # beyond what spark-avro reads
                        self._unreadable[candidate] = str(exc)
                        continue
                    self.reader = merged
                    learned = True
                self.reader_id = candidate
                break
        if learned:
            self._unresolved = {
                i: why
                for i, w in self.writers.items()
                if i not in self._foreign and (why := unresolved(spark, self.reader, w.text))
            }
        return learned

    def decode(self, data: Column) -> Decoded:
        """The decoded value, and the mark of records that do not decode."""
        from pyspark.sql import functions as F

        if self.registry is None:
            plain = from_avro(data, self.reader)
            bad = data.isNotNull() & _undecoded(plain, self.reader, self.scalar)
            error = F.when(
                bad,
                decode_error(
                    F.lit("not Avro of the schema_file's schema (truncated or corrupt payload)"),
                    hex_prefix(data),
                ),
            )
            return Decoded(value=plain, error=error.cast(c.ERROR_DDL))

        reader_fields = _record_fields(self.reader)
        body = wire.payload(data)
        value: Column | None = None
        single: Column | None = None
        # Writers whose records are marked, with the reason: never decoded into a loss.
        marked: list[tuple[int, str]] = []
        for schema_id, writer in sorted(self.writers.items()):
            if schema_id in self._unreadable:
                marked.append(
                    (
                        schema_id,
                        f"written with schema id {schema_id}, which Spark cannot read: "
                        f"{self._unreadable[schema_id]}",
                    )
                )
                continue
            if schema_id in self._foreign:
                marked.append((schema_id, self._foreign[schema_id]))
                continue
            if schema_id in self._unresolved:
                marked.append(
                    (
                        schema_id,
                        f"written with schema id {schema_id}, which Avro's schema resolution "
                        f"does not read as the reader schema (id {self.reader_id}): "
                        f"{self._unresolved[schema_id]}",
                    )
                )
                continue
            missing = _missing(writer.text, reader_fields)
            if missing and (not self.evolve or schema_id > (self.reader_id or -1)):
                # Resolution would drop these fields.
                marked.append(
                    (
                        schema_id,
                        f"written with schema id {schema_id}, which has fields the reader "
                        f"schema (id {self.reader_id}) lacks: {', '.join(missing)} "
                        "(schema_evolution: freeze)",
                    )
                )
                continue
            options: dict[str, str] = {}
            own = schema_id == self.reader_id and writer.text == self.reader
            resolved = None if own else bridge(writer.text, self.reader)
            if resolved is not None and resolved.misread:
                # Resolution would misread these values (logical types differ).
                wrong = resolved.misread[0]
                marked.append(
                    (
                        schema_id,
                        f"written with schema id {schema_id}, whose field '{wrong.path}' is "
                        f"{wrong.writer} where the reader schema (id {self.reader_id}) has "
                        f"{wrong.reader}: Avro's schema resolution would misread its values",
                    )
                )
                continue
            if resolved is not None:
                # Avro schema resolution: the writer's record read as the reader's shape (with
                # the writer's own time units and decimal scales where they differ).
                options["avroSchema"] = resolved.reader
            decoded = from_avro(body, writer.text, options)
            if resolved is not None and resolved.cast:
                decoded = decoded.cast(self._type())
            m = wire.matches(data, schema_id)
            value = F.when(m, decoded) if value is None else value.when(m, decoded)
            single = decoded
        if value is None:
            value = F.lit(None).cast(self._type())
        elif single is not None and len(self.writers) - len(marked) == 1:
            # One writer: decoded unconditionally. Spark rewrites a one-branch CASE so that
            # each column extracts its field inside the branch, and then runs from_avro once
            # per column. A record of another id decodes to nothing useful here, but its
            # header marks it as an error whatever its value.
            value = single
        error = wire.header_errors(data, sorted(self.writers), self.registry.url)
        for schema_id, reason in marked:
            error = error.when(
                wire.matches(data, schema_id),
                decode_error(
                    F.lit(reason),
                    # Its own schema reads nothing Spark cannot hold: its bytes, then.
                    hex_prefix(body)
                    if schema_id in self._unreadable
                    else _as_written(body, self.writers[schema_id].text),
                ),
            )
        error = error.when(
            _undecoded(value, self.reader, self.scalar),
            decode_error(
                F.format_string(
                    "payload does not decode with writer schema id %s (truncated or corrupt)",
                    wire.schema_id_text(data),
                ),
                hex_prefix(data),
            ),
        )
        return Decoded(value=value, error=error.cast(c.ERROR_DDL))

    def _type(self) -> Any:
        return self.schema.fields[0].dataType if self.scalar else self.schema


def _as_written(body: Column, writer: str) -> Column:
    """A marked record's detail: the record as its own writer schema reads it, in JSON (the
    fields it holds say what was sent; its bytes say nothing read as text); evaluated for
    marked records only."""
    from pyspark.sql import functions as F

    decoded = from_avro(body, writer)
    record = _record_fields(writer) is not None
    text = F.to_json(decoded if record else F.struct(decoded.alias("value")))
    return F.coalesce(F.substring(text, 1, _DETAIL_CHARS), hex_prefix(body))


def keep_dropped(spark: SparkSession, newer: str, older: str) -> str:
    """``newer`` (a record schema) as a reader of ``older``'s records too: the top-level
    fields of ``older`` it dropped appended, and the fields it added without a default made
    nullable with a null default (a producer's schema need not say what older records hold;
    the table adds the column as optional anyway). Avro's resolution then reads the dropped
    fields of the writers that have them, where the newer schema alone would drop their
    values, and reads older writers' records, where a field without a default would refuse
    them. ``newer`` itself where nothing changes, or where the merged schema does not parse
    (a dropped field's named type defined again).
    """
    new, old = json.loads(newer), json.loads(older)
    if not all(isinstance(s, dict) and s.get("type") == "record" for s in (new, old)):
        return newer
    names = {f["name"] for f in new.get("fields", [])}
    old_names = {f["name"] for f in old.get("fields", [])}
    dropped = [f for f in old.get("fields", []) if f["name"] not in names]
    added = [f["name"] for f in new.get("fields", []) if f["name"] not in old_names]
    undefaulted = {n for n in added if "default" not in _field(new, n)}
    if not dropped and not undefaulted:
        return newer
    fields = [_optional(f) if f["name"] in undefaulted else f for f in new["fields"]]
    merged = json.dumps({**new, "fields": [*fields, *(_optional(f) for f in dropped)]})
    try:
        parse_avro(spark, merged)
    except ValueError:
        return newer
    return merged


def _field(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in record["fields"] if f["name"] == name)


def _optional(field: dict[str, Any]) -> dict[str, Any]:
    """A record field as a nullable one with a null default (null the union's first branch,
    as Avro wants of a default)."""
    kind = field["type"]
    branches = kind if isinstance(kind, list) else [kind]
    union = ["null", *[b for b in branches if b != "null"]]
    return {**{k: v for k, v in field.items() if k != "default"}, "type": union, "default": None}


def unresolved(spark: SparkSession, reader: str, writer: str) -> str | None:
    """Why Avro's schema resolution cannot read ``writer``'s records as ``reader`` (Avro's own
    check, ``SchemaCompatibility``: its first incompatibility and where), or None when it can.
    Logical types are not looked at (nor by Avro): :func:`~frazil.decode.avro_resolution.bridge`
    does that."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    parser = jvm.org.apache.avro.Schema.Parser
    checked = jvm.org.apache.avro.SchemaCompatibility.checkReaderWriterCompatibility(
        parser().parse(reader), parser().parse(writer)
    )
    result = checked.getResult()
    if str(result.getCompatibility()) == "COMPATIBLE":
        return None
    found = result.getIncompatibilities()
    if found.isEmpty():
        return str(checked.getDescription())
    first = found.get(0)
    return f"{first.getMessage()} (at {first.getLocation()})"


def another_record(writer: str, reader: str) -> tuple[str, str] | None:
    """The full names of a writer's and a reader's records when they are different record
    types: Avro's name check of schema resolution (the unqualified names, or an alias of
    either naming the other), as registries' compatibility checks apply it. None when they
    are one type, or either is not a record."""
    found = [json.loads(text) for text in (writer, reader)]
    if not all(isinstance(s, dict) and s.get("type") == "record" for s in found):
        return None
    (w_full, w_names), (r_full, r_names) = (record_names(s) for s in found)
    if _short(w_full) in r_names or _short(r_full) in w_names:
        return None
    return w_full, r_full


def full_name(text: str) -> str | None:
    """The full name of a record schema (None for a schema of another type)."""
    parsed = json.loads(text)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    return record_names(parsed)[0]


def record_names(record: dict[str, Any]) -> tuple[str, set[str]]:
    """A record schema's full name, and the unqualified names it answers to (its own and
    its aliases')."""
    name = str(record.get("name", ""))
    namespace = str(record.get("namespace") or "")
    full = name if "." in name or not namespace else f"{namespace}.{name}"
    return full, {_short(full), *(_short(str(a)) for a in record.get("aliases", []))}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _missing(writer_text: str, reader_fields: set[str] | None) -> list[str]:
    if reader_fields is None:
        return []
    writer_fields = _record_fields(writer_text)
    if writer_fields is None:
        return []
    return sorted(writer_fields - reader_fields)


def shape_of(spark: SparkSession, reader: str, name: str) -> tuple[StructType, bool]:
    """The Spark shape of an Avro schema, and whether it is a scalar (one field ``name``).

    Raises:
        ValueError: Spark cannot read the schema, saying why (naming the field where
            :func:`~frazil.decode.avro_limits.unreadable` finds it).
    """
    from pyspark.sql.types import StructField, StructType

    why = unreadable(reader)
    if why is not None:
        raise ValueError(why)
    try:
        spark_type = avro_spark_type(spark, reader)
    except Exception as exc:  # py4j's and pyspark's wrappers of spark-avro's refusal
        raise ValueError(spark_reason(exc)) from None
    if isinstance(spark_type, StructType):
        return spark_type, False
    return StructType([StructField(name, spark_type, True)]), True


def parse_avro(spark: SparkSession, text: str) -> None:
    """Check a schema with Avro's own parser (the JVM's), raising ValueError with its message."""
    try:
        json.loads(text)
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        jvm.org.apache.avro.Schema.Parser().parse(text)
    except Exception as exc:  # py4j wraps SchemaParseException
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(message.split(": ", 1)[-1]) from None
