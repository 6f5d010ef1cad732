"""Fixtures shared by every test: a real local Kafka broker on free ports.

The one session broker serves a PLAINTEXT listener (``kafka_bootstrap``) and a SASL/PLAIN
one (``kafka_sasl_bootstrap``, with ``kafka_sasl_properties``) over the same topics, so tests
can produce over PLAINTEXT and read with credentials without a second broker.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from frazil.local.broker import LocalBroker

# The one user of the session broker's SASL listener.
SASL_USER = "frazil"
SASL_PASSWORD = "frazil-secret-pw"


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture(scope="session")
def local_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A running :class:`LocalBroker` for the whole session, in its own temp state dir.

    It also has a SASL_PLAINTEXT listener (mechanism PLAIN) that accepts only
    :data:`SASL_USER` with :data:`SASL_PASSWORD`.
    """
    port, controller_port, sasl_port = free_ports(3)
    broker = LocalBroker(
        tmp_path_factory.mktemp("frazil-state"),
        port=port,
        controller_port=controller_port,
        sasl_port=sasl_port,
        sasl_users={SASL_USER: SASL_PASSWORD},
    )
    try:
        broker.up(timeout=90)
        yield broker
    finally:
        broker.down()


@pytest.fixture(scope="session")
def kafka_bootstrap(local_broker: LocalBroker) -> str:
    """Bootstrap address (``127.0.0.1:port``) of the session's real Kafka broker."""
    return local_broker.bootstrap


@pytest.fixture(scope="session")
def kafka_sasl_bootstrap(local_broker: LocalBroker) -> str:
    """Bootstrap address of the session broker's SASL_PLAINTEXT (PLAIN) listener."""
    assert local_broker.sasl_bootstrap is not None
    return local_broker.sasl_bootstrap


@pytest.fixture(scope="session")
def kafka_sasl_properties() -> dict[str, str]:
    """Java Kafka client properties that log in to ``kafka_sasl_bootstrap``.

    One dict for the whole session: copy it before changing it.
    """
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SASL_USER}" password="{SASL_PASSWORD}";'
        ),
    }


@pytest.fixture(scope="session")
def schema_registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real Confluent-compatible Schema Registry (Apicurio) for the session.

    Started only by tests that ask for it; in-memory, so every session starts empty.
    """
    from frazil.local.registry import LocalRegistry

    (port,) = free_ports(1)
    registry = LocalRegistry(tmp_path_factory.mktemp("registry-state"), port=port)
    try:
        yield registry.up(timeout=180)
    finally:
        registry.down()
