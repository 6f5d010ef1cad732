"""The driver JVM's py4j replies over 8 KiB come without Nagle's wait on the threads frazil
talks to the JVM from (``frazil.engine.py4j_replies``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from frazil.engine.py4j_replies import prompt_replies
from frazil.jvm.classes import java_class

pytestmark = pytest.mark.integration


def _no_delay(spark: Any) -> bool:
    """Whether the calling thread's connection has TCP_NODELAY set (read on the JVM thread
    serving it)."""
    server = spark.sparkContext._gateway.java_gateway_server
    connection = server.getCallbackClient().getPerThreadConnection()
    return bool(connection.getSocket().getTcpNoDelay())


def test_replies_at_once_on_this_thread_and_on_threads_started_later(spark: Any) -> None:
    prompt_replies(spark)
    assert _no_delay(spark)
    seen: list[bool] = []
    # A new Python thread opens a connection of its own: set by the JVM as it opens.
    thread = threading.Thread(target=lambda: seen.append(_no_delay(spark)))
    thread.start()
    thread.join()
    assert seen == [True]
    # A long reply comes whole.
    text = java_class(spark.sparkContext._jvm, "org.apache.commons.lang3.StringUtils").repeat(
        "x", 70_000
    )
    assert text == "x" * 70_000
