"""Fixtures shared by every test: a real local Kafka broker on free ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from frazil.local.broker import LocalBroker


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
    """A running :class:`LocalBroker` for the whole session, in its own temp state dir."""
    port, controller_port = free_ports(2)
    broker = LocalBroker(
        tmp_path_factory.mktemp("frazil-state"), port=port, controller_port=controller_port
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
