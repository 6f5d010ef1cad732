"""Inferred JSON schemas keep the records' field order (Spark's inference sorts by name)."""

from __future__ import annotations

import json

from pyspark.sql import types as T

from frazil.decode.shapes import in_record_order


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in fields])


def test_fields_follow_the_order_records_first_hold_them_at_every_depth() -> None:
    row = _struct(("a", T.StringType()), ("qty", T.LongType()), ("z", T.LongType()))
    inferred = _struct(
        ("after", row),
        ("before", row),
        ("items", T.ArrayType(_struct(("x", T.LongType()), ("w", T.LongType())))),
        ("op", T.StringType()),
    )
    values = [
        json.dumps({"before": None, "after": {"z": 1, "a": "x", "qty": 2}, "op": "c"}),
        "not json",
        json.dumps({"op": "u", "items": [{"w": 1}, {"x": 2, "w": 3}], "after": {"z": 2}}),
    ]

    ordered = in_record_order(inferred, values)

    assert ordered.fieldNames() == ["before", "after", "op", "items"]
    after = ordered["after"].dataType
    assert isinstance(after, T.StructType) and after.fieldNames() == ["z", "a", "qty"]
    items = ordered["items"].dataType
    assert isinstance(items, T.ArrayType) and isinstance(items.elementType, T.StructType)
    assert items.elementType.fieldNames() == ["w", "x"]
    # A field no sampled record names (learned from elsewhere) keeps its place at the end.
    assert in_record_order(
        _struct(("b", T.LongType()), ("a", T.LongType())), ['{"a": 1}']
    ).fieldNames() == ["a", "b"]


def test_a_key_a_record_holds_twice_is_one_field_of_the_last_ones_type() -> None:
    # Spark's inference of {"kind": 1, "kind": "a", "m": {"x": 1, "x": 2}}: each field twice.
    inner = _struct(("x", T.LongType()), ("x", T.LongType()))
    inferred = _struct(("kind", T.LongType()), ("kind", T.StringType()), ("m", inner), ("m", inner))
    values = ['{"kind": 1, "kind": "a", "m": {"x": 1, "x": 2}}']

    ordered = in_record_order(inferred, values)

    assert ordered == _struct(("kind", T.StringType()), ("m", _struct(("x", T.LongType()))))
