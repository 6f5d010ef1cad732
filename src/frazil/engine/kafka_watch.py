"""Kafka not answering under a running pipeline: said while it lasts, and in frazil's words
when Spark's Kafka source gives up.

Spark's Kafka source plans each micro-batch by asking Kafka for the latest offsets; with the
brokers gone it waits inside that call (the admin client's timeouts, then its own retries:
about four minutes) without a word, and then fails the query with the client's exception
(``TimeoutException: Timed out waiting for a node assignment. Call: listNodes``). A short
outage heals by itself. :class:`KafkaWatch` says when the wait has lasted long enough to be
one, and when it ends; :func:`outage_error` turns the final failure into what it means.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from frazil.errors import PipelineError
from frazil.source.clients import unreachable

log = logging.getLogger(__name__)

#: How long planning a batch may wait for Kafka's offsets before it is said (a planned batch
#: takes milliseconds; a broker restarting takes seconds).
STALLED_S = 30.0

#: Spark's status message while the source asks Kafka for offsets (MicroBatchExecution's).
_GETTING_OFFSETS = "Getting offsets from"

#: Kafka client exceptions that say a broker did not answer in time.
_NOT_ANSWERING = (
    "org.apache.kafka.common.errors.TimeoutException",
    "org.apache.kafka.common.errors.DisconnectException",
)


class KafkaWatch:
    """Watches one pipeline's query for a batch that waits on Kafka's offsets.

    Args:
        pipeline: The pipeline's name.
        bootstrap: ``kafka.bootstrap_servers``.
        clock: Seconds, monotonic.
    """

    def __init__(
        self, pipeline: str, bootstrap: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.pipeline = pipeline
        self.bootstrap = bootstrap
        self._clock = clock
        self._since: float | None = None
        self.warned = False

    def look(self, status: Mapping[str, Any] | None) -> None:
        """Take the query's status (``StreamingQuery.status``; None: not known): warn once
        a batch has waited :data:`STALLED_S` for Kafka's offsets, and say when it goes on."""
        now = self._clock()
        message = str((status or {}).get("message", ""))
        waiting = bool((status or {}).get("isTriggerActive")) and message.startswith(
            _GETTING_OFFSETS
        )
        if not waiting:
            if self.warned and self._since is not None:
                log.warning(
                    "%s: Kafka answers again after %.0f s: the run goes on",
                    self.pipeline,
                    now - self._since,
                )
            self._since = None
            self.warned = False
            return
        if self._since is None:
            self._since = now
            return
        if not self.warned and now - self._since >= STALLED_S:
            why = unreachable(self.bootstrap)
            log.warning(
                "%s: Kafka has not answered for %.0f s at %s (kafka.bootstrap_servers)%s: the "
                "next batch waits for its offsets, and Spark's Kafka source stops the pipeline "
                "if Kafka stays away (a few minutes). Nothing is lost: the tables hold every "
                "record committed, and a run goes on from them",
                self.pipeline,
                now - self._since,
                self.bootstrap,
                f": {why}" if why else "",
            )
            self.warned = True


def outage_error(pipeline: str, bootstrap: str, text: str) -> PipelineError | None:
    """The failure of a query whose Kafka source gave up on the brokers (``text``: the
    query's exception), in frazil's words; None for any other failure."""
    if not any(name in text for name in _NOT_ANSWERING):
        return None
    lines = text.strip().splitlines()
    first = lines[0] if lines else text
    why = unreachable(bootstrap)
    return PipelineError(
        f"pipeline {pipeline!r} stopped: Kafka did not answer at {bootstrap} "
        f"(kafka.bootstrap_servers)" + (f": {why}" if why else " in time")
        + f" ({first}). Nothing of the batch it was planning was written; the tables hold "
        "every record committed before it. Run again once Kafka answers: the pipeline goes on "
        "from the tables' offsets, nothing lost and nothing twice"
    )  # fmt: skip
