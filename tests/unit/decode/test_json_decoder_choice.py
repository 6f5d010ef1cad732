"""Which schemas frazil's JVM JSON decoder reads (others fall back to ``from_json``)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import types as T

from frazil.decode.json import JsonDecoder, frazil_reads


def _struct(**fields: Any) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in fields.items()])


@pytest.mark.parametrize(
    "schema",
    [
        _struct(a=T.StringType(), b=T.LongType(), c=T.IntegerType(), d=T.DoubleType(),
                e=T.FloatType(), f=T.BooleanType(), g=T.ShortType(), h=T.ByteType()),
        _struct(t=T.TimestampType(), n=T.TimestampNTZType(), d=T.DateType(), b=T.BinaryType()),
        _struct(dec=T.DecimalType(38, 10)),
        _struct(st=_struct(a=T.StringType(), b=T.ArrayType(
            _struct(c=T.MapType(T.StringType(), T.DecimalType(5, 2)))))),
    ],
)  # fmt: skip
def test_frazil_reads_every_declared_type(schema: T.StructType) -> None:
    assert frazil_reads(schema)


@pytest.mark.parametrize(
    "schema",
    [
        _struct(i=T.DayTimeIntervalType()),
        _struct(m=T.MapType(T.IntegerType(), T.StringType())),
        _struct(v=T.VariantType()),
        _struct(s=_struct(i=T.YearMonthIntervalType())),
        _struct(a=T.ArrayType(T.CalendarIntervalType())),
    ],
)
def test_types_the_frazil_decoder_leaves_to_from_json(schema: T.StructType) -> None:
    assert not frazil_reads(schema)


def test_the_unknown_field_reason_follows_the_schema_policy() -> None:
    schema = _struct(a=T.StringType())
    assert JsonDecoder(schema)._unknown_reason() is None
    assert JsonDecoder(schema, evolving=True)._unknown_reason() == "fields not in the schema yet"
    assert JsonDecoder(schema, strict=True)._unknown_reason() == (
        "fields not in the table's schema (schema_evolution: freeze)"
    )
