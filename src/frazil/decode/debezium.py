"""Debezium change events: the envelope around a row, unwrapped into the row's columns.

A Debezium value is ``{before, after, op, source, ts_ms, transaction}``; the JSON converter
with ``schemas.enable=true`` wraps it as ``{schema, payload}``, and the Avro converter writes
the same envelope as a record. The decoder reads the envelope (a declared JSON schema names
the *row's* columns and is wrapped here); the unwrap step then puts the row — ``after``, or
``before`` for a delete — in place of the envelope and sets each record's operation from
``op`` (``c``, ``r``, ``u``: upsert; ``d``: delete). Like Debezium's own
``ExtractNewRecordState`` SMT, chosen envelope fields can be kept as ``__``-prefixed columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.writes import DEBEZIUM_OPS, WriteConfig
from frazil.decode import connect_types
from frazil.decode.connect_types import Semantics
from frazil.decode.errors import decode_error, quoted_value

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType

#: Fields of the envelope (and of its JSON ``{schema, payload}`` wrapper).
ENVELOPE_FIELDS = ("before", "after", "op", "source", "ts_ms", "transaction", "schema", "payload")

#: ``source`` fields Debezium's connectors declare as integers (the common timestamps;
#: MySQL's and MariaDB's binlog position; PostgreSQL's LSN and transaction; SQL Server's
#: event serial; MongoDB's ordinal). A declared envelope reads ``source`` as a map of
#: strings: these are numbers again when kept, as Debezium's ``ExtractNewRecordState``
#: keeps them, so that an ``order_by`` on them compares 1000 above 999. A schema the
#: values carry (embedded, or the registry's) says what each field is instead.
SOURCE_NUMBERS = {
    **dict.fromkeys(("ts_ms", "ts_us", "ts_ns", "lsn", "txId", "xmin"), "int64"),
    **dict.fromkeys(("server_id", "pos", "thread", "event_serial_no"), "int64"),
    **dict.fromkeys(("row", "ord"), "int32"),
}


def envelope_schema(
    row: StructType,
    strict: bool = False,
    extra: tuple[StructField, ...] = (),
    embedded: bool = False,
) -> StructType:
    """The envelope a declared row schema arrives in, with or without the JSON wrapper.

    ``source`` is read as a map of strings (its fields differ by connector; a number arrives
    as its JSON text). Under ``strict`` (``schema_evolution: freeze``) the wrapper's
    ``schema`` and the ``transaction`` block are declared too, so that they are not taken
    for unknown fields. ``extra``: more fields of the envelope (``ts_us``, ``ts_ns``).
    ``embedded``: the values embed their Connect schema, read as text to be checked.
    """
    from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType

    inner = [
        StructField("before", row, True),
        StructField("after", row, True),
        StructField("op", StringType(), True),
        StructField("ts_ms", LongType(), True),
        StructField("source", MapType(StringType(), StringType(), True), True),
        *extra,
    ]
    if strict:
        inner.append(StructField("transaction", StringType(), True))
    fields = [*inner, StructField("payload", StructType(inner), True)]
    if strict or embedded:
        fields.append(StructField("schema", StringType(), True))
    return StructType(fields)


def _envelope_type(value: StructType) -> StructType:
    """The envelope's own struct: ``payload``'s type when the JSON wrapper is declared."""
    from pyspark.sql.types import StructType

    names = value.fieldNames()
    if "payload" in names and "after" not in names:
        payload = value["payload"].dataType
        if isinstance(payload, StructType):
            return payload
    return value


def connect_envelope(schema: Any) -> StructType | None:
    """The envelope of a JSON converter's embedded Connect ``schema`` as Spark reads it, in
    the schema's field order and types (an ``int32`` an ``int``; ``bytes`` their base64
    text, mapped later by their semantic type): what an inferred schema of these records
    is, without guessing from sampled values (a ``before`` null in every sampled record
    would be taken for a string). Its wrapper's ``schema`` and the ``transaction`` block are
    read as text; the envelope is read in its wrapper only (``payload``). None if the
    schema has no ``before`` or ``after`` struct this can read (:func:`read_envelope` says
    why).
    """
    found = read_envelope(schema)
    return None if isinstance(found, str) else found


def read_envelope(schema: Any) -> StructType | str:
    """:func:`connect_envelope`, or why the schema cannot be read: ``the embedded Connect
    schema is malformed: field 'after.qty' has type 'int128', not a Connect type``."""
    from pyspark.sql.types import StructField, StructType

    def bad(problem: str) -> str:
        # A map with other keys than strings is Connect's own, written as a list of pairs:
        # not malformed, but not read (declare the row's schema to read it as text).
        what = "is not supported" if "keys are not strings" in problem else "is malformed"
        return f"the embedded Connect schema {what}: {problem}"

    if not isinstance(schema, dict):
        return bad("it is not a JSON object")
    if schema.get("type") != "struct":
        return bad(f"its type is {schema.get('type')!r}, not 'struct'")
    listed = schema.get("fields", [])
    if not isinstance(listed, list):
        return bad("its 'fields' is not a list")
    parts = {str(f.get("field")): f for f in listed if isinstance(f, dict)}
    row: StructType | None = None
    for image in ("after", "before"):
        if image not in parts:
            continue
        found = connect_types.read_type(parts[image], image)
        if isinstance(found, str):
            return bad(found)
        if not isinstance(found, StructType):
            return bad(f"field {image!r} is not a struct")
        row = found if row is None else _union(row, found)
    if row is None:
        return bad("it has no 'before' or 'after' field")
    known = {"before", "after", "op", "ts_ms", "source", "transaction"}
    extra = tuple(
        StructField(name, kind, True)
        for name, spec in parts.items()
        if name not in known and (kind := connect_types.spark_type(spec)) is not None
    )
    # The wrapped form only: a field learned later (a column added at the source) is then
    # added in one place, not to a second, unwrapped copy of the envelope.
    both = envelope_schema(row, strict=True, extra=extra)
    return StructType([both["payload"], both["schema"]])


def row_schema(
    value: StructType, write: WriteConfig, semantics: Semantics = connect_types.NONE
) -> StructType:
    """The columns a decoded envelope becomes: the row's fields, then the kept fields; a
    field with a Connect semantic type (``semantics``) in its mapped type.

    Raises:
        ValueError: The decoded shape has no ``after`` or ``before`` struct.
    """
    from pyspark.sql.types import StructField, StructType

    envelope = _envelope_type(value)
    row = _row_type(envelope)
    if row is None:
        names = ", ".join(value.fieldNames())
        raise ValueError(
            "write.debezium: the decoded values hold no 'after' or 'before' record "
            f"(fields: {names}); are these Debezium change events?"
        )
    fields = [
        StructField(f.name, _mapped(semantics.row, f.name, f.dataType) or f.dataType, f.nullable)
        for f in row.fields
    ]
    kept = []
    for path, column in write.envelope_columns():
        found = _path_type(envelope, path) or _string()
        kept.append(StructField(column, _kept_type(semantics, path, found) or found, True))
    return StructType([*fields, *kept])


def declared_type_problems(value: StructType, semantics: Semantics) -> list[tuple[str, str]]:
    """The declared row fields whose type is not the one the envelopes' embedded Connect
    schema sends them in, where that would misread them: an epoch-ms ``Timestamp`` (a JSON
    number) declared ``timestamp`` is read as seconds, a ``Decimal`` (base64 text) declared
    ``decimal`` does not parse. ``(field, reason)`` each, naming the type to declare: the
    one sent, which frazil maps (:func:`row_schema`)."""
    from pyspark.sql.types import DateType, DecimalType, StringType, TimestampType

    row = _row_type(_envelope_type(value))
    problems: list[tuple[str, str]] = []
    for f in row.fields if row is not None else []:
        semantic = semantics.row.get(f.name)
        if semantic is None:
            continue
        wire = connect_types.spark_type({"type": semantic.type})
        target = None if wire is None else connect_types.target_type(semantic, wire)
        if wire is None or target is None or f.dataType == wire:
            continue
        if isinstance(wire, StringType) and isinstance(f.dataType, TimestampType):
            continue  # text read as a timestamp: ZonedTimestamp's ISO text parses as one
        if f.dataType == target or isinstance(f.dataType, (TimestampType, DateType, DecimalType)):
            problems.append(
                (
                    f.name,
                    f"declared {f.dataType.simpleString()}, but the embedded Connect schema "
                    f"sends it as {semantic.type} ({semantic.name}), which reads wrong as "
                    f"that: declare {wire.simpleString()}, the type sent, and frazil makes "
                    f"it {target.simpleString()}",
                )
            )
    return problems


def _mapped(found: dict[str, connect_types.Semantic], name: str, kind: DataType) -> DataType | None:
    semantic = found.get(name)
    return None if semantic is None else connect_types.target_type(semantic, kind)


def _kept_type(semantics: Semantics, path: str, kind: DataType) -> DataType | None:
    """A kept envelope field's mapped type: ``source.lsn`` read as text (a declared envelope
    reads ``source`` as a map of strings) is a number again where the schema, or Debezium
    (:data:`SOURCE_NUMBERS`), says int64."""
    semantic = _source_semantic(semantics, path)
    return None if semantic is None else connect_types.target_type(semantic, kind)


def _source_semantic(semantics: Semantics, path: str) -> connect_types.Semantic | None:
    """What the schema (or else Debezium's documentation) says of a kept ``source.*``."""
    head, _, rest = path.partition(".")
    if head != "source" or not rest or "." in rest:
        return None
    found = semantics.source.get(rest)
    if found is None and rest in SOURCE_NUMBERS:
        found = connect_types.Semantic(SOURCE_NUMBERS[rest])
    return found


def _row_type(envelope: StructType) -> StructType | None:
    from pyspark.sql.types import StructType

    found = None
    for name in ("after", "before"):
        if name in envelope.fieldNames():
            kind = envelope[name].dataType
            if isinstance(kind, StructType):
                found = kind if found is None else _union(found, kind)
    return found


def _union(first: StructType, second: StructType) -> StructType:
    from pyspark.sql.types import StructType

    names = set(first.fieldNames())
    return StructType([*first.fields, *[f for f in second.fields if f.name not in names]])


def _string() -> DataType:
    from pyspark.sql.types import StringType

    return StringType()


def _path_type(envelope: StructType, path: str) -> DataType | None:
    from pyspark.sql.types import MapType, StructType

    kind: DataType = envelope
    for part in path.split("."):
        if isinstance(kind, StructType) and part in kind.fieldNames():
            kind = kind[part].dataType
        elif isinstance(kind, MapType):
            kind = kind.valueType
        else:
            return None
    return kind


def unwrap(
    batch: c.Projection,
    value: StructType,
    write: WriteConfig,
    semantics: Semantics = connect_types.NONE,
) -> c.Projection:
    """Replace the decoded envelope's columns by the row's, and set each record's operation.

    Fields with a Connect semantic type (``semantics``) are mapped in the JVM
    (:func:`frazil.decode.connect_types.convert`): an epoch-ms ``Timestamp`` becomes a
    timestamp, a ``Decimal``'s bytes a decimal, …

    A record with an ``op`` Debezium does not define for rows (``t``: a truncate, or none
    at all) is marked (stage ``mode``); a tombstone (null value) is left to the write mode.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    names = value.fieldNames()
    payload = value["payload"].dataType if "payload" in names else None
    inside = payload.fieldNames() if isinstance(payload, StructType) else []

    def field(name: str) -> Column:
        # A declared envelope has both shapes (with and without the JSON converter's
        # wrapper): one of them holds the record's fields.
        found = [batch[name]] if name in names else []
        if name in inside:
            found.append(batch["payload"][name])
        if not found:
            return F.lit(None)
        return found[0] if len(found) == 1 else F.coalesce(*found)

    envelope = _envelope_type(value)
    row = _row_type(envelope)
    assert row is not None, "row_schema() checked this when the pipeline started"
    op = field("op")
    after = field("after") if "after" in envelope.fieldNames() else F.lit(None)
    before = field("before") if "before" in envelope.fieldNames() else F.lit(None)
    result = {k: v for k, v in batch.items() if k not in ENVELOPE_FIELDS or k not in names}
    unconverted: list[Column] = []
    for f in row.fields:
        in_after = _has(envelope, "after", f.name)
        in_before = _has(envelope, "before", f.name)
        image_after = after[f.name] if in_after else F.lit(None)
        image_before = before[f.name] if in_before else F.lit(None)
        image = F.when(op == F.lit("d"), image_before).otherwise(image_after)
        semantic = semantics.row.get(f.name)
        mapped = None if semantic is None else connect_types.convert(image, semantic, f.dataType)
        result[f.name] = image if mapped is None else mapped
        if mapped is not None and semantic is not None:
            # A value its semantic type does not convert (a decimal wider than its column,
            # a timestamp's text that does not parse) is marked, never written as null.
            target = connect_types.target_type(semantic, f.dataType)
            what = target.simpleString() if target is not None else "its type"
            text = connect_types.shown(image, semantic, f.dataType)
            reason = F.concat(
                F.lit(f"field {f.name!r} ({semantic.name}) does not convert to {what}: "),
                quoted_value(text),
            )
            unconverted.append(
                F.when(
                    image.isNotNull() & mapped.isNull(),
                    decode_error(reason, F.substring(text, 1, 200)),
                )
            )
    for path, column in write.envelope_columns():
        head, *rest = path.split(".")
        kept = field(head)
        for part in rest:
            kept = kept[part]
        found = _path_type(envelope, path)
        semantic = _source_semantic(semantics, path)
        if found is not None and semantic is not None:
            mapped = connect_types.convert(kept, semantic, found)
            if mapped is not None:
                # Text that is no number (a connector of its own) is marked, not dropped.
                reason = F.concat(
                    F.lit(f"envelope field {path!r} ({semantic.type}) is not a number: "),
                    quoted_value(kept.cast("string")),
                )
                unconverted.append(
                    F.when(
                        kept.isNotNull() & mapped.isNull(),
                        decode_error(reason, F.substring(kept.cast("string"), 1, 200)),
                    )
                )
                kept = mapped
        result[column] = kept
    ops = F.lit(None).cast("string")
    for code, what in reversed(list(DEBEZIUM_OPS.items())):
        ops = F.when(op == F.lit(code), F.lit(what)).otherwise(ops)
    skipped = F.coalesce(batch[c.OP] == F.lit(c.OP_SKIP), F.lit(False))
    result[c.OP] = F.when(skipped, F.lit(c.OP_SKIP)).otherwise(ops)
    unknown = batch[c.ERROR].isNull() & batch[c.VALUE].isNotNull() & ops.isNull()
    result[c.ERROR] = F.coalesce(
        batch[c.ERROR],
        F.when(
            unknown,
            mode_error(
                # The code itself, as the op-field's reasons quote theirs (a truncate's 't').
                F.when(op.isNull(), F.lit("not a row change: no Debezium op")).otherwise(
                    F.concat(
                        F.lit("not a row change: Debezium op '"),
                        F.substring(op, 1, 20),
                        F.lit("' is not c, r, u or d"),
                    )
                ),
                F.coalesce(op, F.lit("(no op)")),
            ),
        ),
        *[e.cast(c.ERROR_DDL) for e in unconverted],
    )
    return result


def _has(envelope: StructType, image: str, name: str) -> bool:
    from pyspark.sql.types import StructType

    if image not in envelope.fieldNames():
        return False
    kind = envelope[image].dataType
    return isinstance(kind, StructType) and name in kind.fieldNames()


def mode_error(reason: Column, detail: Column) -> Column:
    """An error of the write-mode stage (:data:`frazil.columns.STAGE_MODE`)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_MODE).alias("stage"),
        reason.cast("string").alias("reason"),
        detail.cast("string").alias("detail"),
    ).cast(c.ERROR_DDL)
