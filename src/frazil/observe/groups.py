"""Each pipeline's table offsets, committed to a Kafka consumer group after each commit.

Kafka's own tools (``kafka-consumer-groups.sh --describe``, Burrow, any Kafka UI) then show
frazil's lag like any consumer's. Recovery never reads these offsets — the tables stay the
source of truth — and a failure to commit them only warns. Commits happen on a thread of
their own, newest offsets first, so a slow broker never holds up a micro-batch.

``frazil run`` commits through the Java ``Admin`` client of the driver JVM
(:meth:`frazil.source.admin.JvmKafkaAdmin.commit_group_offsets`), with the settings Spark's
source uses. librdkafka's admin client is not used in a run: with the group's coordinator
killed it could abort the whole process (``rd_kafka_enq_once_del_source_return: Assertion
`eonce->refcnt > 0' failed``, librdkafka 2.16.0) after a commit timed out.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from frazil.errors import first_line
from frazil.source.offsets import TopicOffsets

log = logging.getLogger(__name__)

#: Seconds one commit may take.
TIMEOUT_S = 10.0
#: Seconds between tries of offsets a loading or moving coordinator refused.
RETRY_S = 1.0
#: Seconds a stopping run keeps trying such offsets (within :meth:`GroupCommitter.close`'s
#: wait): a run whose last batch met a loading coordinator still leaves its group current.
CLOSING_RETRY_S = 6.0


#: Commits one group's offsets, or raises Kafka's refusal: ``(group, offsets)``.
Commit = Callable[[str, TopicOffsets], None]


class GroupCommitter(threading.Thread):
    """Commits ``(group, offsets)`` pairs to Kafka with the admin API (KIP-396).

    Args:
        commit: Sets one group's offsets (the JVM's ``Admin`` in a run), raising Kafka's
            refusal.
    """

    def __init__(self, commit: Commit) -> None:
        super().__init__(name="frazil-group-offsets", daemon=True)
        self._commit = commit
        self._queue: queue.Queue[tuple[str, TopicOffsets] | None] = queue.Queue()
        self._warned: set[str] = set()
        self._waiting: set[str] = set()
        self.committed: dict[str, TopicOffsets] = {}

    def submit(self, group: str, offsets: TopicOffsets) -> None:
        """Queue the offsets now in a pipeline's tables for its group."""
        if offsets:
            self._queue.put((group, offsets))

    def close(self, timeout: float = TIMEOUT_S + CLOSING_RETRY_S) -> None:
        """Commit what is queued, then stop."""
        self._queue.put(None)
        self.join(timeout)

    def run(self) -> None:
        try:
            self._serve()
        except Exception as exc:  # never lose the run for a consumer group
            log.warning("consumer-group offsets stopped: %s", first_line(exc))

    def _serve(self) -> None:
        # The newest offsets of each group not yet committed: only they matter, and those a
        # loading coordinator refused are tried again until they go in or newer ones come.
        pending: dict[str, TopicOffsets] = {}
        closing_since: float | None = None
        while True:
            if closing_since is None:
                try:
                    item: tuple[str, TopicOffsets] | None = self._queue.get(
                        timeout=RETRY_S if pending else None
                    )
                except queue.Empty:
                    pass  # time to try the refused offsets again
                else:
                    while True:
                        if item is None:
                            closing_since = time.monotonic()
                            break
                        pending[item[0]] = item[1]
                        try:
                            item = self._queue.get_nowait()
                        except queue.Empty:
                            break
            elif pending:
                time.sleep(RETRY_S)
            self._commit_all(pending)
            if closing_since is not None and (
                not pending or time.monotonic() - closing_since >= CLOSING_RETRY_S
            ):
                return

    def _commit_all(self, pending: dict[str, TopicOffsets]) -> None:
        """Commit each group's offsets; those a loading or moving coordinator refused stay in
        ``pending``."""
        for group, offsets in list(pending.items()):
            try:
                self._commit(group, offsets)
                self.committed[group] = offsets
                self._warned.discard(group)
                self._waiting.discard(group)
                del pending[group]
            except Exception as exc:
                if transient(exc):
                    # The group's coordinator is loading or moving (a broker start, a
                    # rebalance of __consumer_offsets): tried again in a second.
                    if group not in self._waiting:
                        log.info(
                            "consumer group %s: offsets not committed yet (%s); trying again",
                            group,
                            first_line(exc),
                        )
                        self._waiting.add(group)
                    continue
                del pending[group]
                if group not in self._warned:
                    log.warning(
                        "could not commit offsets to consumer group %s (Kafka's tools will "
                        "show stale lag; ingestion is not affected): %s",
                        group,
                        first_line(exc),
                    )
                    self._warned.add(group)


#: Kafka errors of a group coordinator that is loading or moving: they pass on their own.
#: ``_TRANSPORT``: the connection to the coordinator broke (it was killed or restarted; in a
#: cluster another broker takes the group over, as the failover test sees).
TRANSIENT_GROUP_ERRORS = (
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "REBALANCE_IN_PROGRESS",
    "_TRANSPORT",
    # The Java client's names of the same (it retries them itself until its timeout; a
    # TimeoutException is one of them that outlived the request, e.g. during a failover).
    "COORDINATORLOADINPROGRESSEXCEPTION",
    "COORDINATORNOTAVAILABLEEXCEPTION",
    "NOTCOORDINATOREXCEPTION",
    "REBALANCEINPROGRESSEXCEPTION",
    "DISCONNECTEXCEPTION",
    "TIMEOUTEXCEPTION",
)


def transient(exc: BaseException) -> bool:
    """Whether a consumer-group commit failed for a reason that passes on its own (the
    coordinator loading its offsets, moving, a rebalance), not one an operator must fix."""
    from confluent_kafka import KafkaError

    for arg in (exc, *exc.args):
        if isinstance(arg, KafkaError) and arg.code() in {
            getattr(KafkaError, name, None) for name in TRANSIENT_GROUP_ERRORS
        }:
            return True
    text = str(exc).upper().replace(" ", "_")
    return any(name in text for name in TRANSIENT_GROUP_ERRORS) or "LOAD_IN_PROGRESS" in text


def read_group_offsets(admin: Any, group: str) -> TopicOffsets:
    """A group's committed offsets (for ``frazil status`` and tests)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S
    )
    found: TopicOffsets = {}
    for future in futures.values():
        for tp in future.result(timeout=TIMEOUT_S).topic_partitions:
            if tp.offset >= 0:
                found.setdefault(tp.topic, {})[tp.partition] = tp.offset
    return found
