"""A Kafka micro-batch is planned as the scan alone (``dev.frazil.spark.KafkaRows``): no
projection copies its rows, and what ``foreachBatch`` reads and the stream's progress counts
are the records, as Spark's own plan gives them. Its partitions are read by
``dev.frazil.spark.KafkaRecordReader``, whose rows equal those of Spark's reader."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.generate.producer import ensure_topic

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, count: int) -> None:
    ensure_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, f'{{"n": {i}}}'.encode(), key=f"k{i}".encode(), partition=i % 2)
    producer.flush(10)


def _stream_through(
    spark: Any,
    bootstrap: str,
    topic: str,
    per_batch: int,
    take: Callable[[Any, int], None],
    tmp_path: Path,
    shape: Callable[[Any], Any] = lambda stream: stream,
) -> Any:
    """The topic read from its start by a stream, ``per_batch`` records a batch, shaped by
    ``shape`` and each batch handed to ``take``; the query, ended."""
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_batch))
        .load()
    )
    query = (
        shape(stream)
        .writeStream.foreachBatch(take)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return query


def test_a_kafka_batch_is_its_scan_alone_and_reads_every_record(
    spark: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic = f"rows-{unique}"
    _produce(kafka_bootstrap, topic, 50)
    seen: list[tuple[str, str, str, int, int]] = []

    def take(batch: Any, _batch_id: int) -> None:
        # Through the batch's own plan over the rows (Scan ExistingRDD), as frazil's writes
        # read them, then collected (copied) by Spark.
        rows = batch.selectExpr(
            "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "topic", "partition",
            "offset",
        ).collect()  # fmt: skip
        seen.extend((r.k, r.v, r.topic, r.partition, r.offset) for r in rows)

    query = _stream_through(spark, kafka_bootstrap, topic, 20, take, tmp_path)
    plan = query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    assert "KafkaMicroBatchScan" in plan and "Project" not in plan, plan
    assert sorted(seen, key=lambda r: (r[3], r[4])) == [
        (f"k{i}", f'{{"n": {i}}}', topic, i % 2, i // 2)
        for i in sorted(range(50), key=lambda i: (i % 2, i // 2))
    ]
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50
    # Three batches of at most 20 records: rows of one batch were not left over for the next.
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 3


def test_the_readers_rows_equal_sparks_column_by_column(
    spark: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Every column of the source's rows, as frazil's reader writes them, against a batch read
    of the same topic (Spark's own reader): null keys and values, empty ones, timestamps set
    by the producer (the epoch, one millisecond, minutes ahead) and by the broker; batches sent
    as they are and compressed (the client hands their records over differently)."""
    topic = f"rows-all-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    records: list[dict[str, Any]] = [
        {"key": None, "value": b'{"n": 0}'},
        {"key": b"k1", "value": None},
        {"key": b"", "value": b""},
        {"key": b"k3", "value": b"\x00\xff binary", "timestamp": 0},
        {"key": b"k4", "value": b"v4", "timestamp": 1},
        # Kafka 4 refuses timestamps more than an hour ahead (message.timestamp.after.max.ms).
        {"key": b"k5", "value": b"v5", "timestamp": int(time.time() * 1000) + 600_123},
        {"key": b"k6", "value": "é€😀".encode()},
    ]
    for compression in ("none", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "compression.type": compression})
        for i, record in enumerate(records):
            producer.produce(topic, partition=i % 2, **record)
        assert producer.flush(10) == 0
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    seen: list[tuple[Any, ...]] = []

    def take(batch: Any, _batch_id: int) -> None:
        seen.extend(tuple(r) for r in batch.select(*columns).collect())

    _stream_through(spark, kafka_bootstrap, topic, 8, take, tmp_path)
    spark_rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .load()
        .select(*columns)
        .collect()
    )
    assert len(seen) == 21
    assert sorted(seen, key=lambda r: (r[3], r[4])) == sorted(
        (tuple(r) for r in spark_rows), key=lambda r: (r[3], r[4])
    )
    assert {r[1] for r in seen} == {None, b"", b'{"n": 0}', b"\x00\xff binary", b"v4", b"v5",
                                   "é€😀".encode()}  # fmt: skip


def test_one_topic_read_by_both_readers_in_one_query(
    spark: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A union of the bare stream (frazil's reader) and a projection of it (Spark's): Spark's
    consumer pool keys consumers by group id and partition and refuses other settings under
    one key, so frazil's consumers have a group id of their own."""
    topic = f"rows-both-{unique}"
    _produce(kafka_bootstrap, topic, 30)
    seen: list[tuple[str, int]] = []

    def take(batch: Any, _batch_id: int) -> None:
        seen.extend(
            (r.v, r.offset)
            for r in batch.selectExpr("CAST(value AS STRING) AS v", "offset").collect()
        )

    query = _stream_through(
        spark, kafka_bootstrap, topic, 100, take, tmp_path,
        shape=lambda stream: stream.unionByName(stream.where("offset >= 0")),
    )  # fmt: skip
    assert query.exception() is None
    plan = query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    assert plan.count("MicroBatchScan") == 2 and plan.count("KafkaMicroBatchScan") == 1, plan
    assert sorted(seen) == sorted([(f'{{"n": {i}}}', i // 2) for i in range(30)] * 2)
