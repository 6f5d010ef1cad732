"""Kafka Connect and Debezium semantic types: what a row's field *means*, mapped in the JVM.

Debezium (through Kafka Connect's converters) sends a ``DATETIME`` as ``int64`` milliseconds
named ``io.debezium.time.Timestamp``, a ``DATE`` as ``int32`` days named
``io.debezium.time.Date``, a ``DECIMAL`` as its unscaled two's-complement bytes named
``org.apache.kafka.connect.data.Decimal`` with a ``scale`` parameter, and so on. The names
travel in the schema: the JSON converter's embedded ``{"schema": …, "payload": …}`` and the
Avro converter's ``connect.name`` (and ``connect.parameters``) properties. This module reads
them once, when a pipeline's plan is built (:func:`from_connect_schema`,
:func:`from_avro_schema`), and maps each field with Spark SQL expressions (:func:`convert`),
so no record goes through Python.

Mapped (the table gets):

* ``io.debezium.time.Timestamp``, ``org.apache.kafka.connect.data.Timestamp`` (epoch ms),
  ``io.debezium.time.MicroTimestamp`` (µs), ``io.debezium.time.NanoTimestamp`` (ns, cut to
  µs): ``timestamp``, the instant read as UTC;
* ``io.debezium.time.ZonedTimestamp`` (ISO-8601 text with an offset): ``timestamp``;
* ``io.debezium.time.Date``, ``org.apache.kafka.connect.data.Date`` (days since
  1970-01-01): ``date``;
* ``org.apache.kafka.connect.data.Decimal`` (bytes; base64 text in JSON):
  ``decimal(precision, scale)`` (precision from ``connect.decimal.precision``, else 38);
* ``io.debezium.data.VariableScaleDecimal`` (a struct of ``scale`` and ``value``): ``string``,
  the exact decimal text (its scale differs per value, a table column's cannot).

Kept as they arrive: times of day (``io.debezium.time.Time``/``MicroTime``/``NanoTime``,
``org.apache.kafka.connect.data.Time``: ``int``/``bigint`` counts of ms/µs/ns since
midnight; Iceberg's ``time`` has no Spark type), ``ZonedTime`` (``string``), and any name not
above. A field that already has the mapped type (Avro's ``logicalType`` did it) is left as is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil.jvm.columns import jvm_column

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

#: Epoch milliseconds.
TIMESTAMP_MS = frozenset({"io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"})
MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"
NANO_TIMESTAMP = "io.debezium.time.NanoTimestamp"
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
#: Days since 1970-01-01.
DATE_DAYS = frozenset({"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"})
DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
#: Largest decimal precision Spark (and Iceberg) hold.
MAX_PRECISION = 38

#: Avro's primitive type names as Connect's.
_AVRO_TO_CONNECT = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
    "record": "struct",
    "array": "array",
    "map": "map",
}


@dataclass(frozen=True)
class Semantic:
    """A field's Connect schema: its type, its semantic name (if any), its decimal scale."""

    type: str
    name: str | None = None
    scale: int | None = None
    precision: int | None = None


@dataclass(frozen=True)
class Semantics:
    """What an envelope's schema says of the row's fields and of its ``source`` block."""

    row: dict[str, Semantic]
    source: dict[str, Semantic]

    def __bool__(self) -> bool:
        return bool(self.row or self.source)


NONE = Semantics({}, {})


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def connect_field(spec: dict[str, Any]) -> Semantic:
    """What a Connect schema ``spec`` (a field's, or a whole key's) says: type, name, scale."""
    params = spec.get("parameters") or {}
    return Semantic(
        type=str(spec.get("type", "")),
        name=spec.get("name"),
        scale=_int(params.get("scale")),
        precision=_int(params.get("connect.decimal.precision")),
    )


def connect_struct(spec: Any) -> dict[str, Semantic]:
    """What a Connect struct schema says of each of its fields, by name; empty if ``spec``
    is not a struct."""
    if not isinstance(spec, dict) or spec.get("type") != "struct":
        return {}
    return {
        str(f["field"]): connect_field(f)
        for f in spec.get("fields") or []
        if isinstance(f, dict) and "field" in f
    }


#: Connect's primitive types as the JSON converter writes them, read by Spark (``bytes``:
#: base64 text).
_JSON_LEVEL = {
    "int8": "IntegerType",
    "int16": "IntegerType",
    "int32": "IntegerType",
    "int64": "LongType",
    "float32": "FloatType",
    "float64": "DoubleType",
    "boolean": "BooleanType",
    "string": "StringType",
    "bytes": "StringType",
}


def spark_type(spec: Any) -> DataType | None:
    """The Spark type a JSON converter's value of Connect schema ``spec`` is read into,
    before any semantic mapping (:func:`convert`); None for a spec this cannot read (a map
    whose keys are not strings is written as a list of pairs)."""
    found = read_type(spec)
    return None if isinstance(found, str) else found


def read_type(spec: Any, path: str = "") -> DataType | str:
    """:func:`spark_type`, or what makes ``spec`` unreadable, naming the field at ``path``
    (``after.price``): ``field 'after.price' has type 'int128', not a Connect type``."""
    from pyspark.sql import types as T

    where = f"field {path!r}" if path else "the schema"
    if not isinstance(spec, dict):
        return f"{where} is not a schema object"
    kind = spec.get("type")
    if kind in _JSON_LEVEL:
        primitive: DataType = getattr(T, _JSON_LEVEL[str(kind)])()
        return primitive
    if kind == "struct":
        listed = spec.get("fields", [])
        if not isinstance(listed, list):
            return f"the 'fields' of {where} is not a list"
        fields = []
        for f in listed:
            if not isinstance(f, dict) or not isinstance(f.get("field"), str):
                return f"a field of {where} has no name ('field')"
            name = f["field"]
            found = read_type(f, f"{path}.{name}" if path else name)
            if isinstance(found, str):
                return found
            fields.append(T.StructField(name, found, True))
        return T.StructType(fields)
    if kind == "array":
        items = read_type(spec.get("items"), f"{path}[]")
        return items if isinstance(items, str) else T.ArrayType(items, True)
    if kind == "map":
        keys, values = spec.get("keys"), read_type(spec.get("values"), f"{path}{{}}")
        if isinstance(values, str):
            return values
        if not isinstance(keys, dict) or keys.get("type") != "string":
            # The JSON converter writes such a map as a list of pairs.
            return f"{where} is a map whose keys are not strings (not read)"
        return T.MapType(T.StringType(), values, True)
    if kind is None:
        return f"{where} has no 'type'"
    return f"{where} has type {kind!r}, not a Connect type"


def from_connect_schema(schema: Any) -> Semantics:
    """The semantics in a JSON converter's embedded schema (the ``schema`` of a
    ``{"schema", "payload"}`` value) of a Debezium envelope: ``after``'s fields (``before``'s
    where ``after`` lacks one) and ``source``'s."""
    envelope = connect_struct(schema)
    if not isinstance(schema, dict):
        return NONE
    parts = {str(f.get("field")): f for f in schema.get("fields") or [] if isinstance(f, dict)}
    row: dict[str, Semantic] = {}
    for image in ("before", "after"):
        row.update(connect_struct(parts.get(image)))
    if not envelope:
        return NONE
    return Semantics(row, connect_struct(parts.get("source")))


def from_connect_schemas(schemas: list[Any]) -> Semantics:
    """:func:`from_connect_schema` of each schema a topic's envelopes embedded, in the order
    they were met: a field keeps the semantics it was first met with (its column's type was
    made from them)."""
    row: dict[str, Semantic] = {}
    source: dict[str, Semantic] = {}
    for schema in schemas:
        found = from_connect_schema(schema)
        for name, semantic in found.row.items():
            row.setdefault(name, semantic)
        for name, semantic in found.source.items():
            source.setdefault(name, semantic)
    return Semantics(row, source)


#: What :func:`sampled_json` gives for a value that is not JSON.
NOT_JSON = object()


def sampled_json(data: bytes) -> Any:
    """A sampled value's JSON document (a Schema Registry wire-format header skipped), or
    :data:`NOT_JSON`."""
    try:
        return json.loads(data[5:] if data[:1] == b"\x00" else data)
    except ValueError:
        return NOT_JSON


def connect_schemas_of(values: list[bytes]) -> list[tuple[Any, bytes]]:
    """The distinct embedded Connect schemas (structs with ``before`` or ``after``) of the
    sampled JSON values, in the order met, each with the first value that has it; empty if
    none has. A Schema Registry wire-format header (magic byte 0 and a 4-byte id) is
    skipped."""
    met: dict[str, tuple[Any, bytes]] = {}
    for data in values:
        found = sampled_json(data)
        if isinstance(found, dict) and is_envelope_schema(schema := found.get("schema")):
            met.setdefault(json.dumps(schema, sort_keys=True), (schema, data))
    return list(met.values())


def is_envelope_schema(schema: Any) -> bool:
    """Whether ``schema`` is a Connect struct with a ``before`` or ``after`` field."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        return False
    listed = schema.get("fields")
    if not isinstance(listed, list):
        return False
    return bool({f.get("field") for f in listed if isinstance(f, dict)} & {"before", "after"})


def _avro_type(spec: Any, named: dict[str, Any]) -> Any:
    """The non-null branch of a union, a named type resolved."""
    if isinstance(spec, list):
        branches = [b for b in spec if b != "null"]
        spec = branches[0] if len(branches) == 1 else None
    if isinstance(spec, str) and spec in named:
        return named[spec]
    return spec


def _avro_semantic(spec: Any) -> Semantic:
    if isinstance(spec, str):
        return Semantic(_AVRO_TO_CONNECT.get(spec, spec))
    if not isinstance(spec, dict):
        return Semantic("")
    params = spec.get("connect.parameters") or {}
    scale = _int(params.get("scale"))
    precision = _int(params.get("connect.decimal.precision"))
    if spec.get("logicalType") == "decimal":
        scale = scale if scale is not None else _int(spec.get("scale"))
        precision = precision if precision is not None else _int(spec.get("precision"))
    return Semantic(
        type=_AVRO_TO_CONNECT.get(str(spec.get("type")), str(spec.get("type"))),
        name=spec.get("connect.name"),
        scale=scale,
        precision=precision,
    )


def _collect_names(spec: Any, named: dict[str, Any], namespace: str = "") -> None:
    """Every named record of an Avro schema, by short and full name (for references)."""
    if isinstance(spec, list):
        for branch in spec:
            _collect_names(branch, named, namespace)
        return
    if not isinstance(spec, dict):
        return
    if spec.get("type") == "record" and "name" in spec:
        space = spec.get("namespace", namespace)
        named[spec["name"]] = spec
        named[f"{space}.{spec['name']}" if space else spec["name"]] = spec
        namespace = space
    for f in spec.get("fields") or []:
        if isinstance(f, dict):
            _collect_names(f.get("type"), named, namespace)


def _avro_record(spec: Any, named: dict[str, Any]) -> dict[str, Semantic]:
    spec = _avro_type(spec, named)
    if not isinstance(spec, dict) or spec.get("type") != "record":
        return {}
    return {
        str(f["name"]): _avro_semantic(_avro_type(f.get("type"), named))
        for f in spec.get("fields") or []
        if isinstance(f, dict) and "name" in f
    }


def from_avro_schema(text: str) -> Semantics:
    """The semantics in a Debezium envelope's Avro schema (the Avro converter's
    ``connect.name`` and ``connect.parameters``): ``after``'s fields and ``source``'s."""
    try:
        schema = json.loads(text)
    except ValueError:
        return NONE
    named: dict[str, Any] = {}
    _collect_names(schema, named)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return NONE
    parts = {str(f.get("name")): f for f in schema.get("fields") or [] if isinstance(f, dict)}
    row: dict[str, Semantic] = {}
    for image in ("before", "after"):
        if image in parts:
            row.update(_avro_record(parts[image].get("type"), named))
    source = _avro_record(parts["source"].get("type"), named) if "source" in parts else {}
    return Semantics(row, source)


def target_type(semantic: Semantic, current: DataType) -> DataType | None:
    """The type a field of Spark type ``current`` becomes; None if it stays as it is."""
    from pyspark.sql.types import (
        BinaryType,
        DateType,
        DecimalType,
        IntegerType,
        LongType,
        StringType,
        StructType,
        TimestampType,
    )

    name = semantic.name
    integral = isinstance(current, (LongType, IntegerType))
    if name in TIMESTAMP_MS or name in (MICRO_TIMESTAMP, NANO_TIMESTAMP):
        return TimestampType() if integral else None
    if name == ZONED_TIMESTAMP:
        return TimestampType() if isinstance(current, StringType) else None
    if name in DATE_DAYS:
        return DateType() if integral else None
    if name == DECIMAL and semantic.scale is not None:
        if not isinstance(current, (StringType, BinaryType)):
            return None
        precision = semantic.precision or MAX_PRECISION
        precision = min(max(precision, semantic.scale, 1), MAX_PRECISION)
        return DecimalType(precision, min(semantic.scale, precision))
    if name == VARIABLE_SCALE_DECIMAL:
        if isinstance(current, StructType) and {"scale", "value"} <= set(current.fieldNames()):
            return StringType()
        return None
    if semantic.type in ("int64", "int32") and isinstance(current, StringType):
        # A number read as text (a Debezium ``source`` block declared as a map of strings).
        return LongType() if semantic.type == "int64" else IntegerType()
    return None


def convert(value: Column, semantic: Semantic, current: DataType) -> Column | None:
    """``value`` (of Spark type ``current``) as :func:`target_type` says; None if unchanged.

    Spark SQL expressions only: the conversion runs in the JVM, record by record.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, DecimalType, StringType, StructType

    target = target_type(semantic, current)
    if target is None:
        return None
    name = semantic.name
    if name in TIMESTAMP_MS:
        return F.timestamp_millis(value.cast("long"))
    if name == MICRO_TIMESTAMP:
        return F.timestamp_micros(value.cast("long"))
    if name == NANO_TIMESTAMP:
        # Integer division (a double would round nanoseconds of today's instants).
        micros = F.floor(value.cast("decimal(20,0)") / F.lit(1000)).cast("long")
        return F.timestamp_micros(micros)
    if name == ZONED_TIMESTAMP:
        return value.try_cast("timestamp")  # text that does not parse: null, then marked
    if name in DATE_DAYS:
        return F.date_from_unix_date(value.cast("int"))
    if name == DECIMAL:
        assert isinstance(target, DecimalType)
        raw = value if isinstance(current, BinaryType) else F.unbase64(value)
        return connect_decimal(raw, F.lit(target.scale), target)
    if name == VARIABLE_SCALE_DECIMAL:
        assert isinstance(current, StructType)
        inner = current["value"].dataType
        raw = value["value"] if isinstance(inner, BinaryType) else F.unbase64(value["value"])
        scale = F.coalesce(value["scale"].cast("int"), F.lit(0))
        return connect_decimal(raw, scale, StringType())
    return value.try_cast(target)


def shown(value: Column, semantic: Semantic, current: DataType) -> Column:
    """A field's value (of Spark type ``current``) as a reason quotes it: a ``Decimal``'s
    bytes as the exact decimal (not their base64 text), any other value as its text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    if semantic.name == DECIMAL:
        raw = value if isinstance(current, BinaryType) else F.unbase64(value)
        return connect_decimal(raw, F.lit(semantic.scale or 0), StringType())
    return value.cast("string")


def connect_decimal(raw: Column, scale: Column, target: DataType) -> Column:
    """The big-endian two's-complement integer in ``raw`` (binary; Connect's Decimal: Java's
    ``BigInteger.toByteArray()``) at ``scale`` (int), as ``target``: a decimal type (null
    if it does not fit) or a string, its exact text; null for null or empty bytes.

    One JVM call per record (``dev.frazil.spark.ConnectDecimal``), in generated code."""
    return jvm_column("dev.frazil.spark.ConnectDecimal", "column", raw, scale, target.json())
