"""A routed batch written to all of its tables in one Spark job, and the batches that are not.

The routed job (``frazil.engine.routed_job``, its files committed by
``frazil.engine.routed_commit``) writes the common case: known tables taking the batch's
columns as they are, and new tables created with the pipeline's defaults. A batch it cannot
write alone (a record for a column its table lacks, a bad record) is found by the job
and written the general way; either way each table holds each record once.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from frazil.engine.runner import run
from frazil.progress import table_markers
from frazil.sink.iceberg import IcebergTable, IcebergTables
from tests.integration.test_routing import columns, produce_json, rows

pytestmark = pytest.mark.integration

_LOGGER = "frazil.engine.batch"


def _ways(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """Batches written in one job, and batches the job sent the general way."""
    messages = [r.getMessage() for r in caplog.records if r.name == _LOGGER]
    one = sum("in one job" in m for m in messages)
    general = sum("goes the general way" in m for m in messages)
    caplog.clear()
    return one, general


def test_new_and_known_tables_in_one_job_and_what_goes_the_general_way(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_LOGGER)
    topic, u = f"one-{unique}", unique
    name = f"one_{u}"
    schema = {"id": "long", "kind": "string", "amount": "double", "who": "string", "n": "int"}
    config = make_config(
        [
            {
                "name": name,
                "topics": [topic],
                "schema": schema,
                "route": {"field": "kind", "table": f"one_{u}.t_{{value}}"},
                "partition_by": ["bucket(4, id)"],
            }
        ]
    )

    # 1. New tables, each with the columns its records fill (and its partition column).
    first = [
        {"id": 1, "kind": "pay", "amount": 1.5},
        {"id": 2, "kind": "user", "who": "ann"},
        {"id": 3, "kind": "pay", "amount": 2.5},
        {"id": 4, "kind": "User", "who": "bob"},  # the same table once sanitised
    ]
    produce_json(kafka_bootstrap, topic, first)
    [report] = run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (1, 0)
    assert report.records_ingested == 4
    assert columns(spark, f"one_{u}.t_pay") == ["id", "kind", "amount"]
    assert columns(spark, f"one_{u}.t_user") == ["id", "kind", "who"]
    assert rows(spark, f"one_{u}.t_pay", "id, amount") == [(1, 1.5), (3, 2.5)]
    assert rows(spark, f"one_{u}.t_user", "id, who") == [(2, "ann"), (4, "bob")]
    spec = spark.sql(f"SELECT partition FROM lake.one_{u}.t_pay.files").collect()
    assert spec and all(r["partition"]["id_bucket"] is not None for r in spec)
    # Created with its rows and marker in one transaction: its first snapshot has both.
    first_snapshot = spark.sql(
        f"SELECT summary FROM lake.one_{u}.t_pay.snapshots ORDER BY committed_at LIMIT 1"
    ).collect()[0]["summary"]
    assert first_snapshot["added-records"] == "2"
    assert first_snapshot["frazil.pipeline"] == name
    # Others engines read the new table through its name mapping and field ids.
    mapping = spark.sql(f"SHOW TBLPROPERTIES lake.one_{u}.t_pay").collect()
    assert any(r[0] == "schema.name-mapping.default" for r in mapping)

    # 2. Known tables appended, a new one created, all in one job.
    second = [
        {"id": 5, "kind": "pay", "amount": 3.0},
        {"id": 6, "kind": "count", "n": 7},
        {"id": 7, "kind": "user", "who": "cy"},
    ]
    produce_json(kafka_bootstrap, topic, second)
    [report] = run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (1, 0)
    assert rows(spark, f"one_{u}.t_pay", "id, amount") == [(1, 1.5), (3, 2.5), (5, 3.0)]
    assert rows(spark, f"one_{u}.t_count", "id, n") == [(6, 7)]
    assert columns(spark, f"one_{u}.t_count") == ["id", "kind", "n"]
    # The known tables' appends carry a manifest written beforehand (OwnManifests): their
    # snapshots' summaries count what Iceberg's own appends count, totals included (the
    # newest snapshot with data: a marker without data follows at the run's end).
    for table in (f"one_{u}.t_pay", f"one_{u}.t_user"):
        newest = spark.sql(
            f"SELECT snapshot_id, summary FROM lake.{table}.snapshots "
            "WHERE summary['added-data-files'] IS NOT NULL ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0]
        summary = newest["summary"]
        added = spark.sql(
            f"SELECT data_file.file_size_in_bytes AS file_size_in_bytes FROM lake.{table}.entries "
            f"WHERE snapshot_id = {newest['snapshot_id']} AND status = 1"
        ).collect()
        files = spark.sql(f"SELECT file_size_in_bytes FROM lake.{table}.files").collect()
        assert summary["added-data-files"] == str(len(added)) == "1"
        assert summary["added-records"] == "1"
        assert summary["added-files-size"] == str(sum(r["file_size_in_bytes"] for r in added))
        assert summary["changed-partition-count"] == "1"
        assert summary["total-data-files"] == str(len(files))
        assert summary["total-files-size"] == str(sum(r["file_size_in_bytes"] for r in files))
        assert summary["total-records"] == str(len(rows(spark, table, "id")))

    # 3. A pay record filling `who`, a column t_pay lacks: the job sends the batch the
    # general way, which adds the column first; nothing is written twice.
    produce_json(kafka_bootstrap, topic, [{"id": 8, "kind": "pay", "who": "dee"}, first[1]])
    [report] = run(config, until_caught_up=True, spark=spark)
    one, general = _ways(caplog)
    assert (one, general) == (0, 1)
    assert columns(spark, f"one_{u}.t_pay") == ["id", "kind", "amount", "who"]
    assert rows(spark, f"one_{u}.t_pay", "id, who") == [
        (1, None),
        (3, None),
        (5, None),
        (8, "dee"),
    ]
    assert rows(spark, f"one_{u}.t_user", "id") == [(2,), (2,), (4,), (7,)]
    assert report.records_ingested == 2

    # 4. Back in one job once the table took the column.
    produce_json(kafka_bootstrap, topic, [{"id": 9, "kind": "pay", "who": "eve", "amount": 1.0}])
    run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (1, 0)
    assert rows(spark, f"one_{u}.t_pay", "id, amount, who")[-1] == (9, 1.0, "eve")

    # 5. The tables' states read at once in the JVM (each batch's look at its tables) are
    # those the rules' own walk finds, one table at a time; and no table has a commit of the
    # pipeline after its newest marker but that marker's own.
    tables = [IcebergTable(spark, f"lake.one_{u}.t_{k}") for k in ("pay", "user", "count")]
    together = IcebergTables(spark, tables)
    states = table_markers.find_markers(together, name)
    assert states == [table_markers.find_marker(t, name) for t in tables]
    assert all(s.marker is not None and s.snapshot_id is not None for s in states)
    assert table_markers.find_markers(together, "another pipeline")[0].marker is None
    made = [s.marker for s in states if s.marker is not None]
    before = [replace(s, snapshot_id=None) for s in states]
    assert table_markers.check_no_interleavings(together, tables, states, made) == [None] * 3
    # From the start of its history, t_pay holds other commits of the pipeline (each run's).
    error = table_markers.check_no_interleavings(together, tables[:1], before[:1], made[:1])[0]
    assert error is not None and "from another run" in str(error)


def test_a_batch_with_a_bad_record_goes_the_general_way(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_LOGGER)
    topic, u = f"one-bad-{unique}", unique
    config = make_config(
        [
            {
                "name": f"oneb_{u}",
                "topics": [topic],
                "schema": {"id": "long", "kind": "string"},
                "route": {"field": "kind", "table": f"oneb_{u}.t_{{value}}"},
                "errors": {"tolerance": "all", "dlq_table": f"oneb_{u}.dead"},
            }
        ]
    )
    produce_json(kafka_bootstrap, topic, [{"id": 1, "kind": "a"}, {"id": 2, "kind": "b"}])
    run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (1, 0)

    # A record that does not decode: the general way sends it to the dead-letter table.
    produce_json(
        kafka_bootstrap,
        topic,
        [{"id": 3, "kind": "a"}, {"id": "x", "kind": "a"}, {"id": 4, "kind": "c"}],
    )
    [report] = run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (0, 1)
    assert rows(spark, f"oneb_{u}.t_a") == [(1,), (3,)]
    assert rows(spark, f"oneb_{u}.t_b") == [(2,)]
    assert rows(spark, f"oneb_{u}.t_c") == [(4,)]
    assert spark.sql(f"SELECT * FROM lake.oneb_{u}.dead").count() == 1
    assert report.records_ingested == 2

    produce_json(kafka_bootstrap, topic, [{"id": 5, "kind": "b"}])
    run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (1, 0)
    assert rows(spark, f"oneb_{u}.t_b") == [(2,), (5,)]


def test_a_table_with_settings_of_its_own_is_written_the_general_way(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_LOGGER)
    topic, u = f"one-own-{unique}", unique
    config = make_config(
        [
            {
                "name": f"oneo_{u}",
                "topics": [topic],
                "schema": {"id": "long", "kind": "string"},
                "route": {"field": "kind", "table": f"oneo_{u}.t_{{value}}"},
                "tables": {f"oneo_{u}.t_sorted": {"sort_by": ["id"]}},
            }
        ]
    )
    produce_json(kafka_bootstrap, topic, [{"id": 1, "kind": "a"}, {"id": 2, "kind": "sorted"}])
    run(config, until_caught_up=True, spark=spark)
    # The job meets a new table with settings of its own: it is created the general way.
    assert _ways(caplog) == (0, 1)
    assert rows(spark, f"oneo_{u}.t_a") == [(1,)]
    assert rows(spark, f"oneo_{u}.t_sorted") == [(2,)]

    # A sorted table is written by Spark's own writes, which sort: no job at all.
    produce_json(kafka_bootstrap, topic, [{"id": 4, "kind": "a"}, {"id": 3, "kind": "sorted"}])
    run(config, until_caught_up=True, spark=spark)
    assert _ways(caplog) == (0, 0)
    assert rows(spark, f"oneo_{u}.t_a") == [(1,), (4,)]
    assert rows(spark, f"oneo_{u}.t_sorted") == [(2,), (3,)]


def test_a_table_taking_most_of_a_batch_is_written_by_a_task_per_partition(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A route sending most records to one table: once a batch has shown it, the table is
    written by a task per Kafka partition (a file each), not by one task while the other
    cores wait; every record lands once."""
    caplog.set_level(logging.DEBUG, logger=_LOGGER)
    topic, u = f"hot-{unique}", unique
    records = [{"id": i, "kind": "rare" if i % 100 == 0 else "hot"} for i in range(60_000)]
    produce_json(kafka_bootstrap, topic, records, partitions=4)
    config = make_config(
        [
            {
                "name": f"hot_{u}",
                "topics": [topic],
                "schema": {"id": "long", "kind": "string"},
                "route": {"field": "kind", "table": f"hot_{u}.t_{{value}}"},
                "max_offsets_per_trigger": 30_000,
            }
        ]
    )

    [report] = run(config, until_caught_up=True, spark=spark)

    assert _ways(caplog)[1] == 0
    assert report.batches >= 3
    hot = [(r["id"],) for r in records if r["kind"] == "hot"]
    assert rows(spark, f"hot_{u}.t_hot") == hot
    assert rows(spark, f"hot_{u}.t_rare") == [(r["id"],) for r in records if r["kind"] == "rare"]
    # The first batch (short, the tables created) by one task; a full one by four (a last
    # batch of fewer rows than a Parquet page by one again).
    added = [
        int(r["summary"]["added-data-files"])
        for r in spark.sql(
            f"SELECT summary FROM lake.hot_{u}.t_hot.snapshots ORDER BY committed_at"
        ).collect()
        if "added-data-files" in r["summary"]
    ]
    assert added[0] == 1 and 4 in added[1:], added


@pytest.mark.parametrize("topics", [1, 2], ids=["one-topic", "two-topics"])
def test_each_tables_largest_timestamp_per_partition_from_the_one_job(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    caplog: pytest.LogCaptureFixture,
    topics: int,
) -> None:
    """The commits of a batch written in one job carry, per table, the largest Kafka
    timestamp of each partition's records it got (freshness, "valid through"): records of
    three tables spread over three partitions with timestamps out of order. A batch of one
    topic carries no topic name per row (the job is told it); one of two topics does."""
    import json

    from confluent_kafka import Producer

    from frazil.generate.producer import ensure_topic
    from frazil.progress.events import CommitEvent

    caplog.set_level(logging.DEBUG, logger=_LOGGER)
    u = unique
    names = [f"stamps-{unique}-{i}" for i in range(topics)]
    for topic in names:
        ensure_topic(kafka_bootstrap, topic, partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    base = 1_700_000_000_000
    expected: dict[tuple[str, str, int], int] = {}
    for n in range(60):
        kind, partition = ("a", "b", "c")[n % 3], (n // 3) % 3
        topic = names[(n // 9) % topics]
        # Timestamps rise and fall within each partition and table.
        stamp = base + (n * 7919) % 1000
        producer.produce(
            topic, json.dumps({"id": n, "kind": kind}).encode(), partition=partition,
            timestamp=stamp,
        )  # fmt: skip
        key = (f"st_{u}.t_{kind}", topic, partition)
        expected[key] = max(expected.get(key, 0), stamp)
    assert producer.flush(30) == 0
    config = make_config(
        [
            {
                "name": f"st_{u}",
                "topics": names,
                "schema": {"id": "long", "kind": "string"},
                "route": {"field": "kind", "table": f"st_{u}.t_{{value}}"},
            }
        ]
    )
    commits: list[CommitEvent] = []
    [report] = run(config, until_caught_up=True, spark=spark, on_commit=commits.append)
    assert report.records_ingested == 60
    one, general = _ways(caplog)
    assert one >= 1 and general == 0
    got: dict[tuple[str, str, int], int] = {}
    for event in commits:
        for (tp, partition), stamp in event.max_timestamps.items():
            key = (event.table, tp, int(partition))
            got[key] = max(got.get(key, 0), stamp)
    assert got == expected
