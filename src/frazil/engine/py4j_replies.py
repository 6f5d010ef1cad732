"""The driver JVM's py4j replies sent without Nagle's wait (``dev.frazil.py4j.PromptReplies``).

py4j writes a reply through an 8 KiB buffer; with Nagle's algorithm on, a longer reply's
second write waits for Python's delayed acknowledgement: 44 ms for every reply over 8 KiB on
Linux, ~0.5 ms without the wait. Each Python thread talks to the JVM on a connection of its
own; a connection Python opens after the first call here is set by the JVM as it opens, the
calling thread's by the call, and a callback's (``foreachBatch``: the JVM opened it) by the
callback's first call.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from frazil.jvm.classes import java_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Per Python thread, the gateway whose connection is set.
_done = threading.local()


def prompt_replies(spark: SparkSession) -> None:
    """Have the JVM send its replies on the calling thread's connection at once (and on every
    connection Python opens from now on); once per thread and gateway."""
    gateway: Any = spark.sparkContext._gateway
    if getattr(_done, "gateway", None) is gateway:
        return
    _done.gateway = gateway
    server = getattr(gateway, "java_gateway_server", None)
    if server is None:
        return
    try:
        java_class(spark.sparkContext._jvm, "dev.frazil.py4j.PromptReplies").here(server)
    except Exception as exc:  # frazil's jar not on the driver's classpath: replies as py4j's
        log.debug("py4j replies left as they are: %s", exc)
