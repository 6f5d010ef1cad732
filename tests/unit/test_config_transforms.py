"""Config of ``transforms:``: the models, exact key paths and reasons (no schema, no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.config import parse_config
from frazil.config.transforms import (
    Cast,
    Derive,
    Drop,
    Filter,
    Flatten,
    ParseJson,
    ParseTimestamp,
    Rename,
    transform_name,
)
from frazil.errors import ConfigError

_ONE_KEY = (
    "each transform is a mapping with one key, its name: flatten, parse_timestamp, rename, "
    "drop, cast, derive, filter or parse_json"
)


def _pipeline(transforms: Any) -> dict[str, Any]:
    return {"name": "p", "topics": ["t"], "table": "db.t", "transforms": transforms}


def _transforms(transforms: Any) -> list[Any]:
    return list(parse_config({"pipelines": [_pipeline(transforms)]}).pipelines[0].transforms)


def _problems(transforms: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(transforms)]})
    return info.value.problems


def test_every_transform_of_the_docs_parses_in_order() -> None:
    transforms = _transforms(
        [
            {"flatten": {"separator": "_", "max_depth": 3}},
            {
                "parse_timestamp": {
                    "field": "created_at",
                    "format": "yyyy-MM-dd HH:mm:ss",
                    "timezone": "Asia/Tokyo",
                }
            },
            {"parse_timestamp": {"field": "ts_ms", "unit": "millis", "as": "ts"}},
            {"rename": {"payer": "payer_name", "customer.name": "customer_name"}},
            {"drop": ["document", "meta.trace"]},
            {"cast": {"amount": "decimal(12,2)", "amount.value": "double"}},
            {"derive": {"amount_jpy": "amount * 150"}},
            {"filter": "type <> 'test'"},
            {"parse_json": {"field": "payload", "as": "map"}},
            {"parse_json": {"field": "p2", "as": "map<string,long>"}},
            {"parse_json": {"field": "p3", "as": "struct", "schema": {"a": "int", "b": "string"}}},
        ]
    )
    kinds = [type(t) for t in transforms]
    assert kinds == [
        Flatten, ParseTimestamp, ParseTimestamp, Rename, Drop, Cast, Derive, Filter,
        ParseJson, ParseJson, ParseJson,
    ]  # fmt: skip
    assert [transform_name(t) for t in transforms] == [
        "flatten", "parse_timestamp", "parse_timestamp", "rename", "drop", "cast", "derive",
        "filter", "parse_json", "parse_json", "parse_json",
    ]  # fmt: skip
    stamp = transforms[2].parse_timestamp
    assert (stamp.field, stamp.unit, stamp.as_, stamp.format) == ("ts_ms", "millis", "ts", None)
    assert transforms[8].parse_json.spark_type() == "MAP<STRING, STRING>"
    assert transforms[9].parse_json.spark_type() == "MAP<STRING, BIGINT>"
    assert transforms[10].parse_json.spark_type() == "STRUCT<a: INT, b: STRING>"


def test_flatten_defaults_with_or_without_a_mapping() -> None:
    bare, empty = _transforms([{"flatten": None}, {"flatten": {}}])
    assert bare == empty
    assert (bare.flatten.separator, bare.flatten.max_depth) == ("_", None)


@pytest.mark.parametrize(
    ("transforms", "key", "reason"),
    [
        (
            [{"unknown": 1}],
            "pipelines[0].transforms[0]",
            f"unknown transform 'unknown'; {_ONE_KEY}",
        ),
        (["flatten"], "pipelines[0].transforms[0]", _ONE_KEY),
        ([{"rename": {"a": "b"}, "drop": ["c"]}], "pipelines[0].transforms[0]", _ONE_KEY),
        (
            [{"flatten": {"max_depth": 0}}],
            "pipelines[0].transforms[0].flatten.max_depth",
            "Input should be greater than 0",
        ),
        (
            [{"flatten": {"separator": "."}}],
            "pipelines[0].transforms[0].flatten.separator",
            "separator '.' must be letters, digits and '_'",
        ),
        ([{"flatten": {"depth": 2}}], "pipelines[0].transforms[0].flatten.depth", "unknown key"),
        (
            [{"rename": {"a..b": "c"}}],
            "pipelines[0].transforms[0].rename",
            "field 'a..b' must be a column name or a dotted path (a.b)",
        ),
        (
            [{"rename": {"a": "bad name"}}],
            "pipelines[0].transforms[0].rename",
            "column name 'bad name' must be letters, digits and '_'",
        ),
        (
            [{"rename": {}}],
            "pipelines[0].transforms[0].rename",
            "Dictionary should have at least 1 item after validation, not 0",
        ),
        (
            [{"drop": []}],
            "pipelines[0].transforms[0].drop",
            "List should have at least 1 item after validation, not 0",
        ),
        (
            [{"drop": ["a b"]}],
            "pipelines[0].transforms[0].drop",
            "field 'a b' must be a column name or a dotted path (a.b)",
        ),
        (
            [{"cast": {"a": "decimal(40,2)"}}],
            "pipelines[0].transforms[0].cast",
            "field 'a': decimal(40,2) needs 1 <= precision <= 38 and scale <= precision",
        ),
        (
            [{"derive": {"__frazil_x": "1"}}],
            "pipelines[0].transforms[0].derive",
            "column name '__frazil_x': the prefix '__frazil_' is reserved",
        ),
        (
            [{"derive": {"x": ""}}],
            "pipelines[0].transforms[0].derive.x",
            "String should have at least 1 character",
        ),
        (
            [{"filter": ""}],
            "pipelines[0].transforms[0].filter",
            "String should have at least 1 character",
        ),
        (
            [{"parse_timestamp": {"field": "a", "format": "yyyy", "unit": "millis"}}],
            "pipelines[0].transforms[0].parse_timestamp",
            "set 'format' for strings or 'unit' for epoch numbers, not both",
        ),
        (
            [{"parse_timestamp": {"field": "a", "unit": "millis", "timezone": "UTC"}}],
            "pipelines[0].transforms[0].parse_timestamp",
            "'timezone' applies to strings; an epoch number is already UTC",
        ),
        (
            [{"parse_timestamp": {"field": "a", "unit": "hours"}}],
            "pipelines[0].transforms[0].parse_timestamp.unit",
            "Input should be 'seconds', 'millis', 'micros' or 'nanos'",
        ),
        (
            [{"parse_timestamp": {"field": "a", "timezone": "Mars/Olympus"}}],
            "pipelines[0].transforms[0].parse_timestamp.timezone",
            "unknown time zone 'Mars/Olympus' (a region such as Asia/Tokyo, or an offset "
            "such as +09:00)",
        ),
        (
            [{"parse_timestamp": {"format": "yyyy"}}],
            "pipelines[0].transforms[0].parse_timestamp.field",
            "required key is missing",
        ),
        (
            [{"parse_timestamp": {"field": "a", "as": "1x"}}],
            "pipelines[0].transforms[0].parse_timestamp.as",
            "column name '1x' must be letters, digits and '_'",
        ),
        (
            [{"parse_json": {"field": "a", "as": "struct"}}],
            "pipelines[0].transforms[0].parse_json",
            "'as: struct' needs 'schema' (field: type, ...)",
        ),
        (
            [{"parse_json": {"field": "a", "schema": {"x": "int"}}}],
            "pipelines[0].transforms[0].parse_json",
            "'schema' goes with 'as: struct'",
        ),
        (
            [{"parse_json": {"field": "a", "as": "int"}}],
            "pipelines[0].transforms[0].parse_json",
            "'as' must be map, struct, or a map/struct/array type, not 'int'",
        ),
        (
            [{"parse_json": {"field": "a", "as": "struct", "schema": {}}}],
            "pipelines[0].transforms[0].parse_json.schema",
            "must declare at least one field",
        ),
        (
            [{"parse_json": {"field": "a", "as": "struct", "schema": {"x y": "int"}}}],
            "pipelines[0].transforms[0].parse_json.schema",
            "column name 'x y' must be letters, digits and '_'",
        ),
    ],
)
def test_invalid_transforms_name_key_and_reason(transforms: Any, key: str, reason: str) -> None:
    assert _problems(transforms) == [(key, reason)]


def test_time_zones_by_region_or_offset() -> None:
    for zone in ("Asia/Tokyo", "UTC", "+09:00", "-05:00", "UTC+9", "GMT-03:30", "Z"):
        (transform,) = _transforms([{"parse_timestamp": {"field": "a", "timezone": zone}}])
        assert transform.parse_timestamp.timezone == zone


def test_problems_of_several_transforms_are_all_reported() -> None:
    problems = _problems(
        [{"drop": []}, {"rename": {"ok": "fine"}}, {"cast": {"a": "nope"}}, {"what": {}}]
    )
    assert [key for key, _ in problems] == [
        "pipelines[0].transforms[0].drop",
        "pipelines[0].transforms[2].cast",
        "pipelines[0].transforms[3]",
    ]
