"""Decoded shapes as they grow: fields learned from later records merged into a schema,
inferred fields put in the order the records hold them, and a value of one shape read as
another (:func:`conform`). Shared by the decoders that learn (JSON's inference, Protobuf's
newer writers), the decoder of several Avro record types and the tables' writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType


def merge_fields(old: StructType, new: StructType) -> StructType:
    """``old`` with the fields of ``new`` it lacks added, at any depth; existing types stay,
    but for the widenings an Iceberg column takes (int to bigint, float to double, a decimal's
    precision with its scale)."""
    from pyspark.sql.types import StructField, StructType

    fields = list(old.fields)
    index = {f.name.lower(): i for i, f in enumerate(fields)}
    for f in new.fields:
        if f.name == "_corrupt_record":
            continue
        i = index.get(f.name.lower())
        if i is None:
            fields.append(StructField(f.name, f.dataType, True))
            continue
        merged = _merge_type(fields[i].dataType, f.dataType)
        fields[i] = StructField(fields[i].name, merged, fields[i].nullable)
    return StructType(fields)


def _merge_type(old: DataType, new: DataType) -> DataType:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(old, StructType) and isinstance(new, StructType):
        return merge_fields(old, new)
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(_merge_type(old.elementType, new.elementType), old.containsNull)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return MapType(
            old.keyType, _merge_type(old.valueType, new.valueType), old.valueContainsNull
        )
    return new if promotes(old, new) else old


def promotes(old: DataType, new: DataType) -> bool:
    """Whether ``new`` is one of Iceberg's type promotions of ``old``: int to long (from any
    narrower integer), float to double, a decimal's precision with its scale."""
    from pyspark.sql.types import (
        ByteType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
    )

    if isinstance(old, (ByteType, ShortType, IntegerType)) and isinstance(new, LongType):
        return True
    if isinstance(old, FloatType) and isinstance(new, DoubleType):
        return True
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    return False


#: Field names in the order records first hold them, at each depth (a nested object's, a
#: list's objects').
_Order = dict[str, "_Order"]


def in_record_order(schema: StructType, values: list[str]) -> StructType:
    """``schema`` (inferred by Spark, which sorts fields by name) with its fields in the order
    the sampled ``values`` first hold them, at every depth: a table's columns as its
    producer writes them (a Debezium row's as its source table has them). A name Spark's
    inference gives twice (a record holding the key twice) is one field, of the last one's
    type."""
    order: _Order = {}
    for text in values:
        try:
            found = json.loads(text)
        except ValueError:
            continue
        _note_order(order, found)
    reordered = _reorder(schema, order)
    assert isinstance(reordered, type(schema))
    return reordered


def _note_order(order: _Order, value: Any) -> None:
    if isinstance(value, dict):
        for name, inner in value.items():
            _note_order(order.setdefault(str(name), {}), inner)
    elif isinstance(value, list):
        for item in value:
            _note_order(order, item)


def _reorder(data_type: DataType, order: _Order) -> DataType:
    from pyspark.sql.types import ArrayType, StructField, StructType

    if isinstance(data_type, ArrayType):
        return ArrayType(_reorder(data_type.elementType, order), data_type.containsNull)
    if not isinstance(data_type, StructType):
        return data_type
    rank = {name: i for i, name in enumerate(order)}
    # A record holding a key twice gives Spark's inference the field twice; the decoders read
    # its last value (as from_json), so the last field's type stands, once.
    last = {f.name: f for f in data_type.fields}
    fields = sorted(last.values(), key=lambda f: rank.get(f.name, len(rank)))
    return StructType(
        [
            StructField(f.name, _reorder(f.dataType, order.get(f.name, {})), f.nullable, f.metadata)
            for f in fields
        ]
    )


def let(bound: Column, body: Callable[[Column], Column]) -> Column:
    """``body`` of ``bound``, with ``bound`` computed once per record: a lambda's argument is
    computed once, where an expression named in many places may be computed in each (Spark
    shares no work inside a condition's branches)."""
    from pyspark.sql import functions as F

    return F.transform(F.array(bound), body)[0]


def conform(column: Column, batch: DataType, table: DataType) -> Column:
    """``column`` (of ``batch`` type) in the table's shape: nested fields by name, in the
    table's order, null where the batch has none; safe casts for narrower primitives."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if batch == table:
        return column
    if isinstance(batch, StructType) and isinstance(table, StructType):
        lowered = {f.name.lower(): f for f in batch.fields}
        parts = []
        for f in table.fields:
            source = lowered.get(f.name.lower())
            if source is None:
                parts.append(F.lit(None).cast(f.dataType).alias(f.name))
            else:
                parts.append(
                    conform(column.getField(source.name), source.dataType, f.dataType).alias(f.name)
                )
        return F.when(column.isNotNull(), F.struct(*parts))
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        element_batch, element_table = batch.elementType, table.elementType
        return F.transform(column, lambda e: conform(e, element_batch, element_table))
    if isinstance(batch, MapType) and isinstance(table, MapType):
        value_batch, value_table = batch.valueType, table.valueType
        return F.transform_values(column, lambda _, v: conform(v, value_batch, value_table))
    return column.cast(table)
