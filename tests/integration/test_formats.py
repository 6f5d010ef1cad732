"""Keys, pass-through formats, JSON Schema files and ``frazil plan``, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from frazil.columns import NOT_UTF8_PREFIX
from frazil.engine.explain import explain
from frazil.engine.runner import run
from frazil.errors import ConfigError
from tests.integration.test_avro import produce_raw

pytestmark = pytest.mark.integration


def _produce_keyed(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> None:
    from confluent_kafka import Producer

    from frazil.generate.producer import ensure_topic

    ensure_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def test_json_keys_become_a_struct_column_and_string_values_pass_through(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"keys-{unique}", f"db.keys_{unique}"
    records: list[tuple[bytes | None, bytes | None]] = [
        (json.dumps({"tenant": "t1", "n": n}).encode(), f"line {n} ✓".encode()) for n in range(5)
    ]
    records.append((None, b"no key"))
    _produce_keyed(kafka_bootstrap, topic, records)
    config = make_config(
        [{"name": f"k_{unique}", "topics": [topic], "table": table, "format": "string",
          "key_format": "json", "key_schema": {"tenant": "string", "n": "int"},
          "key_column": "k"}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    schema = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}
    assert schema == {"value": "string", "k": "struct<tenant:string,n:int>"}
    rows = sorted(
        (r["value"], r["k"] and r["k"].asDict()) for r in spark.table(f"lake.{table}").collect()
    )
    assert rows == [
        *[(f"line {n} ✓", {"tenant": "t1", "n": n}) for n in range(5)],
        ("no key", None),
    ]


def test_bytes_values_and_string_keys(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"bytes-{unique}", f"db.bytes_{unique}"
    _produce_keyed(kafka_bootstrap, topic, [(b"a", b"\x00\xff"), (b"b", b"")])
    config = make_config(
        [{"name": f"b_{unique}", "topics": [topic], "table": table, "format": "bytes",
          "key_format": "string"}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    rows = sorted((r["key"], bytes(r["value"])) for r in spark.table(f"lake.{table}").collect())
    assert rows == [("a", b"\x00\xff"), ("b", b"")]


def test_text_that_is_not_utf8_is_written_readable(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # Iceberg's string type is UTF-8 and PyArrow refuses anything else: a string value, a
    # string key and the _kafka_key column that are not UTF-8 are quoted in hex.
    from frazil.observe.catalog import pyiceberg_catalog

    topic, table = f"utf8-{unique}", f"db.utf8_{unique}"
    _produce_keyed(
        kafka_bootstrap, topic, [(b"k\xff1", b"caf\xc3\xa9 \xfe!"), (b"k2", "ok ✓".encode())]
    )
    config = make_config(
        [{"name": f"u_{unique}", "topics": [topic], "table": table, "format": "string",
          "key_format": "string", "kafka_metadata": ["key"]}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    arrow = pyiceberg_catalog(config).load_table(table).scan().to_arrow()
    names = ("key", "value", "_kafka_key")
    rows = sorted(zip(*(arrow.column(n).to_pylist() for n in names), strict=True))
    key = NOT_UTF8_PREFIX + "6BFF31"  # k, 0xff, 1
    value = f"{NOT_UTF8_PREFIX}{'café '.encode().hex().upper()}FE21"
    assert rows == [(key, value, key), ("k2", "ok ✓", "k2")]


def test_a_key_column_colliding_with_a_value_field_is_refused(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"clash-{unique}"
    produce_raw(kafka_bootstrap, topic, [b'{"key": 1}'])
    config = make_config(
        [{"name": f"c_{unique}", "topics": [topic], "table": f"db.c_{unique}",
          "schema": {"key": "int"}, "key_format": "string"}]
    )  # fmt: skip
    match = r"column 'key' \(the value's field and the key column\) comes twice; set key_column"
    with pytest.raises(ConfigError, match=match):
        run(config, until_caught_up=True, spark=spark)


def test_json_schema_file(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table = f"jsf-{unique}", f"db.jsf_{unique}"
    schema_file = tmp_path / "event.schema.json"
    schema_file.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "day": {"type": "string", "format": "date"},
                    "price": {"type": ["number", "null"]},
                },
            }
        )
    )
    produce_raw(kafka_bootstrap, topic, [b'{"id": "a", "day": "2026-03-04", "price": 2.5}'])
    config = make_config(
        [{"name": f"f_{unique}", "topics": [topic], "table": table,
          "schema_file": str(schema_file)}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    row = spark.table(f"lake.{table}").first()
    assert (row["id"], row["day"].isoformat(), row["price"]) == ("a", "2026-03-04", 2.5)


def test_plan_resolves_schemas_without_writing(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table = f"plan-{unique}", f"db.plan_{unique}"
    produce_raw(kafka_bootstrap, topic, [b'{"id": "a", "n": 1, "nested": {"x": true}}'])
    pipeline = {
        "name": f"p_{unique}",
        "topics": [topic],
        "table": table,
        "kafka_metadata": ["partition"],
    }
    config = make_config([pipeline])

    (explained,) = explain(spark, config, [])

    assert explained.value_schema_source == "inferred"
    assert explained.source_schema.simpleString() == (
        "struct<id:string,n:bigint,nested:struct<x:boolean>,_kafka_partition:int>"
    )
    assert explained.table_schema == explained.source_schema
    assert explained.table_exists is False
    assert [s for s, _ in explained.steps][:2] == ["source", "decode"]
    assert not spark.catalog.tableExists(f"lake.{table}")

    # The command renders the same, as text and as JSON.
    from frazil.cli.main import app

    path = tmp_path / "frazil.yaml"
    data = json.loads(config.model_dump_json(by_alias=True, exclude_none=True))
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["plan", "-c", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed[0]["table_schema"]["fields"][0]["name"] == "id"
    text = CliRunner().invoke(app, ["plan", "-c", str(path)])
    assert text.exit_code == 0 and "table columns" in text.stdout and "nested" in text.stdout


def test_transforms_over_a_decoded_key_and_partitioning_by_a_derived_column(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"tk-{unique}", f"db.tk_{unique}"
    records: list[tuple[bytes | None, bytes | None]] = [
        (
            json.dumps({"shop": "kyoto", "n": n}).encode(),
            json.dumps({"id": f"e{n}", "at_ms": 1767323045000 + n * 86_400_000}).encode(),
        )
        for n in range(3)
    ]
    _produce_keyed(kafka_bootstrap, topic, records)
    config = make_config(
        [
            {
                "name": f"tk_{unique}",
                "topics": [topic],
                "table": table,
                "schema": {"id": "string", "at_ms": "long"},
                "key_format": "json",
                "key_schema": {"shop": "string", "n": "int"},
                "transforms": [
                    {"flatten": {}},
                    {"parse_timestamp": {"field": "at_ms", "unit": "millis", "as": "at"}},
                    {"drop": ["at_ms"]},
                ],
                "partition_by": ["days(at)", "key_shop"],
            }
        ]
    )

    run(config, until_caught_up=True, spark=spark)

    schema = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}
    assert schema == {"id": "string", "key_shop": "string", "key_n": "int", "at": "timestamp"}
    rows = sorted(
        (r["id"], r["key_shop"], r["key_n"], r["at"].isoformat())
        for r in spark.table(f"lake.{table}").collect()
    )
    assert rows == [
        ("e0", "kyoto", 0, "2026-01-02T03:04:05"),
        ("e1", "kyoto", 1, "2026-01-03T03:04:05"),
        ("e2", "kyoto", 2, "2026-01-04T03:04:05"),
    ]
    spec = spark.sql(f"SELECT partition FROM lake.{table}.files").collect()
    assert len(spec) == 3


def test_partition_by_a_column_the_transforms_removed_is_named(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"tp-{unique}"
    produce_raw(kafka_bootstrap, topic, [b'{"id": "a", "day": "x"}'])
    config = make_config(
        [{"name": f"tp_{unique}", "topics": [topic], "table": f"db.tp_{unique}",
          "schema": {"id": "string", "day": "string"}, "transforms": [{"drop": ["day"]}],
          "partition_by": ["day"]}]
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)
    assert str(caught.value) == (
        "pipelines[0].partition_by[0]: column 'day' is not in the table (columns: id)"
    )
