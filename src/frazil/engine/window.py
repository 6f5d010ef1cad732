"""The batch window: the offsets one micro-batch covers, where it starts, the partitions it
leaves behind, and the marker each of its commits carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.engine.checkpoint import Checkpoint
from frazil.errors import PipelineError, TopicRecreated
from frazil.progress import markers, offset_rules, table_markers
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: A Kafka partition: topic and partition number.
Partition = tuple[str, int]


@dataclass(frozen=True)
class BatchWindow:
    """What every table's write of one batch shares.

    Attributes:
        batch: The micro-batch's raw Kafka rows.
        batch_id: Spark's batch id.
        planned: The batch's planned end offsets (next offset to read) of every partition,
            idle ones included.
        start: Where it starts: the previous batch's planned end, if known (None: the offset
            filter must decide).
        lagging: Partitions it did not read to their end offset (a rate limit).
        started: ``time.monotonic()`` when the batch began.
        query_id: The streaming query's id.
        planned_at_ms: When Spark planned the batch (epoch ms): every partition not in
            ``lagging`` was read to its end then (valid-through counts from it).
        topic_ids: Kafka's topic ids of the planned topics, those the query's offsets refer
            to (recorded in each marker; a table's marker under other ids is the old topics').
    """

    batch: DataFrame
    batch_id: int
    planned: TopicOffsets
    start: TopicOffsets | None
    lagging: set[Partition]
    started: float
    query_id: str
    planned_at_ms: int | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: The pipeline's ``valid_through_slack`` (ms).
    slack_ms: int = offset_rules.CAUGHT_UP_SLACK_MS
    #: Where Spark's Kafka source read the batch from when :attr:`start` is not known (a
    #: query's first batch: its initial offsets). Counts records only; the markers and the
    #: offset filter go by :attr:`start`.
    read_from: TopicOffsets | None = None

    @property
    def records(self) -> int | None:
        """Kafka records the batch reads at most (None: its start is not known)."""
        return covered(self.start or self.read_from, self.planned)

    @property
    def ranges(self) -> int:
        """Partitions the batch reads records of (each a Spark task of the Kafka source's,
        at least); every planned partition when the start is not known."""
        start = self.start or self.read_from
        if start is None:
            return len(self.partitions)
        return sum(
            1
            for topic, parts in self.planned.items()
            for p, o in parts.items()
            if o > start.get(topic, {}).get(p, o)
        )

    @property
    def partitions(self) -> tuple[Partition, ...]:
        """The planned partitions, sorted (the order of observed per-partition metrics)."""
        return tuple((t, p) for t, parts in sorted(self.planned.items()) for p in sorted(parts))

    @property
    def basis(self) -> offset_rules.Basis:
        """What this batch's markers are made from."""
        return offset_rules.Basis(
            planned=self.planned,
            batch_id=self.batch_id,
            lagging=self.lagging,
            query_id=self.query_id,
            planned_at_ms=self.planned_at_ms,
            topic_ids=self.topic_ids,
            slack_ms=self.slack_ms,
        )

    def marker(
        self,
        previous: markers.Marker | None,
        pipeline: str,
        stats: dict[Partition, offset_rules.PartitionStats],
    ) -> markers.Marker:
        """The marker of a commit of this batch: its planned offsets over ``previous``, and
        valid-through from ``stats``, what earlier commits observed (a correct lower bound,
        made exact by the next commit or at stop)."""
        return offset_rules.next_marker(previous, pipeline, self.basis, stats)

    def start_marker(self, previous: markers.Marker | None, pipeline: str) -> markers.Marker:
        """A marker saying a table holds everything of the pipeline before this batch."""
        before = offset_rules.Basis(
            planned=self.start or {},
            batch_id=self.batch_id - 1,
            query_id=self.query_id,
            topic_ids=self.topic_ids,
        )
        return offset_rules.next_marker(previous, pipeline, before)

    def starts_at(self, marker: markers.Marker | None) -> bool:
        """Whether the batch holds nothing below ``marker`` (the offset filter is left out)."""
        return offset_rules.starts_at_or_after(self.start, marker, self.planned)

    def current(self, state: table_markers.TableState) -> table_markers.TableState:
        """A table's state as it stands for this batch's topics: the offsets of a topic the
        table recorded under another id (the old topic of a name created again) left out."""
        return table_markers.current_state(state, self.topic_ids)


@dataclass
class BatchCursor:
    """Where the stream is: opens each batch's window from the checkpoint's offset log and
    the previous batch, and remembers the window once the batch is done.

    Attributes:
        checkpoint: The query's checkpoint (its offset log plans each batch).
        admin: Kafka's latest offsets, to find lagging partitions; None without a rate limit
            (Spark then plans every partition up to its latest offset, so none lags).
    """

    checkpoint: Checkpoint
    admin: JvmKafkaAdmin | None = None
    #: Kafka's topic ids, checked before each batch; None: not checked (tests).
    topics: JvmKafkaAdmin | None = None
    #: The topic ids the query's offsets refer to: Kafka's when the query started, and
    #: those of topics it discovered since, as first seen.
    query_ids: dict[str, str] = field(default_factory=dict)
    #: The last batch handled and its planned end offsets: the next batch starts there.
    _previous: tuple[int, TopicOffsets] | None = None
    #: The partitions the last batch written left behind their end offset, and when it was
    #: planned.
    _previous_lagging: set[Partition] = field(default_factory=set)
    _previous_planned_at: int | None = None
    #: The topic ids of the last batch written.
    _previous_ids: dict[str, str] = field(default_factory=dict)
    #: The pipeline's ``valid_through_slack`` (ms), for every window's markers.
    slack_ms: int = offset_rules.CAUGHT_UP_SLACK_MS

    def new_query(self, topic_ids: dict[str, str] | None = None) -> None:
        """Batch ids start again at 0 in a new checkpoint: the old ones say nothing of it.

        Args:
            topic_ids: Kafka's topic ids the query's starting offsets were decided on.
        """
        self._previous = None
        self.query_ids = dict(topic_ids or {})

    def topic_ids(self, pipeline: str, planned: TopicOffsets) -> dict[str, str]:
        """The topic ids of the batch's topics, checked against the query's.

        Spark's Kafka source knows topics by name only: a topic deleted and created again
        under the same name is read on from the old topic's offsets (its first records
        skipped), so a batch whose topic has another id than the query's is not written.

        Raises:
            TopicRecreated: A planned topic has another id now than when the query met it.
        """
        if self.topics is None or not planned:
            return {t: i for t, i in self.query_ids.items() if t in planned}
        now = self.topics.topic_ids(planned)
        changed = sorted(
            (topic, self.query_ids[topic], new)
            for topic, new in now.items()
            if topic in self.query_ids and self.query_ids[topic] != new
        )
        if changed:
            raise TopicRecreated(pipeline, changed)
        for topic, new in now.items():
            self.query_ids.setdefault(topic, new)
        return {t: i for t, i in self.query_ids.items() if t in planned}

    def planned(self, batch_id: int) -> TopicOffsets:
        """The batch's planned range from the offset log (written by Spark before it runs)."""
        return self.checkpoint.planned_offsets(batch_id)

    def open(
        self,
        batch: DataFrame,
        batch_id: int,
        planned: TopicOffsets,
        started: float,
        query_id: str,
        topic_ids: dict[str, str] | None = None,
    ) -> BatchWindow:
        """The window of a batch about to be written."""
        start = self._start(batch_id)
        return BatchWindow(
            batch=batch,
            batch_id=batch_id,
            planned=planned,
            start=start,
            read_from=self.checkpoint.initial_offsets()
            if start is None and batch_id == 0
            else None,
            lagging=self._lagging(planned),
            started=started,
            query_id=query_id,
            planned_at_ms=self.checkpoint.planned_at_ms(batch_id),
            topic_ids=dict(topic_ids or {}),
            slack_ms=self.slack_ms,
        )

    def skipped(self, batch_id: int, planned: TopicOffsets) -> None:
        """A batch wholly in its tables already: the next one starts at its end."""
        self._previous = (batch_id, planned)

    def done(self, window: BatchWindow) -> None:
        """A batch written: the next one starts at its end."""
        self._previous = (window.batch_id, window.planned)
        self._previous_lagging = window.lagging
        self._previous_planned_at = window.planned_at_ms
        self._previous_ids = window.topic_ids

    @property
    def last(self) -> offset_rules.Basis | None:
        """What the last batch handled in this query knew, if any: a routed table without
        records in it still gets its offsets when the run ends."""
        if self._previous is None:
            return None
        return offset_rules.Basis(
            planned=self._previous[1],
            batch_id=self._previous[0],
            lagging=self._previous_lagging,
            planned_at_ms=self._previous_planned_at,
            topic_ids=self._previous_ids,
            slack_ms=self.slack_ms,
        )

    def _start(self, batch_id: int) -> TopicOffsets | None:
        """Where the batch starts: the previous batch's planned end, if known."""
        if self._previous is not None and self._previous[0] == batch_id - 1:
            return self._previous[1]
        if batch_id > 0:
            try:
                return self.checkpoint.planned_offsets(batch_id - 1)
            except PipelineError:  # purged from the offset log: filter to be safe
                return None
        return None

    def _lagging(self, planned: TopicOffsets) -> set[Partition]:
        """Partitions the batch did not read to their end offset.

        Without a rate limit Spark plans every partition up to its latest offset, so none
        lags; with one, Kafka's latest offsets tell.
        """
        if self.admin is None or not planned:
            return set()
        latest = self.admin.offsets({t: sorted(ps) for t, ps in planned.items()}, "latest")
        return {
            (topic, partition)
            for topic, parts in planned.items()
            for partition, end in parts.items()
            if end < latest.get(topic, {}).get(partition, end)
        }


def covered(start: TopicOffsets | None, end: TopicOffsets) -> int | None:
    """Kafka records between two offset maps (None without a start: not known; a partition
    the start does not name counts nothing)."""
    if start is None:
        return None
    return sum(
        max(0, o - start.get(topic, {}).get(p, o))
        for topic, parts in end.items()
        for p, o in parts.items()
    )
