"""Paths into a ``variant`` column, end to end: a ``derive`` makes typed columns of paths, a
``filter`` on a path drops records, ``route.field: payload:geo.country`` sends records to
tables by a path's value (a record without the path to the route's default), and
``partition_by`` partitions by a column derived from a path. ``frazil plan`` shows the path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frazil.engine.runner import run
from frazil.errors import ConfigError
from tests.integration.test_variant import _produce

pytestmark = pytest.mark.integration

_REGIONS = {"DE": "eu", "FR": "eu", "JP": "apac"}


def _records() -> list[Any]:
    """Shapes that vary: a text user id here and a number there, a country that is missing,
    a number or an object, a record with no fields at all, top-level values that are not
    objects."""
    out: list[Any] = []
    for i in range(30):
        record: dict[str, Any] = {
            "id": i,
            "kind": "test" if i % 5 == 0 else "order",
            "user": {"id": i if i % 2 else f"u{i}"},
            "amount": i * 1.5 if i % 3 else f"{i} EUR",
        }
        country = ("DE", "FR", "JP", None)[i % 4]
        if country is not None:
            record["geo"] = {"country": country, "region": _REGIONS[country]}
        out.append(record)
    return [
        *out,
        {"kind": "order", "geo": {"country": 49}},  # a number: routed by its text, "49"
        {"kind": "order", "geo": {"country": {"code": "DE"}}},  # an object: its JSON
        {},
        [1, 2],
        "text",
    ]


def _get(value: Any, *path: str) -> Any:
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _canonical(value: Any) -> str:
    """JSON text to compare by: a variant keeps ``12.0`` as the number 12 (``to_json`` says
    ``12``), so integral floats are written as integers."""

    def walk(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return json.dumps(walk(value), sort_keys=True)


def _expected(records: list[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Per table suffix: (JSON, user_id, amount, region) of each record, as the config below
    derives, filters and routes them."""
    tables: dict[str, list[tuple[Any, ...]]] = {"eu": [], "jp": [], "other": []}
    for record in records:
        if _get(record, "kind") == "test":
            continue
        user = _get(record, "user", "id")
        amount = _get(record, "amount")
        country = _get(record, "geo", "country")
        routed = {"DE": "eu", "FR": "eu", "JP": "jp"}
        target = routed.get(country, "other") if isinstance(country, str) else "other"
        tables[target].append(
            (
                _canonical(record),
                user if isinstance(user, int) else None,
                amount if isinstance(amount, float) else None,
                _get(record, "geo", "region"),
            )
        )
    return tables


def test_derive_filter_route_and_partition_by_variant_paths(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from frazil.engine.explain import explain

    topic = f"variant-paths-{unique}"
    records = _records()
    _produce(kafka_bootstrap, topic, [json.dumps(r).encode() for r in records])
    table = {name: f"db.vpath_{name}_{unique}" for name in ("eu", "jp", "other")}
    config = make_config(
        [{"name": f"vpath_{unique}", "topics": [topic], "variant": "payload",
          "transforms": [
              {"derive": {"user_id": "try_variant_get(payload, '$.user.id', 'bigint')",
                          "amount": "try_variant_get(payload, '$.amount', 'double')",
                          "region": "payload:geo.region::string"}},
              {"filter": "payload:kind::string IS DISTINCT FROM 'test'"},
          ],
          "route": {"field": "payload:geo.country",
                    "tables": {"DE": table["eu"], "FR": table["eu"], "JP": table["jp"]},
                    "default": table["other"]},
          "partition_by": ["region"]}]
    )  # fmt: skip

    (explained,) = explain(spark, config, [])
    assert explained.table_schema.simpleString() == (
        "struct<payload:variant,user_id:bigint,amount:double,region:string>"
    )
    assert ("route", f"by variant path payload:geo.country (try_variant_get(payload, "
            f"'$.geo.country', 'string')) to 3 table(s) (3 value(s)); else {table['other']}"
            ) in explained.steps  # fmt: skip

    (report,) = run(config, until_caught_up=True, spark=spark)

    expected = _expected(records)
    assert sum(map(len, expected.values())) == len(records) - 6  # six "test" records
    assert {k: len(v) for k, v in expected.items()} == {"eu": 12, "jp": 6, "other": 11}
    # A routed table is made with the columns its records fill: every JP record's user id
    # is text, so user_id (null in all of them) is not one of its columns.
    columns = {name: [f.name for f in spark.table(f"lake.{table[name]}").schema] for name in table}
    assert columns == {
        "eu": ["payload", "user_id", "amount", "region"],
        "jp": ["payload", "amount", "region"],
        "other": ["payload", "user_id", "amount", "region"],
    }
    for name, rows in expected.items():
        user_id = "user_id" if "user_id" in columns[name] else "CAST(NULL AS bigint) AS user_id"
        found = spark.sql(
            f"SELECT to_json(payload) AS j, {user_id}, amount, region FROM lake.{table[name]}"
        ).collect()
        landed = [
            (_canonical(json.loads(r["j"])), r["user_id"], r["amount"], r["region"]) for r in found
        ]
        assert sorted(landed, key=repr) == sorted(rows, key=repr), name
        partitions = {
            r["region"]: r["n"]
            for r in spark.sql(
                f"SELECT partition.region AS region, record_count AS n "
                f"FROM lake.{table[name]}.partitions"
            ).collect()
        }
        counts: dict[Any, int] = {}
        for row in rows:
            counts[row[3]] = counts.get(row[3], 0) + 1
        assert partitions == counts, name
        described = [r[0] for r in spark.sql(f"DESCRIBE TABLE lake.{table[name]}").collect()]
        start = described.index("# Partition Information") + 2  # after "# col_name"
        assert described[start:] == ["region"], name
    assert report.filtered_skipped == 6
    assert sum(report.dead_letters.values()) == 0


def test_a_route_path_into_a_column_that_is_not_a_variant(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from frazil.engine.explain import explain

    topic = f"variant-paths-text-{unique}"
    _produce(kafka_bootstrap, topic, [b'{"doc": "x"}'])
    config = make_config(
        [{"name": f"vpt_{unique}", "topics": [topic], "schema": {"doc": "string"},
          "route": {"field": "doc:kind", "table": "db.vpt_{value}"}}]
    )  # fmt: skip

    with pytest.raises(ConfigError) as info:
        explain(spark, config, [])
    assert info.value.problems == [
        (
            "pipelines[0].route.field",
            "'doc:kind' is a path into a variant column, but column 'doc' is string",
        )
    ]
