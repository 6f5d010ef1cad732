"""A broker that goes away under a running pipeline and comes back: the wait is said while it
lasts and when it ends, and the table holds every record once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frazil.engine.runner import run
from frazil.local.broker import LocalBroker
from tests.conftest import free_ports
from tests.integration.helpers import payments_pipeline, produce_payments, table_ids

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _until(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what}"
        time.sleep(0.5)


def test_a_broker_gone_and_back_is_said_and_loses_nothing(
    spark: Any,
    make_config: Any,
    unique: str,
    tmp_path: Path,
    caplog: Any,
    monkeypatch: Any,
) -> None:
    from frazil.engine import kafka_watch

    monkeypatch.setattr(kafka_watch, "STALLED_S", 3.0)  # 30 s in a run: the same path, sooner
    port, controller = free_ports(2)
    broker = LocalBroker(tmp_path / "state", port=port, controller_port=controller)
    broker.up(timeout=90)
    stop = threading.Event()
    failed: list[BaseException] = []
    thread: threading.Thread | None = None
    try:
        bootstrap = broker.bootstrap
        topic, table, name = f"gone-{unique}", f"db.gone_{unique}", f"gone_{unique}"
        ids = produce_payments(bootstrap, topic, 200, seed=720, partitions=2)
        config = make_config(
            [payments_pipeline(name, topic, table, trigger="1s")],
            kafka={"bootstrap_servers": bootstrap},
        )

        def count() -> int:
            try:
                return len(table_ids(spark, table))
            except Exception:  # not created yet
                return 0

        def said(words: str) -> bool:
            return any(words in r.getMessage() for r in caplog.records)

        def target() -> None:
            try:
                run(config, spark=spark, stop_event=stop)
            except BaseException as exc:  # the test reads it after the join
                failed.append(exc)

        caplog.set_level(logging.WARNING, logger="frazil.engine.kafka_watch")
        thread = threading.Thread(target=target)
        thread.start()
        _until(lambda: count() == 200, 180, "the first records")
        broker.down()
        _until(lambda: said("Kafka has not answered for"), 120, "the wait said")
        assert not failed
        broker.up(timeout=90)
        more = produce_payments(bootstrap, topic, 100, seed=721, partitions=2)
        _until(lambda: count() == 300, 240, "the records after")
        _until(lambda: said("Kafka answers again after"), 30, "the end of the wait said")
        [warning] = [r.getMessage() for r in caplog.records if "has not answered" in r.getMessage()]
        assert f"at {bootstrap} (kafka.bootstrap_servers): 127.0.0.1:{port} refused" in warning
    finally:
        stop.set()
        if thread is not None:
            thread.join(120)
        broker.down()
    assert not failed
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids + more)
