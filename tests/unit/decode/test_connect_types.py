"""Kafka Connect and Debezium semantic types: read from the schemas, mapped to Spark types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from frazil.config.writes import WriteConfig
from frazil.decode.connect_types import (
    Semantic,
    connect_schemas_of,
    from_avro_schema,
    from_connect_schema,
    spark_type,
    target_type,
)
from frazil.decode.debezium import connect_envelope, envelope_schema, read_envelope, row_schema

ROW_FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1, "field": "created"},
    {"type": "int32", "name": "io.debezium.time.Date", "version": 1, "field": "born"},
    {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "price",
    },
]
#: A JSON converter's embedded schema of a Debezium envelope (schemas.enable=true).
CONNECT = {
    "type": "struct",
    "name": "dbserver1.inventory.customers.Envelope",
    "fields": [
        {"type": "struct", "optional": True, "fields": ROW_FIELDS, "field": "before"},
        {"type": "struct", "optional": True, "fields": ROW_FIELDS, "field": "after"},
        {
            "type": "struct",
            "name": "io.debezium.connector.postgresql.Source",
            "fields": [
                {"type": "string", "field": "connector"},
                {"type": "int64", "optional": True, "field": "lsn"},
            ],
            "field": "source",
        },
        {"type": "string", "field": "op"},
    ],
}


def test_the_embedded_connect_schema_names_the_rows_and_the_sources_fields() -> None:
    found = from_connect_schema(CONNECT)
    assert found.row["created"] == Semantic("int64", "io.debezium.time.Timestamp")
    assert found.row["price"] == Semantic(
        "bytes", "org.apache.kafka.connect.data.Decimal", scale=2, precision=10
    )
    assert found.row["id"] == Semantic("int64")
    assert found.source["lsn"] == Semantic("int64")
    assert not from_connect_schema({"type": "string"})


def test_each_sampled_envelope_schema_is_taken_once_in_the_order_met() -> None:
    envelope = json.dumps({"schema": CONNECT, "payload": {}}).encode()
    values = [b"not json", json.dumps({"id": 1}).encode(), b"\x00\x00\x00\x00\x07" + envelope]
    assert connect_schemas_of(values) == [(CONNECT, values[2])]
    other = {**CONNECT, "name": "orders.Envelope"}
    second = json.dumps({"schema": other, "payload": {}}).encode()
    assert connect_schemas_of([envelope, second, envelope]) == [
        (CONNECT, envelope),
        (other, second),
    ]
    empty = json.dumps({"schema": {"type": "struct", "fields": []}}).encode()
    assert connect_schemas_of([empty]) == []


#: The Avro converter's schema of the same envelope (connect.name, connect.parameters).
AVRO = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.customers",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "long"},
                        {
                            "name": "created",
                            "type": {
                                "type": "long",
                                "connect.version": 1,
                                "connect.name": "io.debezium.time.Timestamp",
                            },
                        },
                        {
                            "name": "price",
                            "type": [
                                "null",
                                {
                                    "type": "bytes",
                                    "scale": 2,
                                    "precision": 10,
                                    "connect.version": 1,
                                    "connect.parameters": {
                                        "scale": "2",
                                        "connect.decimal.precision": "10",
                                    },
                                    "connect.name": "org.apache.kafka.connect.data.Decimal",
                                    "logicalType": "decimal",
                                },
                            ],
                        },
                    ],
                },
            ],
        },
        {"name": "after", "type": ["null", "Value"]},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "fields": [{"name": "lsn", "type": ["null", "long"]}],
            },
        },
        {"name": "op", "type": "string"},
    ],
}


def test_the_avro_converters_connect_names_and_parameters() -> None:
    found = from_avro_schema(json.dumps(AVRO))
    assert found.row["created"] == Semantic("int64", "io.debezium.time.Timestamp")
    assert found.row["price"].scale == 2 and found.row["price"].precision == 10
    assert found.source["lsn"] == Semantic("int64")
    assert not from_avro_schema("not json")


def test_each_semantic_type_maps_to_its_table_type() -> None:
    def mapped(name: str, kind: object, **extra: int) -> object:
        return target_type(Semantic("x", name, **extra), kind)  # type: ignore[arg-type]

    for name in (
        "io.debezium.time.Timestamp",
        "io.debezium.time.MicroTimestamp",
        "io.debezium.time.NanoTimestamp",
        "org.apache.kafka.connect.data.Timestamp",
    ):
        assert mapped(name, LongType()) == TimestampType()
    assert mapped("io.debezium.time.ZonedTimestamp", StringType()) == TimestampType()
    assert mapped("io.debezium.time.Date", IntegerType()) == DateType()
    assert mapped("org.apache.kafka.connect.data.Date", LongType()) == DateType()
    decimal = "org.apache.kafka.connect.data.Decimal"
    assert mapped(decimal, StringType(), scale=2, precision=10) == DecimalType(10, 2)
    assert mapped(decimal, BinaryType(), scale=3) == DecimalType(38, 3)
    variable = StructType([StructField("scale", IntegerType()), StructField("value", StringType())])
    assert mapped("io.debezium.data.VariableScaleDecimal", variable) == StringType()
    # Times of day stay counts; a type Avro's logicalType already gave stays; so do others.
    for name in (
        "io.debezium.time.Time",
        "io.debezium.time.MicroTime",
        "io.debezium.time.NanoTime",
    ):
        assert mapped(name, LongType()) is None
    assert mapped("org.apache.kafka.connect.data.Time", IntegerType()) is None
    assert mapped("io.debezium.time.Timestamp", TimestampType()) is None
    assert mapped(decimal, DecimalType(10, 2), scale=2) is None
    assert mapped("io.debezium.data.Json", StringType()) is None
    # A number read as text (a source block declared as a map of strings) is a number again.
    assert target_type(Semantic("int64"), StringType()) == LongType()
    assert target_type(Semantic("int64"), DoubleType()) is None


def test_the_row_schema_of_a_declared_envelope_with_semantics() -> None:
    row = StructType(
        [
            StructField("id", LongType()),
            StructField("created", LongType()),
            StructField("born", LongType()),
            StructField("price", StringType()),
        ]
    )
    write = WriteConfig(mode="cdc", key=["id"], debezium=True, debezium_fields=["source.lsn"])
    schema = row_schema(envelope_schema(row), write, from_connect_schema(CONNECT))
    assert [(f.name, f.dataType) for f in schema.fields] == [
        ("id", LongType()),
        ("created", TimestampType()),
        ("born", DateType()),
        ("price", DecimalType(10, 2)),
        ("__source_lsn", LongType()),
    ]
    # Without an embedded schema the row's fields keep their declared types; source.lsn
    # is the number Debezium's connectors declare.
    plain = row_schema(envelope_schema(row), write)
    assert plain["created"].dataType == LongType()
    assert plain["__source_lsn"].dataType == LongType()


def test_a_connect_schema_reads_as_the_json_converter_writes_it() -> None:
    from pyspark.sql.types import ArrayType, FloatType, MapType

    spec = {
        "type": "struct",
        "fields": [
            {"type": "int32", "field": "qty"},
            {"type": "int64", "field": "id"},
            {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "p"},
            {"type": "array", "items": {"type": "float32"}, "field": "xs"},
            {"type": "map", "keys": {"type": "string"}, "values": {"type": "float64"},
             "field": "m"},
        ],
    }  # fmt: skip
    assert spark_type(spec) == StructType(
        [
            StructField("qty", IntegerType()),
            StructField("id", LongType()),
            StructField("p", StringType()),  # base64 text, mapped by its semantic type
            StructField("xs", ArrayType(FloatType())),
            StructField("m", MapType(StringType(), DoubleType())),
        ]
    )
    # A map with other keys is written as a list of pairs: not read this way.
    assert (
        spark_type({"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}}) is None
    )


def test_an_embedded_envelope_schema_gives_the_rows_fields_in_order() -> None:
    row = [{"type": "int32", "field": "b"}, {"type": "string", "field": "a"}]
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": row, "field": "before"},
            {"type": "struct", "fields": row, "field": "after"},
            {"type": "string", "field": "op"},
            {"type": "int64", "field": "ts_us"},
        ],
    }
    envelope = connect_envelope(schema)
    assert envelope is not None
    expected_row = StructType([StructField("b", IntegerType()), StructField("a", StringType())])
    payload = envelope["payload"].dataType
    assert isinstance(payload, StructType)
    assert payload["after"].dataType == expected_row
    assert payload["ts_us"].dataType == LongType()
    assert envelope.fieldNames() == ["payload", "schema"]
    assert "transaction" in payload.fieldNames()
    assert (
        connect_envelope({"type": "struct", "fields": [{"type": "string", "field": "x"}]}) is None
    )


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ("text", "it is not a JSON object"),
        ({"type": "string"}, "its type is 'string', not 'struct'"),
        ({"type": "struct", "fields": "none"}, "its 'fields' is not a list"),
        ({"type": "struct", "fields": [{"type": "string", "field": "op"}]},
         "it has no 'before' or 'after' field"),
        ({"type": "struct", "fields": [{"type": "string", "field": "after"}]},
         "field 'after' is not a struct"),
        ({"type": "struct", "fields": [
            {"type": "struct", "field": "after", "fields": [{"type": "int128", "field": "n"}]}
        ]}, "field 'after.n' has type 'int128', not a Connect type"),
        ({"type": "struct", "fields": [
            {"type": "struct", "field": "before", "fields": [{"type": "int32"}]}
        ]}, "a field of field 'before' has no name ('field')"),
        ({"type": "struct", "fields": [
            {"type": "struct", "field": "after", "fields": [
                {"type": "array", "field": "xs", "items": {"optional": True}}]}
        ]}, "field 'after.xs[]' has no 'type'"),
    ],
)  # fmt: skip
def test_an_embedded_schema_connect_cannot_read_says_where(schema: Any, reason: str) -> None:
    assert read_envelope(schema) == f"the embedded Connect schema is malformed: {reason}"
    assert connect_envelope(schema) is None
