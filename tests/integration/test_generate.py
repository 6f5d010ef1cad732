"""``frazil generate`` against the real local Kafka broker (fixture ``kafka_bootstrap``)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from typer.testing import CliRunner

import frazil.cli.generate_cmd  # noqa: F401  (registers the command on the app)
from frazil.cli.app import app
from frazil.generate.payments import PAYMENT_TYPES
from frazil.generate.producer import ensure_topic, produce_events

pytestmark = pytest.mark.integration


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[Any]:
    """Read ``topic`` from the beginning until ``expected`` records arrived (or time ran out)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("frazil-test"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1_000, timeout=1.0):
                assert message.error() is None, message.error()
                records.append(message)
        return records
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("frazil-wm")})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def test_generate_command_fills_a_new_topic(kafka_bootstrap: str) -> None:
    topic = unique_topic("frazil-generate")

    result = CliRunner().invoke(
        app,
        [
            "generate",
            "--topic",
            topic,
            "--count",
            "5000",
            "--partitions",
            "4",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--seed",
            "11",
            "--output",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["topic"] == topic
    assert report["count"] == 5_000
    assert sum(report["partition_counts"].values()) == 5_000

    # Exactly 5,000 records landed, over all 4 partitions.
    watermarks = high_watermarks(kafka_bootstrap, topic, 4)
    assert sum(watermarks.values()) == 5_000
    assert all(n > 0 for n in watermarks.values())
    assert {str(p): n for p, n in watermarks.items()} == report["partition_counts"]

    records = consume_all(kafka_bootstrap, topic, 5_000)
    assert len(records) == 5_000
    assert {record.partition() for record in records} == {0, 1, 2, 3}
    events = [json.loads(record.value()) for record in records]
    ids = [event["id"] for event in events]
    assert len(set(ids)) == 5_000
    for record, event in zip(records, events, strict=True):
        assert record.key() == event["id"].encode()
        assert set(event) == {"id", "type", "created_at", "document", "payer", "amount"}
        assert event["type"] in PAYMENT_TYPES
        assert event["created_at"].endswith("Z")
        assert event["document"].isdigit()
        assert isinstance(event["payer"], str)
        assert isinstance(event["amount"], int)


def test_ensure_topic_keeps_an_existing_topic(kafka_bootstrap: str) -> None:
    topic = unique_topic("frazil-existing")

    created = ensure_topic(kafka_bootstrap, topic, partitions=2)
    again = ensure_topic(kafka_bootstrap, topic, partitions=6)

    assert (created.created, created.partitions) == (True, 2)
    assert (again.created, again.partitions) == (False, 2)


def test_rate_limit_slows_production_down(kafka_bootstrap: str) -> None:
    topic = unique_topic("frazil-rate")
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    started = time.monotonic()
    report = produce_events(kafka_bootstrap, topic, 2_000, rate=1_000, progress=False)
    elapsed = time.monotonic() - started

    assert report.count == 2_000
    # 2,000 events at 1,000/s need about 2 s; only the lower bound is safe to assert.
    assert elapsed >= 1.8
    assert report.seconds >= 1.8


def test_custom_event_factory(kafka_bootstrap: str) -> None:
    topic = unique_topic("frazil-factory")
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    counter = iter(range(1_000_000))

    def factory() -> tuple[bytes | None, bytes]:
        return None, str(next(counter)).encode()

    report = produce_events(kafka_bootstrap, topic, 100, event_factory=factory, progress=False)

    assert report.count == 100
    assert report.partition_counts == {0: 100}
    values = sorted(int(record.value()) for record in consume_all(kafka_bootstrap, topic, 100))
    assert values == list(range(100))
