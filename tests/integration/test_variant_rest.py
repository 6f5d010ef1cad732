"""Declared JSON columns plus a ``variant`` column of the rest (``schema`` with ``variant``), end
to end: each record's declared fields typed, everything else of it (undeclared fields, values
that do not read as their type, fields a declared struct does not have, values that are not
objects) in the variant, nothing dead-lettered but what is not JSON; both JSON decoders alike."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from frazil.decode.variant import NOT_JSON
from frazil.engine.runner import run
from tests.integration.test_variant import _produce

pytestmark = pytest.mark.integration

_SCHEMA = {
    "id": "bigint",
    "amount": "decimal(10,2)",
    "ts": "timestamp",
    "user": "struct<name:string,age:int>",
    "tags": "array<string>",
}

_T = "2026-11-29T10:00:00Z"
#: (value, the declared columns as read (None: null), the rest as JSON (None: null)).
_CASES: list[tuple[Any, dict[str, Any], Any]] = [
    (
        {"id": 1, "amount": 2.5, "ts": _T, "user": {"name": "a", "age": 3}, "tags": ["x"]},
        {"id": 1, "amount": Decimal("2.50"), "ts": _T, "user": ("a", 3), "tags": ["x"]},
        None,
    ),
    (
        {"id": 2, "extra": {"deep": [1, 2]}, "note": "n"},
        {"id": 2},
        {"extra": {"deep": [1, 2]}, "note": "n"},
    ),
    ({"id": 3, "amount": "12 EUR", "tags": ["y"]}, {"id": 3, "tags": ["y"]}, {"amount": "12 EUR"}),
    ({"id": 4, "ts": "yesterday", "more": True}, {"id": 4}, {"ts": "yesterday", "more": True}),
    # A declared struct with a field it does not declare: typed, and kept whole in the rest.
    (
        {"id": 5, "user": {"name": "b", "age": 7, "city": "Oslo"}},
        {"id": 5, "user": ("b", 7)},
        {"user": {"name": "b", "age": 7, "city": "Oslo"}},
    ),
    (
        {"id": 6, "user": {"name": "c", "age": "old"}},
        {"id": 6},
        {"user": {"name": "c", "age": "old"}},
    ),
    ({"id": 7.5, "amount": 1}, {"amount": Decimal("1.00")}, {"id": 7.5}),
    ({"id": None, "amount": None}, {}, None),
    ({}, {}, None),
    ([1, "two"], {}, [1, "two"]),
    ("just text", {}, "just text"),
    ({"id": 8, "tags": ["a", 1, {"o": 1}]}, {"id": 8, "tags": ["a", "1", '{"o":1}']}, None),
    ({"id": 9, "Amount": 3}, {"id": 9}, {"Amount": 3}),
]


def _expected(columns: dict[str, Any]) -> dict[str, Any]:
    from datetime import datetime

    full = {name: columns.get(name) for name in _SCHEMA}
    if full["ts"] is not None:
        full["ts"] = datetime.fromisoformat(full["ts"].replace("Z", "+00:00"))
    return full


@pytest.mark.parametrize("decoder", ["frazil", "spark"])
def test_declared_columns_typed_and_the_rest_in_a_variant(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, decoder: str
) -> None:
    topic, table = f"rest-{decoder}-{unique}", f"db.rest_{decoder}_{unique}"
    dlq = f"db.rest_dead_{decoder}_{unique}"
    values = [json.dumps(v).encode() for v, _, _ in _CASES]
    placed = _produce(kafka_bootstrap, topic, [*values, b'{"id": 10, "amount": '])
    config = make_config(
        [{"name": f"r_{decoder}_{unique}", "topics": [topic], "table": table,
          "schema": _SCHEMA, "variant": "rest", "json_decoder": decoder,
          "kafka_metadata": ["partition", "offset"],
          "errors": {"tolerance": "all", "dlq_table": dlq}}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    target = spark.table(f"lake.{table}")
    assert [(f.name, f.dataType.simpleString()) for f in target.schema][:6] == [
        ("id", "bigint"),
        ("amount", "decimal(10,2)"),
        ("ts", "timestamp"),
        ("user", "struct<name:string,age:int>"),
        ("tags", "array<string>"),
        ("rest", "variant"),
    ]
    rows = spark.sql(
        f"SELECT *, to_json(rest) AS rest_json FROM lake.{table} "
        "ORDER BY _kafka_partition, _kafka_offset"
    ).collect()
    by_value = {value: at for at, value in placed.items()}
    expected = {by_value[json.dumps(v).encode()]: (cols, rest) for v, cols, rest in _CASES}
    assert {(r["_kafka_partition"], r["_kafka_offset"]) for r in rows} == set(expected)
    for r in rows:
        columns, rest = expected[(r["_kafka_partition"], r["_kafka_offset"])]
        got = {name: r[name] for name in _SCHEMA}
        if got["user"] is not None:
            got["user"] = tuple(got["user"])
        if got["ts"] is not None:
            got["ts"] = got["ts"].astimezone(_utc())
        want = _expected(columns)
        assert got == want, (r["_kafka_offset"], got, want)
        assert (None if r["rest_json"] is None else json.loads(r["rest_json"])) == rest, r

    # Which records had a value that did not read as its column's type: its name in the rest.
    misfit = spark.sql(
        f"SELECT variant_get(rest, '$.amount', 'string') AS a FROM lake.{table} "
        "WHERE variant_get(rest, '$.amount') IS NOT NULL"
    ).collect()
    assert [r["a"] for r in misfit] == ["12 EUR"]

    dead = spark.sql(f"SELECT reason FROM lake.{dlq}").collect()
    assert [r["reason"] for r in dead] == [NOT_JSON]


def _utc() -> Any:
    from datetime import timezone

    return timezone.utc


def test_plan_checks_paths_into_the_rest(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from frazil.engine.explain import explain

    topic = f"rest-plan-{unique}"
    _produce(kafka_bootstrap, topic, [b'{"id": 1, "geo": {"cc": "DE"}}'])
    config = make_config(
        [{"name": f"rp_{unique}", "topics": [topic], "table": f"db.rest_plan_{unique}",
          "schema": {"id": "bigint"}, "variant": "rest",
          "transforms": [{"derive": {"cc": "rest:geo.cc::string", "zip": "rest:geo.zip::string"}}],
          "partition_by": ["rest:geo.cc"]}]
    )  # fmt: skip

    (explained,) = explain(spark, config, [])

    assert [f.name for f in explained.table_schema] == ["id", "rest", "cc", "zip", "rest_geo_cc"]
    assert list(explained.warnings) == [
        "transforms[0].derive.zip: no record of the 1 sampled from the start of the topics has "
        "rest path '$.geo.zip' (records without it read null there)"
    ]


def test_a_failing_path_check_names_the_config_keys_of_its_paths(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from types import SimpleNamespace

    from pyspark.sql import functions as F

    from frazil.engine.path_check import absent_paths
    from frazil.engine.shape import batch_options
    from frazil.errors import PipelineError

    topic = f"rest-plan-fail-{unique}"
    _produce(kafka_bootstrap, topic, [b'{"id": 1, "geo": {"cc": "DE"}}'])
    config = make_config(
        [{"name": f"rf_{unique}", "topics": [topic], "table": f"db.rest_fail_{unique}",
          "schema": {"id": "bigint"}, "variant": "rest",
          "transforms": [{"derive": {"cc": "rest:geo.cc::string"}},
                         {"filter": "rest:geo.zip::string IS NULL"}]}]
    )  # fmt: skip
    (pipeline,) = config.pipelines
    # The check's earlier mistake: the whole decoded record given where its variant belongs.
    record = F.struct(*[F.col("value").cast("string").alias(f"field_{i}") for i in range(30)])
    wrong = SimpleNamespace(scalar=True, decode=lambda _: SimpleNamespace(value=record))

    with pytest.raises(PipelineError) as caught:
        absent_paths(spark, pipeline, wrong, batch_options(config, pipeline))  # type: ignore[arg-type]

    text = str(caught.value)
    assert text.startswith(
        f"pipeline 'rf_{unique}': checking the rest paths of transforms[0].derive.cc, "
        "transforms[1].filter on a sample of the topics failed: "
        "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] "
    ), text
    # Spark's quoted expressions (the record's 30 fields, twice) cut short; one line.
    assert "…" in text and "\n" not in text and len(text) < 700, text
