"""Debezium envelopes: the shape a declared row arrives in, and the row a decoded one holds."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from frazil.config.writes import WriteConfig
from frazil.decode.debezium import envelope_schema, row_schema

ROW = StructType([StructField("id", LongType()), StructField("email", StringType())])
DEBEZIUM = WriteConfig(mode="cdc", key=["id"], debezium=True)


def test_a_declared_row_is_wrapped_in_both_envelope_shapes() -> None:
    envelope = envelope_schema(ROW)
    assert envelope.fieldNames() == ["before", "after", "op", "ts_ms", "source", "payload"]
    assert envelope["after"].dataType == ROW
    assert envelope["source"].dataType == MapType(StringType(), StringType(), True)
    payload = envelope["payload"].dataType
    assert isinstance(payload, StructType) and payload["before"].dataType == ROW
    strict = envelope_schema(ROW, strict=True)
    assert {"schema", "transaction"} <= set(strict.fieldNames())


def test_the_row_of_a_plain_a_wrapped_and_an_avro_envelope() -> None:
    assert row_schema(envelope_schema(ROW), DEBEZIUM) == ROW
    wrapped = StructType(
        [StructField("schema", StringType()), StructField("payload", envelope_schema(ROW))]
    )
    assert row_schema(wrapped, DEBEZIUM).fieldNames() == ["id", "email"]
    source = StructType([StructField("lsn", LongType()), StructField("db", StringType())])
    avro = StructType(
        [
            StructField("before", ROW),
            StructField("after", ROW),
            StructField("source", source),
            StructField("op", StringType()),
            StructField("ts_ms", LongType()),
        ]
    )
    kept = WriteConfig(
        mode="cdc", key=["id"], debezium=True, debezium_fields=["source.lsn", "op", "ts_ms"]
    )
    schema = row_schema(avro, kept)
    assert [(f.name, f.dataType) for f in schema.fields][2:] == [
        ("__source_lsn", LongType()),
        ("__op", StringType()),
        ("__ts_ms", LongType()),
    ]


def test_kept_source_numbers_of_a_declared_envelope_are_numbers() -> None:
    """A declared envelope reads ``source`` as a map of strings: the fields Debezium's
    connectors declare as integers are numbers again (an ``order_by`` on them then
    compares 1000 above 999), the others stay text; a schema's own word wins."""
    from frazil.decode.connect_types import Semantic, Semantics

    kept = WriteConfig(
        mode="cdc",
        key=["id"],
        debezium=True,
        debezium_fields=["source.lsn", "source.row", "source.db", "source.change_lsn"],
    )
    schema = row_schema(envelope_schema(ROW), kept)
    assert [(f.name, f.dataType) for f in schema.fields][2:] == [
        ("__source_lsn", LongType()),
        ("__source_row", IntegerType()),
        ("__source_db", StringType()),
        ("__source_change_lsn", StringType()),
    ]
    said = Semantics({}, {"lsn": Semantic("string")})
    assert row_schema(envelope_schema(ROW), kept, said)["__source_lsn"].dataType == StringType()


def test_before_only_fields_join_the_row() -> None:
    wider = StructType([*ROW.fields, StructField("legacy", IntegerType())])
    envelope = StructType([StructField("before", wider), StructField("after", ROW)])
    assert row_schema(envelope, DEBEZIUM).fieldNames() == ["id", "email", "legacy"]


def test_not_an_envelope() -> None:
    with pytest.raises(ValueError, match="no 'after' or 'before' record"):
        row_schema(ROW, DEBEZIUM)
