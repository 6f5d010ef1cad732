"""The local Kafka broker: a real Kafka 4.x JVM started, used, stopped and restarted.

Also its optional SASL_PLAINTEXT (PLAIN) listener: clients with the right password get in,
others do not.
"""

from __future__ import annotations

import json
import socket
import stat
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from frazil.errors import ServiceError
from frazil.local.broker import LocalBroker
from tests.conftest import SASL_PASSWORD, SASL_USER, free_ports

pytestmark = pytest.mark.integration

# A password that needs every kind of escaping on its way into server.properties and the
# JAAS option: quotes, backslash, JAAS/properties syntax, a comment opener, whitespace,
# a newline and characters beyond Latin-1 and the BMP. (No leading space: librdkafka, the
# test client, does not send one.)
TRICKY_PASSWORD = 'p"w\\d; x=y /* #!\n\tö€𝄞 '


def sasl_client(user: str, password: str) -> dict[str, str]:
    """librdkafka settings for the local broker's SASL_PLAINTEXT listener."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def create_topic(bootstrap: str, topic: str, client: Mapping[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1)]).values():
        future.result(timeout=30)


def produce(
    bootstrap: str, topic: str, key: bytes, value: bytes, client: Mapping[str, str] | None = None
) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **(client or {})}
    )
    producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def consume_one(
    bootstrap: str, topic: str, timeout: float = 30, client: Mapping[str, str] | None = None
) -> tuple[bytes, bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(client or {}),
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


def test_sasl_listener_accepts_the_right_password_only(
    local_broker: LocalBroker, kafka_bootstrap: str, kafka_sasl_bootstrap: str
) -> None:
    assert kafka_sasl_bootstrap == local_broker.sasl_bootstrap != kafka_bootstrap
    good = sasl_client(SASL_USER, SASL_PASSWORD)
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_sasl_bootstrap, topic, good)
    produce(kafka_sasl_bootstrap, topic, b"k", b"over sasl", good)
    assert consume_one(kafka_sasl_bootstrap, topic, client=good) == (b"k", b"over sasl")
    # Same topics on both listeners.
    assert consume_one(kafka_bootstrap, topic) == (b"k", b"over sasl")

    errors: list[KafkaError] = []
    wrong = AdminClient(
        {
            "bootstrap.servers": kafka_sasl_bootstrap,
            **sasl_client(SASL_USER, "not-the-password"),
            "error_cb": errors.append,
            "log_level": 0,  # librdkafka would print the expected failure to stderr
        }
    )
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=1)

    def rejected() -> bool:
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    # The metadata request fails; the reason comes through error_cb.
    deadline = time.monotonic() + 5
    while not rejected() and time.monotonic() < deadline:
        wrong.poll(0.1)
    assert rejected(), errors


def test_default_broker_has_no_sasl_listener(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path, port=19092, controller_port=19093)
    assert broker.sasl_bootstrap is None and broker.status().sasl_bootstrap is None
    properties = broker.config.server_properties()
    assert "sasl" not in properties.lower()
    assert "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n" in properties
    with pytest.raises(ValueError, match="together"):
        LocalBroker(tmp_path, sasl_port=19094)
    with pytest.raises(ValueError, match="together"):
        LocalBroker(tmp_path, sasl_users={"u": "p"})
    with pytest.raises(ValueError, match="at least one"):
        LocalBroker(tmp_path, sasl_port=19094, sasl_users={})
    with pytest.raises(ValueError, match="not allowed"):
        LocalBroker(tmp_path, sasl_port=19094, sasl_users={"a@b": "p"})
    with pytest.raises(ValueError, match="differ"):
        LocalBroker(tmp_path, port=19092, sasl_port=19092, sasl_users={"u": "p"})


def test_data_survives_down_and_up(tmp_path: Path) -> None:
    # With a SASL listener whose password needs escaping: it must keep working across a
    # restart, and the pid file must remember the SASL listener.
    port, controller_port, sasl_port = free_ports(3)
    users = {"tricky.user-1": TRICKY_PASSWORD}
    broker = LocalBroker(
        tmp_path, port=port, controller_port=controller_port, sasl_port=sasl_port, sasl_users=users
    )
    sasl = sasl_client("tricky.user-1", TRICKY_PASSWORD)
    assert not broker.status().running
    try:
        bootstrap = broker.up(timeout=90)  # no timing asserted: the machine may be loaded
        assert bootstrap == f"127.0.0.1:{port}"
        assert broker.up() == bootstrap  # idempotent while running
        # It holds passwords: owner only.
        assert stat.S_IMODE(broker.config.file.stat().st_mode) == 0o600

        status = broker.status()
        assert status.running and status.pid is not None and status.formatted
        assert status.bootstrap == bootstrap
        assert status.sasl_bootstrap == broker.sasl_bootstrap == f"127.0.0.1:{sasl_port}"
        # Another view of the same state dir sees the SASL listener too (from the pid file).
        plain_view = LocalBroker(tmp_path, port=port, controller_port=controller_port)
        assert plain_view.status().sasl_bootstrap == broker.sasl_bootstrap
        # ... but cannot "start" it as a broker without that listener or with other users.
        with pytest.raises(ServiceError, match="change its listeners"):
            plain_view.up(timeout=10)
        other_users = LocalBroker(
            tmp_path,
            port=port,
            controller_port=controller_port,
            sasl_port=sasl_port,
            sasl_users={"tricky.user-1": "other"},
        )
        with pytest.raises(ServiceError, match="other SASL users"):
            other_users.up(timeout=10)

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
        assert consume_one(f"127.0.0.1:{sasl_port}", topic, client=sasl) == (
            b"id-1",
            b"still here",
        )
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
    assert local_broker.sasl_bootstrap is not None
    assert status["sasl_bootstrap"] == local_broker.sasl_bootstrap
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
