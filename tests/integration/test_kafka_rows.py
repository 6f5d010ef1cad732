"""A Kafka micro-batch is planned as the scan alone (``dev.frazil.spark.KafkaRows``): no
projection copies its rows, and what ``foreachBatch`` reads and the stream's progress counts
are the records, as Spark's own plan gives them."""

from __future__ import annotations

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

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(take)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    plan = query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    assert "MicroBatchScan" in plan and "Project" not in plan, plan
    assert sorted(seen, key=lambda r: (r[3], r[4])) == [
        (f"k{i}", f'{{"n": {i}}}', topic, i % 2, i // 2)
        for i in sorted(range(50), key=lambda i: (i % 2, i // 2))
    ]
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50
    # Three batches of at most 20 records: rows of one batch were not left over for the next.
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 3
