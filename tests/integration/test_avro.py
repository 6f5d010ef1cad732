"""Avro end to end: real broker → Spark (spark-avro's from_avro) → real Iceberg tables.

Plain Avro with a schema file here; the Schema Registry wire format (several writer versions
in one topic, unknown ids, bad magic bytes) in test_registry_formats.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka import Producer

from frazil.engine.runner import run
from frazil.errors import DecodeError
from frazil.generate.producer import ensure_topic

pytestmark = pytest.mark.integration

#: One field per row of the Avro type-mapping table in docs/formats.md.
ALL_TYPES = {
    "type": "record",
    "name": "AllTypes",
    "namespace": "frazil.test",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lts_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {
            "name": "rate",
            "type": {
                "type": "fixed",
                "name": "Rate",
                "size": 8,
                "logicalType": "decimal",
                "precision": 10,
                "scale": 3,
            },
        },
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["null", "int", "string"], "default": None},
        {"name": "raw", "type": "bytes"},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 4}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
        },
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "name", "type": "string"},
                    {
                        "name": "address",
                        "type": {
                            "type": "record",
                            "name": "Address",
                            "fields": [{"name": "city", "type": "string"}],
                        },
                    },
                ],
            },
        },
    ],
}

_UTC = dt.timezone.utc


def all_types_record(n: int) -> dict[str, Any]:
    """A record exercising every type; ``n`` varies the values."""
    return {
        "id": f"r{n}",
        "i": -n,
        "l": 2**40 + n,
        "f": 1.5,
        "d": n / 4,
        "flag": n % 2 == 0,
        "ts_ms": dt.datetime(2026, 1, 2, 3, 4, 5, 123000, tzinfo=_UTC),
        "ts_us": dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=_UTC),
        "lts_ms": dt.datetime(2026, 1, 2, 3, 4, 5, 123000),
        "lts_us": dt.datetime(2026, 1, 2, 3, 4, 5, 123456),
        "day": dt.date(2026, 1, 2),
        "t_ms": dt.time(3, 4, 5, 123000),
        "t_us": dt.time(3, 4, 5, 123456),
        "amount": decimal.Decimal("1234.56"),
        "rate": decimal.Decimal("-1.234"),
        "uid": str(uuid.UUID(int=n)),
        "kind": "B",
        "note": None if n % 2 else f"note {n}",
        "either": n if n % 2 else "text",
        "raw": bytes([0, n % 256]),
        "tag": b"abcd",
        "counts": {"a": n, "b": 2},
        "items": [{"sku": "s1", "qty": 1}, {"sku": "s2", "qty": n}],
        "customer": {"name": "Ann", "address": {"city": "Kyoto"}},
    }


def check_all_types_row(row: dict[str, Any], n: int) -> None:
    """The table row of :func:`all_types_record` ``n``, column by column."""
    assert row["id"] == f"r{n}" and row["i"] == -n and row["l"] == 2**40 + n
    assert row["f"] == 1.5 and row["d"] == n / 4 and row["flag"] is (n % 2 == 0)
    # The session time zone is UTC: timestamps read back as UTC wall-clock times.
    assert row["ts_ms"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123000)
    assert row["ts_us"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123456)
    assert row["lts_ms"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123000)
    assert row["lts_us"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123456)
    assert row["day"] == dt.date(2026, 1, 2)
    assert row["t_ms"] == ((3 * 60 + 4) * 60 + 5) * 1000 + 123
    assert row["t_us"] == (((3 * 60 + 4) * 60 + 5) * 1000 + 123) * 1000 + 456
    assert row["amount"] == decimal.Decimal("1234.56")
    assert row["rate"] == decimal.Decimal("-1.234")
    assert row["uid"] == str(uuid.UUID(int=n))
    assert row["kind"] == "B"
    assert row["note"] == (None if n % 2 else f"note {n}")
    either = row["either"].asDict()
    assert either == ({"member_int": n, "member_string": None} if n % 2 else {
        "member_int": None, "member_string": "text"
    })  # fmt: skip
    assert row["raw"] == bytes([0, n % 256]) and row["tag"] == b"abcd"
    assert row["counts"] == {"a": n, "b": 2}
    assert [(i["sku"], i["qty"]) for i in row["items"]] == [("s1", 1), ("s2", n)]
    assert row["customer"]["address"]["city"] == "Kyoto"


ALL_TYPES_TABLE = {
    "id": "string", "i": "int", "l": "bigint", "f": "float", "d": "double",
    "flag": "boolean", "ts_ms": "timestamp", "ts_us": "timestamp",
    "lts_ms": "timestamp_ntz", "lts_us": "timestamp_ntz", "day": "date", "t_ms": "int",
    "t_us": "bigint", "amount": "decimal(12,2)", "rate": "decimal(10,3)", "uid": "string",
    "kind": "string", "note": "string",
    "either": "struct<member_int:int,member_string:string>", "raw": "binary",
    "tag": "binary", "counts": "map<string,bigint>",
    "items": "array<struct<sku:string,qty:int>>",
    "customer": "struct<name:string,address:struct<city:string>>",
}  # fmt: skip


def avro_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def produce_raw(
    bootstrap: str, topic: str, values: list[bytes | None], partitions: int = 2
) -> None:
    ensure_topic(bootstrap, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n, value in enumerate(values):
        producer.produce(topic, value=value, key=f"k{n}".encode(), partition=n % partitions)
    assert producer.flush(30) == 0


def table_types(spark: Any, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}


def test_plain_avro_with_a_schema_file_maps_every_type(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table = f"avro-{unique}", f"db.avro_{unique}"
    schema_file = tmp_path / "all.avsc"
    schema_file.write_text(json.dumps(ALL_TYPES))
    produce_raw(
        kafka_bootstrap, topic, [avro_bytes(ALL_TYPES, all_types_record(n)) for n in range(40)]
    )
    config = make_config(
        [
            {
                "name": f"a_{unique}",
                "topics": [topic],
                "table": table,
                "format": "avro",
                "schema_file": str(schema_file),
            }
        ]
    )

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 40
    assert table_types(spark, table) == ALL_TYPES_TABLE
    rows = {r["id"]: r.asDict() for r in spark.table(f"lake.{table}").collect()}
    assert sorted(rows) == sorted(f"r{n}" for n in range(40))
    for n in range(40):
        check_all_types_row(rows[f"r{n}"], n)


def test_truncated_avro_stops_the_batch_naming_the_record(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table = f"avro-bad-{unique}", f"db.avro_bad_{unique}"
    schema_file = tmp_path / "all.avsc"
    schema_file.write_text(json.dumps(ALL_TYPES))
    good = avro_bytes(ALL_TYPES, all_types_record(1))
    produce_raw(kafka_bootstrap, topic, [good, good[:7]], partitions=1)
    config = make_config(
        [{"name": f"b_{unique}", "topics": [topic], "table": table, "format": "avro",
          "schema_file": str(schema_file)}]
    )  # fmt: skip

    with pytest.raises(DecodeError) as caught:
        run(config, until_caught_up=True, spark=spark)

    message = str(caught.value)
    assert f"topic {topic} partition 0 offset 1: decode: not Avro" in message
    assert spark.table(f"lake.{table}").count() == 0


def test_from_avro_plans_from_several_threads_at_once(spark: Any) -> None:
    """The tables of a batch are planned from several threads on one decoded frame. Spark's
    ``map(...)`` of ``from_avro``'s options is filled while a plan is optimized, in a builder
    the plans share: planning at once failed with ``DUPLICATED_MAP_KEY`` (or handed a plan
    a map with options missing). The options are one literal now."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    from frazil.decode.avro import from_avro

    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
    reader = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "a", "type": "long"},
            {"name": "b", "type": ["null", "string"], "default": None},
        ],
    }
    rows = []
    for i in range(20):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(writer), {"a": i})
        rows.append((i, out.getvalue()))
    raw = spark.createDataFrame(rows, "id long, data binary")
    decoded = raw.select(
        "id",
        from_avro(F.col("data"), json.dumps(writer), {"avroSchema": json.dumps(reader)}).alias("v"),
    )

    def plan(slot: int) -> None:
        for _ in range(30):
            left, right = decoded.alias("l"), decoded.alias("r")
            # A self-join copies the from_avro (new attribute ids) but not its options.
            joined = left.join(right, F.col("l.id") == F.col("r.id")).where(F.col("l.id") > slot)
            joined._jdf.queryExecution().optimizedPlan()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(plan, range(8)))
    got = sorted((r.id, r.v.a, r.v.b) for r in decoded.collect())
    assert got == [(i, i, None) for i in range(20)]
