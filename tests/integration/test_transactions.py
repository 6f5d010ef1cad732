"""Transactional producers: aborted transactions are never ingested, and an open transaction
neither blocks a run that stops once caught up nor counts as lag or as the latest offset.

Debezium's exactly-once source, Kafka Streams and Flink's exactly-once sinks all abort
transactions and send their records again; a reader that sees aborted records duplicates them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.observe.metrics import kafka_latest
from frazil.progress.offset_rules import CAUGHT_UP_SLACK_MS
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.clients import admin_config
from tests.integration.helpers import (
    end_offsets,
    frazil_snapshots,
    last_planned_at_ms,
    payments_pipeline,
    table_ids,
)

pytestmark = pytest.mark.integration


def _payment(record_id: str) -> bytes:
    return json.dumps(
        {
            "id": record_id,
            "type": "debit",
            "created_at": "2026-01-01T00:00:00",
            "document": "1",
            "payer": "x",
            "amount": 1,
        }
    ).encode()


def _transactional(bootstrap: str, unique: str, name: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{name}-{unique}", "linger.ms": 5}
    )
    producer.init_transactions(30)
    return producer


def _plain(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})


def _high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """The next offset to be written of partitions 0 and 1, open transactions included."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "frazil-tests",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in (0, 1)
        }
    finally:
        consumer.close()


def _exactly(spark: Any, table: str, expected: list[str]) -> None:
    ids = table_ids(spark, table)
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicated, f"{len(duplicated)} duplicated ids, e.g. {duplicated[:3]}"
    assert sorted(ids) == sorted(expected)


def test_aborted_transactions_are_not_ingested(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"txa-{unique}", f"db.txa_{unique}", f"txa_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = _transactional(kafka_bootstrap, unique, "abort")
    producer.begin_transaction()
    for i in range(500):
        producer.produce(topic, _payment(f"aborted-{i}"), partition=i % 2)
    producer.flush(30)  # in the log, then aborted: a read_uncommitted reader sees them
    producer.abort_transaction(30)
    committed = [f"committed-{i}" for i in range(300)]
    producer.begin_transaction()
    for i, record_id in enumerate(committed):
        producer.produce(topic, _payment(record_id), partition=i % 2)
    producer.commit_transaction(30)
    plain = [f"plain-{i}" for i in range(200)]
    other = _plain(kafka_bootstrap)
    for i, record_id in enumerate(plain):
        other.produce(topic, _payment(record_id), partition=i % 2)
    other.flush(30)
    config = make_config([payments_pipeline(name, topic, table)])

    reports = run(config, until_caught_up=True, spark=spark)

    _exactly(spark, table, committed + plain)
    assert reports[0].records_ingested == 500
    # The marker covers the whole log (aborted records and transaction markers included).
    assert reports[0].offsets == {topic: end_offsets(kafka_bootstrap, topic, 2)}

    # A user who wants every record (read_uncommitted) overrides it in kafka.properties.
    everything = make_config(
        [payments_pipeline(f"u_{name}", topic, f"{table}_u")],
        kafka={
            "bootstrap_servers": kafka_bootstrap,
            "properties": {"isolation.level": "read_uncommitted"},
        },
    )
    run(everything, until_caught_up=True, spark=spark)
    aborted = [f"aborted-{i}" for i in range(500)]
    _exactly(spark, f"{table}_u", aborted + committed + plain)


def test_an_open_transaction_is_not_waited_for_nor_counted_as_lag(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"txo-{unique}", f"db.txo_{unique}", f"txo_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    hour_ago = int(time.time() * 1000) - 3_600_000
    plain = _plain(kafka_bootstrap)
    before = [f"before-{i}" for i in range(200)]
    for i, record_id in enumerate(before):
        plain.produce(topic, _payment(record_id), partition=i % 2, timestamp=hour_ago + i)
    plain.flush(30)
    # Partition 0 gets a transaction left open; plain records after it are above its last
    # stable offset (invisible to read_committed readers until the transaction ends).
    producer = _transactional(kafka_bootstrap, unique, "open")
    producer.begin_transaction()
    pending = [f"pending-{i}" for i in range(100)]
    for record_id in pending:
        producer.produce(topic, _payment(record_id), partition=0, timestamp=hour_ago + 500)
    producer.flush(30)
    after = [f"after-{i}" for i in range(50)]
    for record_id in after:
        plain.produce(topic, _payment(record_id), partition=0, timestamp=hour_ago + 600)
    plain.flush(30)
    stable = {0: 100, 1: 100}
    assert _high_watermarks(kafka_bootstrap, topic) == {0: 250, 1: 100}
    # A rate limit, so that frazil asks Kafka which partitions lag after every batch.
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=60)])
    try:
        reports = run(config, until_caught_up=True, spark=spark)

        _exactly(spark, table, before)
        assert reports[0].offsets == {topic: stable}
        # frazil's own reads of Kafka's latest offsets stop at the last stable offset: the
        # Java admin client (lagging partitions, --reset-offsets latest) and librdkafka's
        # (lag in metrics, frazil status, the run's events).
        admin = JvmKafkaAdmin(spark, config)
        try:
            assert admin.offsets({topic: [0, 1]}, "latest") == {topic: stable}
        finally:
            admin.close()
        conf, _ = admin_config(config)
        assert kafka_latest(conf)({topic: {0: 0, 1: 0}}) == {topic: stable}
        # Partition 0 was read up to its last stable offset, so it does not lag: the mark is
        # not held back at its newest record (an hour old), as it would be for a lagging one,
        # only by the slack from when the last batch was planned.
        final = int(frazil_snapshots(spark, table)[-1]["frazil.valid-through-ms"])
        assert final == last_planned_at_ms(config) - CAUGHT_UP_SLACK_MS

        reset = make_config([payments_pipeline(f"r_{name}", topic, f"{table}_r")])
        run(reset, until_caught_up=True, spark=spark, reset_offsets="latest")
        recorded = [s for s in frazil_snapshots(spark, f"{table}_r") if s.get("frazil.reset")]
        assert json.loads(recorded[0]["frazil.offsets"]) == {
            topic: {str(p): o for p, o in stable.items()}
        }
    finally:
        producer.commit_transaction(30)

    # Once the transaction commits, its records and those behind it come in, once each.
    reports = run(config, until_caught_up=True, spark=spark)
    _exactly(spark, table, before + pending + after)
    assert reports[0].offsets == {topic: end_offsets(kafka_bootstrap, topic, 2)}
