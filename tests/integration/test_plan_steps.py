"""The batch plan's steps on hand-made Kafka rows (no broker): decode marks, never raises.

Every step runs in the session's JVM over a DataFrame shaped like Spark's Kafka source.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from frazil import columns as c
from frazil.config import parse_config
from frazil.decode.json import JsonDecoder
from frazil.decode.json_infer import schema_from_config
from frazil.decode.registry import get_format
from frazil.engine.plan import build_plan
from frazil.errors import ConfigError

pytestmark = pytest.mark.integration

_RAW = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"


def _pipeline(**extra: Any) -> Any:
    data = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": {"id": "string", "amount": "long", "at": "timestamp"},
        **extra,
    }
    return parse_config({"pipelines": [data]}).pipelines[0]


def _raw(spark: Any, values: list[bytes | None]) -> Any:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    rows = [(b"k", v, "t", 0, i, at) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, _RAW)


def test_plan_marks_every_kind_of_bad_json_and_skips_tombstones(spark: Any) -> None:
    pipeline = _pipeline(kafka_metadata=["offset", "key"])
    plan = build_plan(pipeline, JsonDecoder(schema_from_config(pipeline)))
    values = [
        b'{"id": "a", "amount": 5, "at": "2026-01-01T00:00:00Z"}',
        b"[1, 2]",
        b"42",
        b'"text"',
        b"null",
        b"",
        b'{"id": "b", "amount": "lots"}',
        b'{"id": "c", "amount": 99999999999999999999}',
        b'{"id": ',
        None,
    ]

    rows = plan.run(_raw(spark, values)).orderBy(c.OFFSET).collect()

    assert [name for name, _ in plan.describe()] == [
        "source", "decode", "metadata", "route", "mode", "prune",
    ]  # fmt: skip
    first = rows[0].asDict()
    assert first["id"] == "a" and first["amount"] == 5 and first[c.ERROR] is None
    assert first["_kafka_offset"] == 0 and first["_kafka_key"] == "k"
    assert first[c.TABLE] == ["db.t"] and first[c.OP] == c.OP_APPEND
    assert first[c.TIMESTAMP_MS] == 1767323045000
    errors = [(r[c.OFFSET], r[c.ERROR]["stage"], r[c.ERROR]["reason"]) for r in rows[1:-1]]
    not_object = "not a JSON object (malformed JSON, an array, a string, a number or null)"
    assert errors == [
        (1, "decode", not_object),
        (2, "decode", not_object),
        (3, "decode", not_object),
        (4, "decode", not_object),
        (5, "decode", "empty value"),
        (6, "decode", "field 'amount' has a value of type string, the schema's type is bigint"),
        (
            7,
            "decode",
            "field 'amount' has a value of type decimal(20,0), the schema's type is bigint",
        ),
        (8, "decode", not_object),
    ]
    assert rows[6][c.ERROR]["detail"] == '{"id": "b", "amount": "lots"}'
    tombstone = rows[-1]
    assert tombstone[c.ERROR] is None and tombstone[c.OP] == c.OP_SKIP
    # The raw record is pruned once decoded; provenance stays.
    assert c.VALUE not in rows[0].asDict() and c.PARTITION in rows[0].asDict()


def test_a_type_mismatch_names_the_field_and_both_types_at_any_depth(spark: Any) -> None:
    schema = {"id": "string", "who": "struct<name:string,age:bigint>", "n": "int"}
    pipeline = _pipeline(schema=schema)
    plan = build_plan(pipeline, JsonDecoder(schema_from_config(pipeline)))
    values = [
        b'{"id": "a", "who": {"name": "x", "age": "old"}, "n": 1}',
        b'{"id": "b", "who": "x", "n": 1}',
        b'{"id": "c", "who": null, "n": true}',
        b'{"id": "d", "n": {"deep": [1]}}',
    ]

    rows = plan.run(_raw(spark, values)).orderBy(c.OFFSET).collect()

    assert [r[c.ERROR]["reason"] for r in rows] == [
        "field 'who.age' has a value of type string, the schema's type is bigint",
        "field 'who' has a value of type string, the schema's type is "
        "struct<name:string,age:bigint>",
        "field 'n' has a value of type boolean, the schema's type is int",
        "field 'n' has a value of type object, the schema's type is int",
    ]


def test_unknown_format_names_the_known_ones() -> None:
    known = r"avro, bytes, json, protobuf, string"
    with pytest.raises(ConfigError, match=rf"format 'xml' is not available \(known: {known}\)"):
        get_format("xml")
    assert get_format("json").name == "json"
