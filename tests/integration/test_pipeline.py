"""The spine end to end: real broker -> Spark Structured Streaming -> real Iceberg tables."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.engine.bad_records import WAYS_FORWARD
from frazil.engine.runner import run
from frazil.errors import DecodeError, KafkaError, PipelineError
from frazil.generate.producer import ensure_topic
from frazil.progress.events import BatchStarted, CommitEvent
from frazil.progress.offset_rules import CAUGHT_UP_SLACK_MS
from frazil.source.clients import list_partitions
from tests.integration.helpers import (
    end_offsets,
    frazil_snapshots,
    last_planned_at_ms,
    payments_pipeline,
    produce_payments,
    table_ids,
)

pytestmark = pytest.mark.integration


def test_ingests_exactly_once_and_records_offsets(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"pay-{unique}", f"db.pay_{unique}", f"p_{unique}"
    first = produce_payments(kafka_bootstrap, topic, 3000, seed=1)
    config = make_config(
        [payments_pipeline(name, topic, table, kafka_metadata=["partition", "offset", "timestamp"])]
    )

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(first)
    report = reports[0]
    assert report.records_ingested == 3000
    assert report.table_rows == 3000
    ends = end_offsets(kafka_bootstrap, topic)
    assert report.offsets == {topic: ends}
    # One commit per micro-batch, each stamped with the marker.
    snapshots = frazil_snapshots(spark, table)
    with_data = [s for s in snapshots if int(s.get("added-data-files", "0")) > 0]
    assert len(with_data) == report.batches
    # The run ended with a marker of its own carrying the exact valid-through (no data).
    assert snapshots[-1].get("added-data-files", "0") == "0"
    last = snapshots[-1]
    assert last["frazil.pipeline"] == name
    assert json.loads(last["frazil.offsets"]) == {topic: {str(p): o for p, o in ends.items()}}
    # Valid-through: the minimum over partitions of the newest committed timestamp (each read
    # to its end, so held back by the slack at most from when the last batch was planned).
    newest = spark.sql(
        f"SELECT max(unix_millis(_kafka_timestamp)) FROM lake.{table} GROUP BY _kafka_partition"
    ).collect()
    floor = last_planned_at_ms(config) - CAUGHT_UP_SLACK_MS
    assert int(last["frazil.valid-through-ms"]) == min(max(r[0], floor) for r in newest)
    # Decoding: the ISO-8601 string became a timestamp, amounts are longs.
    row = spark.sql(f"SELECT * FROM lake.{table} LIMIT 1").first()
    assert row["created_at"].year >= 2024
    assert isinstance(row["amount"], int)

    # A second run picks up only what is new.
    second = produce_payments(kafka_bootstrap, topic, 1000, seed=2)
    reports = run(config, until_caught_up=True, spark=spark)
    assert reports[0].records_ingested == 1000
    assert sorted(table_ids(spark, table)) == sorted(first + second)
    batch_ids = [
        int(s["frazil.batch-id"])
        for s in frazil_snapshots(spark, table)
        if int(s.get("added-data-files", "0")) > 0
    ]
    assert batch_ids == sorted(batch_ids) and len(set(batch_ids)) == len(batch_ids)


def test_an_early_first_commit_takes_a_small_batch_then_full_ones(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """The first batch of a run with a backlog takes first_batch_max_offsets records and is
    committed with its offsets; the pipeline's own query then reads on from the same
    checkpoint, in batches of max_offsets_per_trigger, every record once."""
    topic, table, name = f"early-{unique}", f"db.early_{unique}", f"e_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 2000, seed=28)
    config = make_config(
        [
            payments_pipeline(
                name, topic, table, first_batch_max_offsets=200, max_offsets_per_trigger=1000
            )
        ]
    )

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(ids)
    added = [
        int(s["added-records"])
        for s in frazil_snapshots(spark, table)
        if int(s.get("added-data-files", "0")) > 0
    ]
    assert 0 < added[0] <= 200
    assert all(n > 200 for n in added[1:-1])
    assert sum(added) == reports[0].records_ingested == 2000
    assert reports[0].batches == len(added)
    # One checkpoint throughout: Spark's commit log holds every batch, from 0.
    commits = Path(config.checkpoint_for(config.pipelines[0])) / "commits"
    done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    assert done == list(range(len(added)))


def test_lost_checkpoint_resumes_from_table_offsets(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"ckpt-{unique}", f"db.ckpt_{unique}", f"c_{unique}"
    first = produce_payments(kafka_bootstrap, topic, 2000, seed=3)
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=700)])
    run(config, until_caught_up=True, spark=spark)
    shutil.rmtree(config.checkpoint_for(config.pipelines[0]))

    second = produce_payments(kafka_bootstrap, topic, 1500, seed=4)
    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].resumed_from_table
    assert reports[0].records_ingested == 1500
    ids = table_ids(spark, table)
    assert len(ids) == len(set(ids)) == 3500
    assert set(ids) == set(first + second)


def test_replayed_batch_is_skipped(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Crash after the Iceberg commit but before Spark's commit log: the replay is skipped."""
    topic, table, name = f"replay-{unique}", f"db.replay_{unique}", f"r_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 1200, seed=5)
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=500)])
    run(config, until_caught_up=True, spark=spark)
    commits = Path(config.checkpoint_for(config.pipelines[0])) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    for crc in commits.glob(f".{last}.crc"):
        crc.unlink()

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].skipped_batches == 1
    assert reports[0].records_ingested == 0
    assert sorted(table_ids(spark, table)) == sorted(ids)


def test_undecodable_record_stops_without_committing(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"bad-{unique}", f"db.bad_{unique}", f"b_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    good = {
        "id": "a",
        "type": "debit",
        "created_at": "2026-01-01T00:00:00",
        "document": "1",
        "payer": "X",
        "amount": 1,
    }
    producer.produce(topic, json.dumps(good).encode(), partition=0)
    producer.produce(topic, b'{"id": "b", "amount": ', partition=0)
    producer.produce(topic, json.dumps({**good, "amount": "lots"}).encode(), partition=0)
    producer.flush(10)
    config = make_config([payments_pipeline(name, topic, table)])

    with pytest.raises(DecodeError) as info:
        run(config, until_caught_up=True, spark=spark)

    message = str(info.value)
    assert "2 record(s)" in message
    assert f"topic {topic} partition 0 offset 1" in message
    assert f"topic {topic} partition 0 offset 2" in message
    # The mismatch names its field and both types; the stop says the two ways forward.
    assert "field 'amount' has a value of type string, the schema's type is bigint" in message
    assert message.endswith(WAYS_FORWARD)
    assert "errors.tolerance: all" in WAYS_FORWARD and "docs/dead-letters.md" in WAYS_FORWARD
    assert table_ids(spark, table) == []


def test_infers_schema_and_pyiceberg_duckdb_read_it(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, lake_dir: Path
) -> None:
    topic, table, name = f"infer-{unique}", f"db.infer_{unique}", f"i_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 500, seed=6, partitions=2)
    pipeline = payments_pipeline(name, topic, table)
    del pipeline["schema"]
    del pipeline["partition_by"]
    config = make_config([pipeline])

    run(config, until_caught_up=True, spark=spark)

    types = dict(spark.table(f"lake.{table}").dtypes)
    assert types == {
        "amount": "bigint",
        "created_at": "timestamp",
        "document": "string",
        "id": "string",
        "payer": "string",
        "type": "string",
    }
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = lake_dir / "warehouse"
    catalog = SqlCatalog(
        "lake", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri()
    )
    iceberg_table = catalog.load_table(table)
    arrow = iceberg_table.scan().to_arrow()
    assert sorted(arrow.column("id").to_pylist()) == sorted(ids)
    con = iceberg_table.scan().to_duckdb(table_name="payments")
    counts = dict(con.sql("SELECT type, count(*) FROM payments GROUP BY type").fetchall())
    assert sum(counts.values()) == 500
    assert set(counts) <= {"debit", "credit", "bank_slip"}


def test_stop_request_lets_the_batch_in_flight_commit(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"stop-{unique}", f"db.stop_{unique}", f"s_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 2000, seed=7)
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=400)])
    stop = threading.Event()
    started: list[int] = []
    committed: list[CommitEvent] = []

    def on_event(event: Any) -> None:
        if isinstance(event, BatchStarted) and not stop.is_set():
            # Ask to stop while this batch is being read and written, not after its commit.
            started.append(event.batch_id)
            stop.set()
        if isinstance(event, CommitEvent):
            committed.append(event)

    reports = run(config, spark=spark, stop_event=stop, on_event=on_event)

    in_table = table_ids(spark, table)
    # The batch in flight when the stop came was finished and committed, and nothing after it.
    assert [e.batch_id for e in committed] == started
    assert len(in_table) == committed[0].records == reports[0].records_ingested > 0
    assert Counter(in_table).most_common(1)[0][1] == 1
    # Whatever the stop left behind is picked up by the next run, exactly once.
    run(config, until_caught_up=True, spark=spark)
    assert sorted(table_ids(spark, table)) == sorted(ids)


def test_topic_pattern_merges_rotated_topics_into_one_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    day1, day2 = f"rot{unique}.20240101", f"rot{unique}.20240102"
    other = f"rot{unique}.archive"
    ids = produce_payments(kafka_bootstrap, day1, 300, seed=8, partitions=2)
    ids += produce_payments(kafka_bootstrap, day2, 200, seed=9, partitions=2)
    produce_payments(kafka_bootstrap, other, 50, seed=10, partitions=1)
    pipeline = payments_pipeline(
        f"rot_{unique}", "unused", f"db.rot_{unique}", kafka_metadata=["topic"]
    )
    del pipeline["topics"]
    pipeline["topic_pattern"] = f"rot{unique}\\.\\d{{8}}"
    config = make_config([pipeline])

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, f"db.rot_{unique}")) == sorted(ids)
    topics = {
        row[0]: row[1]
        for row in spark.sql(
            f"SELECT _kafka_topic, count(*) FROM lake.db.rot_{unique} GROUP BY _kafka_topic"
        ).collect()
    }
    assert topics == {day1: 300, day2: 200}
    assert set(reports[0].offsets) == {day1, day2}


def test_missing_topic_and_unreachable_kafka_fail_fast(
    make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    config = make_config([payments_pipeline(f"m_{unique}", f"missing-{unique}", "db.missing")])
    with pytest.raises(PipelineError, match=r"pipelines\[0\]\.topics: topic\(s\) missing-"):
        run(config)

    unreachable = make_config(
        [payments_pipeline(f"u_{unique}", "t", "db.unreachable")],
        kafka={"bootstrap_servers": "127.0.0.1:1"},
    )
    with pytest.raises(KafkaError, match=r"Kafka does not answer at 127\.0\.0\.1:1"):
        list_partitions(unreachable, unreachable.pipelines[0], timeout=1)


def test_two_pipelines_run_as_one_application(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    a_ids = produce_payments(kafka_bootstrap, f"two-a-{unique}", 400, seed=11, partitions=2)
    b_ids = produce_payments(kafka_bootstrap, f"two-b-{unique}", 300, seed=12, partitions=3)
    config = make_config(
        [
            payments_pipeline(f"a_{unique}", f"two-a-{unique}", f"db.two_a_{unique}"),
            payments_pipeline(f"b_{unique}", f"two-b-{unique}", f"db.two_b_{unique}"),
        ]
    )

    only_b = run(config, pipeline_names=[f"b_{unique}"], until_caught_up=True, spark=spark)
    assert [r.pipeline for r in only_b] == [f"b_{unique}"]
    reports = run(config, until_caught_up=True, spark=spark)

    assert {r.pipeline: r.records_ingested for r in reports} == {
        f"a_{unique}": 400,
        f"b_{unique}": 0,
    }
    assert sorted(table_ids(spark, f"db.two_a_{unique}")) == sorted(a_ids)
    assert sorted(table_ids(spark, f"db.two_b_{unique}")) == sorted(b_ids)


def test_state_checkpoint_and_warehouse_may_be_uris(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Nothing builds a local path from a location: file:// URIs go the Hadoop/Iceberg way."""
    topic, table, name = f"uri-{unique}", f"db.uri_{unique}", f"u_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 500, seed=13, partitions=2)
    checkpoint = (tmp_path / "ckpt").as_uri()
    config = make_config(
        [payments_pipeline(name, topic, table, checkpoint=checkpoint, max_offsets_per_trigger=300)],
        state_dir=(tmp_path / "state").as_uri(),
    )
    assert config.state_dir.startswith("file:") and config.pipelines[0].checkpoint == checkpoint

    run(config, until_caught_up=True, spark=spark)
    assert (tmp_path / "ckpt" / "offsets").is_dir()
    # Losing the checkpoint at a URI: resumed from the table, through Hadoop's FileSystem.
    shutil.rmtree(tmp_path / "ckpt")
    more = produce_payments(kafka_bootstrap, topic, 100, seed=14, partitions=2)
    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].resumed_from_table and reports[0].records_ingested == 100
    assert sorted(table_ids(spark, table)) == sorted(ids + more)
    assert not Path("file:").exists(), "a URI was used as a local path"


def test_second_run_of_a_running_pipeline_refuses_to_start(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"twice-{unique}", f"db.twice_{unique}", f"t_{unique}"
    produce_payments(kafka_bootstrap, topic, 200, seed=15, partitions=1)
    config = make_config([payments_pipeline(name, topic, table)])
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    first = subprocess.Popen(
        [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if " batch " in line:
                break
        with pytest.raises(PipelineError, match=rf"pipeline '{name}' is already running \(pid "):
            run(config, until_caught_up=True, spark=spark)
        first.send_signal(signal.SIGTERM)
        assert first.wait(120) == 0
    finally:
        if first.poll() is None:
            first.kill()
    # Once the first run has stopped, the pipeline runs again.
    assert run(config, until_caught_up=True, spark=spark)[0].records_ingested == 0


def test_a_small_batch_over_many_partitions_is_written_as_few_files(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Spark's Kafka source reads each partition as a task of its own, and each task wrote a
    data file: a trickle over 8 partitions made 8 tiny files per commit. A batch below
    ONE_TASK_RECORDS is one task and one file; a larger one as many as the cores."""
    from frazil.engine.table_write import ONE_TASK_RECORDS

    topic, table, name = f"few-{unique}", f"db.few_{unique}", f"f_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 14_000, seed=61, partitions=8)
    config = make_config(
        [
            payments_pipeline(
                name, topic, table, partition_by=[], max_offsets_per_trigger=6_000,
                first_batch_max_offsets=0,
            )
        ]
    )  # fmt: skip

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(ids)
    added = [
        (int(s["added-records"]), int(s["added-data-files"]))
        for s in frazil_snapshots(spark, table)
        if int(s.get("added-data-files", "0")) > 0
    ]
    assert sum(records for records, _ in added) == reports[0].records_ingested == 14_000
    cores = spark.sparkContext.defaultParallelism
    # The query's first batch counts its records from where Spark's Kafka source started.
    for records, files in added:
        assert files == (1 if records < ONE_TASK_RECORDS else cores), added
