"""The local Kafka broker: a real Kafka 4.x JVM started, used, stopped and restarted."""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from frazil.errors import ServiceError
from frazil.local.broker import LocalBroker
from tests.conftest import free_ports

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def consume_one(bootstrap: str, topic: str, timeout: float = 30) -> tuple[bytes, bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            key, value = msg.key(), msg.value()
            assert isinstance(key, bytes) and isinstance(value, bytes)
            return key, value
        raise AssertionError(f"no message on {topic} within {timeout}s")
    finally:
        consumer.close()


def test_session_broker_round_trip(kafka_bootstrap: str) -> None:
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, b"k", b"hello")
    assert consume_one(kafka_bootstrap, topic) == (b"k", b"hello")


def test_data_survives_down_and_up(tmp_path: Path) -> None:
    port, controller_port = free_ports(2)
    broker = LocalBroker(tmp_path, port=port, controller_port=controller_port)
    assert not broker.status().running
    try:
        started = time.monotonic()
        bootstrap = broker.up(timeout=90)
        assert time.monotonic() - started < 30
        assert bootstrap == f"127.0.0.1:{port}"
        assert broker.up() == bootstrap  # idempotent while running

        status = broker.status()
        assert status.running and status.pid is not None and status.formatted
        assert status.bootstrap == bootstrap

        topic = "survivor"
        create_topic(bootstrap, topic)
        produce(bootstrap, topic, b"id-1", b"still here")

        assert broker.down() is True
        assert not broker.status().running
        assert broker.down() is False  # no-op when stopped
        meta = (tmp_path / "kafka" / "data" / "meta.properties").read_text()

        assert broker.up(timeout=90) == bootstrap
        assert (tmp_path / "kafka" / "data" / "meta.properties").read_text() == meta
        assert consume_one(bootstrap, topic) == (b"id-1", b"still here")
        assert broker.status().data_bytes > 0
    finally:
        broker.down()


def test_status_cli_reports_a_running_broker_as_json(local_broker: LocalBroker) -> None:
    result = CliRunner().invoke(
        app, ["local", "status", "--state-dir", str(local_broker.state_dir), "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["running"] is True
    assert status["bootstrap"] == local_broker.bootstrap
    assert isinstance(status["pid"], int)


def test_up_fails_fast_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        (controller_port,) = free_ports(1)
        broker = LocalBroker(tmp_path, port=port, controller_port=controller_port)
        with pytest.raises(ServiceError, match="already in use"):
            broker.up(timeout=10)
    assert not broker.status().running
