"""The driver JVM's py4j replies over 8 KiB come without Nagle's wait on the connections frazil
talks to the JVM on (``frazil.engine.py4j_replies``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from frazil.engine.py4j_replies import prompt_replies
from frazil.jvm.classes import java_class

pytestmark = pytest.mark.integration


def _waiting(spark: Any) -> int:
    """Connections Python opened to the JVM that still have Nagle's algorithm on."""
    server = spark.sparkContext._gateway.java_gateway_server
    return int(java_class(spark.sparkContext._jvm, "dev.frazil.py4j.PromptReplies").waiting(server))


def test_replies_at_once_on_every_connection_and_on_those_opened_later(spark: Any) -> None:
    prompt_replies(spark)
    assert _waiting(spark) == 0
    # A new Python thread opens a connection of its own: set by the JVM as it opens.
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(_waiting(spark)))
    thread.start()
    thread.join()
    assert seen == [0]
    text = java_class(spark.sparkContext._jvm, "org.apache.commons.lang3.StringUtils").repeat(
        "x", 70_000
    )
    assert text == "x" * 70_000


def test_a_stream_callbacks_connection_replies_at_once(spark: Any, tmp_path: Path) -> None:
    """foreachBatch runs on a connection the JVM opened (PySpark replaces py4j's callback
    client as the stream starts): the callback's first call sets it."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"n": 1}\n{"n": 2}\n')
    found: list[tuple[bool, int]] = []

    def handle(batch: Any, batch_id: int) -> None:
        session = batch.sparkSession
        prompt_replies(session)
        server = session.sparkContext._gateway.java_gateway_server
        connection = server.getCallbackClient().getPerThreadConnection()
        found.append((bool(connection.getSocket().getTcpNoDelay()), batch.count()))

    query = (
        spark.readStream.schema("n INT")
        .json(str(source))
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert found == [(True, 2)]
    assert _waiting(spark) == 0
