"""A variant column written shredded (``table_properties: {write.parquet.shred-variants:
"true"}``, Iceberg 1.11's Spark writer): recurring paths land as typed Parquet sub-columns,
and Spark reads back exactly what an unshredded table of the same records holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frazil.engine.runner import run
from tests.integration.test_variant import _good, _produce
from tests.integration.test_variant_paths import _canonical

pytestmark = pytest.mark.integration

#: What is read of each record, shredded and not.
_QUERIES = {
    "json": "to_json(payload)",
    "id": "try_variant_get(payload, '$.id', 'int')",
    "amount_int": "try_variant_get(payload, '$.amount', 'bigint')",
    "amount_text": "try_variant_get(payload, '$.amount', 'string')",
    "amount_type": "schema_of_variant(payload:amount)",
    "kind": "payload:kind::string",
    "tag": "try_variant_get(payload, '$.user.tags[1]', 'string')",
    "lat": "try_variant_get(payload, '$.user.geo.lat', 'double')",
}


def _records() -> list[Any]:
    """Mostly one shape (so its paths shred), with the shapes that vary: a field that is a
    number in one record and text in the next, fields that come and go, nesting, top-level
    values that are not objects."""
    steady = [
        {"id": 100 + i, "kind": ("click", "view", "buy")[i % 3], "amount": i * 7,
         "user": {"name": f"n{i}", "tags": ["a", f"t{i}"], "geo": {"lat": i / 4}}}
        for i in range(300)
    ]  # fmt: skip
    return [*steady, *_good()]


def _columns(spark: Any, table: str) -> set[str]:
    """The Parquet column paths under ``payload`` in the table's data files."""
    import pyarrow.parquet as pq

    paths: set[str] = set()
    for row in spark.sql(f"SELECT file_path FROM lake.{table}.files").collect():
        schema = pq.ParquetFile(row[0].removeprefix("file:")).schema
        paths |= {".".join(schema.column(i).path.split(".")) for i in range(len(schema))}
    return {p for p in paths if p.startswith("payload.")}


def test_a_shredded_variant_table_reads_back_as_the_unshredded_one(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"variant-shred-{unique}"
    records = _records()
    _produce(kafka_bootstrap, topic, [json.dumps(r).encode() for r in records])
    shredded, plain = f"db.vshred_{unique}", f"db.vplain_{unique}"
    pipeline = {"topics": [topic], "variant": "payload",
                "kafka_metadata": ["partition", "offset"]}  # fmt: skip
    config = make_config(
        [
            {**pipeline, "name": f"vs_{unique}", "table": shredded,
             "table_properties": {"write.parquet.shred-variants": "true"}},
            {**pipeline, "name": f"vu_{unique}", "table": plain},
        ]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES lake.{shredded}").collect()}
    assert properties["write.parquet.shred-variants"] == "true"
    # Unshredded: the variant's two binaries. Shredded: typed sub-columns besides them.
    assert _columns(spark, plain) == {"payload.metadata", "payload.value"}
    typed = _columns(spark, shredded)
    for path in ("id", "kind", "amount", "user.typed_value.name"):
        assert f"payload.typed_value.{path}.typed_value" in typed, sorted(typed)

    select = ", ".join(f"{sql} AS {name}" for name, sql in _QUERIES.items())

    def read(table: str, where: str = "true") -> list[Any]:
        return sorted(
            spark.sql(
                f"SELECT _kafka_partition AS p, _kafka_offset AS o, {select} "
                f"FROM lake.{table} WHERE {where}"
            ).collect()
        )

    rows = read(shredded)
    assert len(rows) == len(records)
    assert rows == read(plain)
    assert sorted(_canonical(json.loads(r["json"])) for r in rows) == sorted(
        _canonical(r) for r in records
    )
    # Filters on shredded paths select the same records.
    for where in (
        "payload:kind::string = 'buy'",
        "try_variant_get(payload, '$.amount', 'bigint') > 1000",
        "try_variant_get(payload, '$.amount', 'string') LIKE '% EUR'",
        "payload:user.geo.lat IS NOT NULL",
    ):
        found = read(shredded, where)
        assert found == read(plain, where), where
        assert found, where
    # Reads that leave the variant out (Iceberg 1.12.0's vectorized reader fails on shredded
    # files here, apache/iceberg#18430: the check that guards a move of the pin).
    for table in (shredded, plain):
        query = f"SELECT count(*) AS n, sum(_kafka_offset) AS s FROM lake.{table}"
        (row,) = spark.sql(query).collect()
        assert (row["n"], row["s"]) == (len(records), sum(r["o"] for r in rows)), table
