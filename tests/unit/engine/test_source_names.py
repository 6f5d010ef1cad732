"""Source column names that would collide in the batch or in Spark's reads are refused."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from frazil.config.loader import parse_config
from frazil.config.pipeline import PipelineConfig
from frazil.engine.source_names import check_source_names
from frazil.errors import ConfigError, DecodeError
from frazil.transform.metadata import metadata_fields


def _pipeline(**changes: Any) -> PipelineConfig:
    given = {"name": "orders", "topics": ["orders"], "table": "db.orders", **changes}
    return parse_config({"pipelines": [given]}).pipelines[0]


def _fields(*names: str) -> list[StructField]:
    return [StructField(n, LongType()) for n in names]


def test_distinct_names_pass() -> None:
    pipeline = _pipeline(kafka_metadata=["offset"])
    nested = StructField("m", StructType(_fields("x", "y")))
    check_source_names(
        pipeline, [*_fields("id", "_kafka_extra"), nested], None, metadata_fields(pipeline)
    )


@pytest.mark.parametrize("name", ["__frazil_op", "__FRAZIL_TABLE", "__frazil_whatever"])
def test_a_value_field_with_the_reserved_prefix_is_refused(name: str) -> None:
    with pytest.raises(DecodeError) as err:
        check_source_names(_pipeline(), _fields("id", name), None, [])
    assert str(err.value) == (
        f"pipeline 'orders' (topics orders): the value's field {name!r} takes a name frazil "
        "reserves for its own batch columns (prefix '__frazil_'), so its values would be lost; "
        "rename it where the records are produced or declare the value's schema "
        "(value.schema) without it"
    )


def test_value_fields_differing_only_in_case_are_refused() -> None:
    with pytest.raises(DecodeError, match=r"columns 'id' \(the value's field\) and 'ID' "
                       r"\(the value's field\) differ only in case \(one column to Spark\); "
                       "rename one of them"):  # fmt: skip
        check_source_names(_pipeline(), _fields("id", "amount", "ID"), None, [])


def test_a_key_column_named_like_a_value_field_points_at_key_column() -> None:
    pipeline = _pipeline(key_format="string")
    key = StructField("Key", StringType())
    with pytest.raises(ConfigError) as err:
        check_source_names(pipeline, _fields("key"), key, [])
    assert str(err.value) == (
        "pipeline 'orders' (topics orders): columns 'key' (the value's field) and 'Key' "
        "(the key column) differ only in case (one column to Spark); set key_column to "
        "another name"
    )


def test_a_metadata_column_named_like_a_value_field_points_at_kafka_metadata() -> None:
    pipeline = _pipeline(kafka_metadata=["offset", "partition"])
    with pytest.raises(ConfigError) as err:
        check_source_names(pipeline, _fields("_kafka_offset"), None, metadata_fields(pipeline))
    assert str(err.value) == (
        "pipeline 'orders' (topics orders): column '_kafka_offset' (the value's field and the "
        "Kafka metadata column) comes twice; leave 'offset' out of kafka_metadata"
    )


@pytest.mark.parametrize(
    ("data_type", "path"),
    [
        (StructType(_fields("x", "X")), "m"),
        (StructType([StructField("in", StructType(_fields("a", "b", "A")))]), "m.in"),
        (ArrayType(StructType(_fields("x", "X"))), "m[]"),
        (MapType(StringType(), StructType(_fields("x", "X"))), "m{}"),
    ],
)
def test_nested_names_differing_only_in_case_are_refused(data_type: Any, path: str) -> None:
    pipeline = _pipeline(format="avro", schema_file="o.avsc")
    with pytest.raises(DecodeError) as err:
        check_source_names(pipeline, [StructField("m", data_type)], None, [])
    assert f"the value's field {path!r} holds fields" in str(err.value)
    assert str(err.value).endswith(
        "differ only in case: Spark reads names case-insensitively and could not read the "
        "table; rename one of them where the records are produced"
    )
