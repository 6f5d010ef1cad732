"""Why a JSON value does not fit its schema, worked out in the JVM from Spark's expressions
(``json_decoder: spark``; frazil's own decoder gives its reasons itself): the first field whose
value does not read as its type, and the fields the schema does not know (what an inferred
schema learns from).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import TYPE_CHECKING

from frazil.decode.errors import quoted_value

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType


#: What a type mismatch says when no top-level field can be named (one nested deeper).
MISMATCH = "a field does not match the schema's type"


def mismatch_reason(text: Column, parsed: Column, schema: StructType) -> Column:
    """Which field of a JSON object does not read as its schema type, and both types:
    ``field 'amount' has a value of type string, the schema's type is bigint`` (nested:
    ``field 'who.age'``).

    A field is named when the record holds a value for it (not ``null``) that ``from_json``
    could not read. The record's type comes from Spark's variant of the text (its JSON
    types: string, bigint, decimal(20,0), boolean, object, array). Fields of structs are
    looked into (a few levels); a mismatch inside an array or a map falls back to
    :data:`MISMATCH`. Only evaluated for records that failed to decode.
    """
    from pyspark.sql import functions as F

    variant = F.try_parse_json(text)
    named: list[Column] = []
    _mismatches(variant, parsed, schema, (), named)
    return F.coalesce(*named, F.lit(MISMATCH))


#: How deep into structs :func:`mismatch_reason` looks for the field.
_MISMATCH_DEPTH = 3


def _mismatches(
    variant: Column,
    parsed: Column,
    schema: StructType,
    names: tuple[str, ...],
    found: list[Column],
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BinaryType,
        DateType,
        DecimalType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    # Types a JSON string is a form of (from_json parses the text).
    parses_text = (TimestampType, TimestampNTZType, DateType, DecimalType, BinaryType)
    for field in schema.fields:
        path = (*names, field.name)
        # Lower-cased by translation, not Spark's lower: its first use in a JVM costs a
        # second and ~2 GB (see frazil.route.rules.sanitize); the kinds are ASCII, and a
        # field name in an object's shape is not shown.
        kind = F.translate(
            F.schema_of_variant(
                F.try_variant_get(variant, "$" + "".join(_step(n) for n in path), "variant")
            ),
            string.ascii_uppercase,
            string.ascii_lowercase,
        )
        # An object's or an array's full shape can be long: its kind says enough.
        shown = (
            F.when(kind.startswith("object"), F.lit("object"))
            .when(kind.startswith("array"), F.lit("array"))
            .otherwise(kind)
        )
        value = parsed[field.name]
        typed = F.concat(
            F.lit(f"field {'.'.join(path)!r} has a value of type "),
            shown,
            F.lit(f", the schema's type is {_short_type(field.dataType)}"),
        )
        if isinstance(field.dataType, parses_text):
            # A timestamp (decimal, date, base64) in text that does not parse: quote it.
            text = F.try_variant_get(variant, "$" + "".join(_step(n) for n in path), "string")
            typed = F.when(
                kind == F.lit("string"),
                F.concat(
                    F.lit(f"field {'.'.join(path)!r} does not parse as "
                          f"{_short_type(field.dataType)}: "),
                    quoted_value(text),
                ),
            ).otherwise(typed)  # fmt: skip
        found.append(F.when(kind.isNotNull() & (kind != F.lit("void")) & value.isNull(), typed))
        if isinstance(field.dataType, StructType) and len(path) < _MISMATCH_DEPTH:
            # from_json keeps what it could read of a struct: look for the field inside.
            _mismatches(variant, value, field.dataType, path, found)


def _short_type(data_type: DataType) -> str:
    """A type for a message: ``bigint``, ``array<string>``, or ``struct`` for a long one."""
    text = str(data_type.simpleString())
    return text if len(text) <= 40 else text.split("<", 1)[0]


def _path(name: str) -> str:
    return "$" + _step(name)


def _step(name: str) -> str:
    return "['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def unknown_fields(text: Column, schema: StructType) -> Column:
    """True for a JSON object holding a field ``schema`` lacks, at any depth (structs, list
    elements, map values). Each level is parsed again, only where the schema nests."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    names = [f.name for f in schema.fields]
    condition = F.exists(F.json_object_keys(text), lambda k: ~k.isin(names))
    for f in schema.fields:
        data_type = f.dataType
        if isinstance(data_type, StructType):
            sub = F.get_json_object(text, _path(f.name))
            condition = condition | unknown_fields(sub, data_type)
        elif isinstance(data_type, ArrayType) and isinstance(data_type.elementType, StructType):
            element = data_type.elementType
            items = F.from_json(F.get_json_object(text, _path(f.name)), "array<string>")
            condition = condition | F.exists(items, _nested(element))
        elif isinstance(data_type, MapType) and isinstance(data_type.valueType, StructType):
            value_type = data_type.valueType
            entries = F.from_json(F.get_json_object(text, _path(f.name)), "map<string,string>")
            condition = condition | F.exists(F.map_values(entries), _nested(value_type))
    return F.coalesce(condition, F.lit(False))


def _nested(schema: StructType) -> Callable[[Column], Column]:
    def check(item: Column) -> Column:
        return unknown_fields(item, schema)

    return check
