"""The read-only commands answer from the tables' metadata with PyIceberg, without Spark, and
say what a Spark application reading Iceberg's metadata tables says: the same tables, the
same health, the same dead-letter groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.cli.dlq_cmd import _summarise, _summarise_arrow
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.maintenance.passes import config_tables, measure, run_pass
from frazil.observe import catalog as metadata
from frazil.observe.catalog import pyiceberg_catalog

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 2) -> None:
    ensure_topic(bootstrap, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    producer.flush(10)


def _records(round_no: int) -> list[bytes]:
    """Orders of three kinds (one routed to a second namespace), a few of them bad."""
    out: list[bytes] = []
    for i in range(60):
        if i % 13 == 0:
            out.append(b"{not json")
        elif i % 17 == 0:
            out.append(json.dumps({"id": "x", "kind": "a"}).encode())
        elif i % 19 == 0:  # a value the reason quotes: each record's own, one group
            out.append(json.dumps({"id": i, "region": "eu", "ts": f"late-{i}"}).encode())
        else:
            day = f"2026-11-{20 + i % 3:02d}T10:00:00Z"
            out.append(
                json.dumps(
                    {"id": i, "kind": "abc"[i % 3], "region": "eu" if i % 2 else "us",
                     "ts": day, "v": round_no}
                ).encode()
            )  # fmt: skip
    return out


def test_metadata_reads_match_spark(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic = f"meta-{unique}"
    routed = {
        "name": f"meta_{unique}",
        "topics": [topic],
        "schema": {"id": "long", "kind": "string", "region": "string", "ts": "timestamp",
                   "v": "long"},
        # Namespace and table both from the records: the catalog is listed level by level.
        "route": {"field": "region", "table": f"m{unique}_{{value}}.orders_{{value}}",
                  "default": f"m{unique}_xx.orders_xx"},
        "write": {"mode": "upsert", "key": ["id"]},
        "partition_by": ["days(ts)"],
        "errors": {"tolerance": "all", "dlq_table": f"m{unique}_dead.letters"},
        "trigger": "1s",
    }  # fmt: skip
    config = make_config(
        [routed],
        maintenance={
            "compaction": {"min_small_files": 2},
            "expire": {"older_than": "1ms", "retain_last": 1},
        },
    )
    for round_no in range(3):
        _produce(kafka_bootstrap, topic, _records(round_no))
        run(config, until_caught_up=True, spark=spark)
    # A table the template could name that the pipeline never wrote: not one of its tables.
    spark.sql(f"CREATE TABLE lake.m{unique}_zz.orders_zz (id bigint) USING iceberg")
    catalog = pyiceberg_catalog(config)

    refs = config_tables(spark, config)
    assert [r.name for r in metadata.config_tables(catalog, config)] == [r.name for r in refs] == [
        # Not the default's table: only records that fail went there, and they are dead letters.
        f"m{unique}_dead.letters", f"m{unique}_eu.orders_eu", f"m{unique}_us.orders_us",
    ]  # fmt: skip
    for ref in refs:
        with_spark, from_metadata = (
            measure(spark, config, ref),
            metadata.measure(catalog, config, ref),
        )
        assert from_metadata == with_spark
    upserted = metadata.measure(catalog, config, refs[1])
    # Three rounds of upserts into three days: deletes, partitions, markers, expirable history.
    assert upserted.delete_files > 0 and len(upserted.partitions) == 3
    assert upserted.records == spark.table(f"lake.m{unique}_eu.orders_eu").count()
    assert upserted.expirable_snapshots > 0 and upserted.pins
    planned = metadata.plan_pass(catalog, config, refs)
    dry = run_pass(spark, config, refs, dry_run=True)
    assert [(r.table, r.planned) for r in planned] == [(r.table, r.planned) for r in dry]

    dead = f"m{unique}_dead.letters"
    groups = _summarise_arrow(catalog.load_table(dead), dead, [routed["name"]], 2)
    assert groups == _summarise(spark, f"lake.{dead}", dead, [routed["name"]], 2)
    assert sum(g["records"] for g in groups) == 3 * sum(
        1 for i in range(60) if i % 13 == 0 or i % 17 == 0 or i % 19 == 0
    )
    (late,) = [g for g in groups if "timestamp" in g["reason"]]
    # Grouped by the reason without its value; each example keeps its own.
    assert late["reason"] == "field 'ts' does not parse as timestamp"
    assert late["records"] == 3 * 3 and len(late["examples"]) == 2
    assert late["examples"][0]["reason"].startswith(late["reason"] + ": 'late-")

    # The commands themselves start no Spark: with no Java to be found they still answer.
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)
    for command in (
        ["tables"], ["table", "health", dead], ["optimize", "--dry-run"], ["dlq", "show"]
    ):  # fmt: skip
        done = subprocess.run(
            [str(Path(sys.executable).parent / "frazil"), *command, "-c", str(path), "-o", "json"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        shown = json.loads(done.stdout)
        if command == ["tables"]:
            assert [h["table"] for h in shown] == [r.name for r in refs]
        if command == ["dlq", "show"]:
            assert sum(g["records"] for g in shown) == sum(g["records"] for g in groups)


def test_partitions_read_alike_for_every_transform(
    spark: Any, make_config: Any, unique: str
) -> None:
    from frazil.config.maintenance import MaintenancePolicy, ResolvedPolicy
    from frazil.maintenance.facts import pyiceberg_facts, spark_facts
    from frazil.maintenance.health import health_of
    from frazil.sink.iceberg import IcebergTable

    name = f"db.parts_{unique}"
    spark.sql(
        f"CREATE TABLE lake.{name} (id bigint, region string, price decimal(10,2), "
        "at timestamp, day date, flag boolean) USING iceberg PARTITIONED BY "
        "(region, price, at, hours(at), months(day), bucket(4, id), truncate(2, region), flag)"
    )
    spark.sql(
        f"INSERT INTO lake.{name} VALUES "
        "(1, 'eu', 12.34, TIMESTAMP '2026-11-28 10:00:00.123', DATE '2026-11-28', true), "
        "(2, NULL, NULL, NULL, NULL, NULL), "
        "(3, 'us', 0.50, TIMESTAMP '2026-11-29 23:59:59', DATE '2026-11-29', false)"
    )
    catalog = pyiceberg_catalog(make_config([{"name": "x", "topics": ["x"], "table": name}]))
    policy = ResolvedPolicy.of(MaintenancePolicy())
    with_spark = spark_facts(spark, f"lake.{name}", IcebergTable(spark, f"lake.{name}").java)
    from_metadata = pyiceberg_facts(catalog.load_table(name), name)
    assert sorted(f.partition for f in from_metadata.files) == sorted(
        f.partition for f in with_spark.files
    )
    assert health_of(from_metadata, policy) == health_of(with_spark, policy)
