"""The early first commit: a short first query whose one batch is capped, so a cold JVM
commits within seconds, then handed over to the pipeline's own query."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.engine.checkpoint import Checkpoint
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.offsets import TopicOffsets, records_between

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

# The runner's logger: operators' log filters (and the tests) know these lines by that name.
log = logging.getLogger("frazil.engine.runner")

#: The trigger interval of the short first query of an early first commit: its first batch
#: runs at once, then it idles until the pipeline's own query replaces it.
WARM_UP_TRIGGER = "1 hour"
#: Seconds the short first query may sit without a batch before it is replaced anyway (its
#: first trigger found nothing to read: records removed by retention since the count).
WARM_UP_IDLE_S = 30.0


@dataclass
class WarmUp:
    """Sizes the first batch of a run's first query, and says when that query is done.

    Attributes:
        active: Whether the running query is the short first query.
    """

    pipeline: PipelineConfig
    admin: JvmKafkaAdmin
    checkpoint: Checkpoint
    active: bool = False
    _since: float = field(default=0.0, init=False)

    def started(self, capped: bool) -> None:
        """A query started; ``capped``: it is the short first query."""
        self.active = capped
        self._since = time.monotonic()

    def done(self, query: StreamingQuery) -> bool:
        """Whether the short first query ``query`` has committed its batch (Spark posts a
        query's progress after the batch's commit log entry) or found nothing to read for
        :data:`WARM_UP_IDLE_S`: it is then to be replaced."""
        if query.lastProgress is not None:
            return True
        idle = not query.status["isTriggerActive"]
        return idle and time.monotonic() - self._since >= WARM_UP_IDLE_S

    def first_batch(self, starting: TopicOffsets | None) -> int | None:
        """The first batch's cap of an early first commit, or None for none: off, no smaller
        than ``max_offsets_per_trigger``, or no more to read than the cap."""
        cap = self.pipeline.first_batch_max_offsets
        limit = self.pipeline.max_offsets_per_trigger
        if not cap or (limit is not None and limit <= cap):
            return None
        backlog = self._backlog(starting)
        if backlog is None or backlog <= cap:
            return None
        log.info(
            "%s: %d records to read; the first batch takes %d of them, to commit early",
            self.pipeline.name,
            backlog,
            cap,
        )
        return cap

    def _backlog(self, starting: TopicOffsets | None) -> int | None:
        """Records between where the query starts and Kafka's latest offsets; None when the
        first batch is not the query's to size (one planned and not committed runs again
        with its planned range) or the query starts at the latest offsets."""
        checkpoint = self.checkpoint
        start: TopicOffsets
        if checkpoint.has_progress():
            committed = checkpoint.committed_offsets()
            if committed is None or committed[0] != checkpoint.last_planned():
                return None
            start = committed[1]
        elif starting:
            start = starting
        elif self.pipeline.starting_offsets == "latest":
            return None
        else:
            start = {}
        partitions = self.admin.partitions(self.pipeline)
        earliest = self.admin.offsets(partitions, "earliest")
        return records_between(start, earliest, self.admin.offsets(partitions, "latest"))
