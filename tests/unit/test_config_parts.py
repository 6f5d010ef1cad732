"""Pure parsers behind the config: types, partition transforms, durations, offsets, markers."""

from __future__ import annotations

import pytest

from frazil.config.durations import parse_duration
from frazil.config.partitioning import PartitionField, parse_partition_field
from frazil.config.types import TypeSyntaxError, to_spark_ddl
from frazil.source.offsets import merge_offsets, offsets_from_json, offsets_to_json


@pytest.mark.parametrize(
    ("text", "ddl"),
    [
        ("long", "BIGINT"),
        ("Timestamp", "TIMESTAMP"),
        ("decimal(10, 2)", "DECIMAL(10,2)"),
        ("array<string>", "ARRAY<STRING>"),
        ("map<string,long>", "MAP<STRING, BIGINT>"),
        ("struct<a:int,b:array<double>>", "STRUCT<a: INT, b: ARRAY<DOUBLE>>"),
    ],
)
def test_types(text: str, ddl: str) -> None:
    assert to_spark_ddl(text) == ddl


@pytest.mark.parametrize("text", ["strng", "decimal(40,2)", "array<>", "map<string>", "struct<a>"])
def test_bad_types(text: str) -> None:
    with pytest.raises(TypeSyntaxError):
        to_spark_ddl(text)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("region", PartitionField("identity", "region")),
        ("days(created_at)", PartitionField("days", "created_at")),
        ("day(created_at)", PartitionField("days", "created_at")),
        ("hours(ts)", PartitionField("hours", "ts")),
        ("bucket(16, id)", PartitionField("bucket", "id", 16)),
        ("truncate(4,document)", PartitionField("truncate", "document", 4)),
    ],
)
def test_partition_transforms(text: str, field: PartitionField) -> None:
    assert parse_partition_field(text) == field


def test_partition_sql() -> None:
    assert PartitionField("bucket", "id", 16).to_spark_sql() == "bucket(16, id)"
    assert PartitionField("identity", "region").to_spark_sql() == "region"


@pytest.mark.parametrize("text", ["dayz(x)", "bucket(x)", "bucket(0, x)", "days(", "1col"])
def test_bad_partition_transforms(text: str) -> None:
    with pytest.raises(ValueError):
        parse_partition_field(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("10 seconds", 10.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_offsets_json_round_trip_and_merge() -> None:
    offsets = {"t": {1: 10, 0: 5}}
    text = offsets_to_json(offsets)
    assert text == '{"t":{"0":5,"1":10}}'
    assert offsets_from_json(text) == {"t": {0: 5, 1: 10}}
    merged = merge_offsets({"t": {0: 5, 1: 10}}, {"t": {1: 12, 2: 1}, "u": {0: 3}})
    assert merged == {"t": {0: 5, 1: 12, 2: 1}, "u": {0: 3}}
    assert merge_offsets({"t": {0: 9}}, {"t": {0: 3}}) == {"t": {0: 9}}
