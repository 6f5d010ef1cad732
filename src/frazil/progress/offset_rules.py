"""The offset arithmetic of exactly-once: which rows a table already holds, how far a batch
is in, the valid-through mark, and the marker of the next commit.

Before a table is written, rows below its marker for their partition are dropped
(:func:`offset_filter`), so a replayed batch, a re-planned range, an old checkpoint or a
second run can never add a record twice. A commit's marker is made from a :class:`Basis`, what
a batch's window knows (:func:`next_marker`).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.jvm.literals import long_map
from frazil.progress.markers import EARLIEST, NO_MARKER, Marker, current_topics
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import Column


def offset_filter(marker: Marker | None, planned: TopicOffsets | None = None) -> Column | None:
    """A condition keeping rows at or above the marker's offset for their partition.

    Returns None when there is nothing to filter (no marker). Partitions the marker does not
    know are kept whole. ``planned``: the batch's partitions; the marker's others (which the
    batch holds no row of) are left out of the condition.
    """
    from pyspark.sql import functions as F

    from frazil import columns as c

    if marker is None or not marker.offsets:
        return None
    entries = {}
    for topic, parts in sorted(marker.offsets.items()):
        for partition, offset in sorted(parts.items()):
            if planned is not None and partition not in planned.get(topic, {}):
                continue
            entries[f"{topic}\x00{partition}"] = offset
    if not entries:
        return None
    # One literal, not Spark's map(...): see frazil.jvm.literals.
    bounds = long_map(entries)
    key = F.concat(F.col(c.TOPIC), F.lit("\x00"), F.col(c.PARTITION).cast("string"))
    return F.col(c.OFFSET) >= F.coalesce(F.try_element_at(bounds, key), F.lit(0))


def starts_at_or_after(
    start: TopicOffsets | None, marker: Marker | None, planned: TopicOffsets | None = None
) -> bool:
    """Whether a batch starting at ``start`` holds nothing below the marker (no filter needed).

    Partitions the start does not name (new ones, read from earliest) must be unknown to the
    marker too. ``planned``: the batch's partitions; the marker's others (a topic the batch
    does not read, kept in the marker) hold no row of it and do not count.
    """
    if marker is None or not marker.offsets:
        return True
    if start is None:
        return False
    for topic, parts in marker.offsets.items():
        for partition, offset in parts.items():
            if planned is not None and partition not in planned.get(topic, {}):
                continue
            begin = start.get(topic, {}).get(partition)
            if begin is None or begin < offset:
                return False
    return True


def covered(marker: Marker | None, planned: TopicOffsets) -> bool:
    """Whether every offset of a batch planned up to ``planned`` is already in the table."""
    if marker is None or not planned:
        return False
    return all(
        end <= marker.offsets.get(topic, {}).get(partition, EARLIEST)
        for topic, parts in planned.items()
        for partition, end in parts.items()
    )


#: How far behind the moment it was found read to its end a partition holds the mark back
#: at most, by default (``valid_through_slack``). A record can reach Kafka well after its
#: timestamp was set: a producer retries a send for up to ``delivery.timeout.ms`` (120 s by
#: default), and a transaction's records become readable when it commits, up to
#: ``transaction.timeout.ms`` (60 s by default) later.
CAUGHT_UP_SLACK_MS = 120_000


def valid_through(
    previous: int | None,
    max_timestamps: TopicOffsets,
    planned: TopicOffsets,
    lagging: AbstractSet[tuple[str, int]],
    planned_at_ms: int | None = None,
    slack_ms: int = CAUGHT_UP_SLACK_MS,
) -> int | None:
    """The valid-through mark after a commit.

    Every record whose Kafka timestamp is at or before the mark is in the table. As for
    Iceberg's Kafka Connect sink, the mark is the minimum over the pipeline's partitions of
    how far each is known to be read:

    * a partition not read to its end offset (``lagging``): the largest timestamp committed
      from it (nothing committed yet: the mark stays where it was);
    * a partition read to its end (Kafka's last stable offset) when the batch was planned:
      the same, but never less than ``planned_at_ms - slack_ms``, so that an idle
      partition does not hold the mark back for ever (the sink leaves the mark out whenever
      one partition is idle).

    The mark is never later than ``planned_at_ms`` (a producer whose clock runs ahead cannot
    make it claim the future) and never moves back.

    Args:
        previous: The mark of the previous commit.
        max_timestamps: Largest committed timestamp per partition, this batch included.
        planned: The partitions the batch covered.
        lagging: Partitions whose end offset is below Kafka's latest (stable) offset.
        planned_at_ms: Wall-clock time (epoch ms) at which the batch's range was planned,
            when every partition not in ``lagging`` was read to its end. None: not known
            (a marker recording a start or a reset), and the mark stays where it was.
    """
    if planned_at_ms is None:
        return previous
    floor = planned_at_ms - slack_ms
    reached: list[int] = []
    for topic, parts in planned.items():
        for partition in parts:
            stamp = max_timestamps.get(topic, {}).get(partition)
            if (topic, partition) in lagging:
                if stamp is None:
                    return previous  # nothing of it committed: no telling how far it is
                reached.append(stamp)
            else:
                reached.append(floor if stamp is None else max(stamp, floor))
    if not reached:
        return previous
    candidate = min(min(reached), planned_at_ms)
    return candidate if previous is None else max(previous, candidate)


@dataclass(frozen=True)
class PartitionStats:
    """What a batch holds for one partition, after the offset filter: its largest Kafka
    timestamp (epoch ms), None without one."""

    max_timestamp_ms: int | None


@dataclass(frozen=True)
class Basis:
    """What a batch's window knows when a commit's marker is made from it.

    Attributes:
        planned: The batch's planned end offsets, per topic and partition.
        batch_id: The streaming query's batch id.
        lagging: Partitions the batch did not read to their end offset (a rate limit).
        query_id: The streaming query's id.
        planned_at_ms: When Spark planned the batch (epoch ms): every partition not in
            ``lagging`` was read to its end then.
        topic_ids: Kafka's topic ids of the batch's topics; a topic the previous marker
            recorded under another id was created again, and its old offsets are dropped
            (:func:`~frazil.progress.markers.current_topics`).
        slack_ms: The pipeline's ``valid_through_slack`` (see :func:`valid_through`).
    """

    planned: TopicOffsets
    batch_id: int
    lagging: AbstractSet[tuple[str, int]] = frozenset()
    query_id: str = ""
    planned_at_ms: int | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)
    slack_ms: int = CAUGHT_UP_SLACK_MS


def next_marker(
    previous: Marker | None,
    pipeline: str,
    basis: Basis,
    stats: dict[tuple[str, int], PartitionStats] | None = None,
) -> Marker:
    """The marker of a commit covering a batch planned up to ``basis.planned``.

    Offsets are those of every planned partition (idle ones included), never below the
    previous marker. Partitions the batch did not plan keep the previous marker's offsets
    and largest timestamps (a topic a narrowed pattern leaves out for a while, one missing
    from Kafka's metadata for a moment, a deleted one): read again later, they continue
    where they were. Only ``--reset-offsets`` removes them. ``stats``: what the commits so
    far observed of each partition (the largest timestamps), none for a marker alone.
    """
    planned, lagging, stats = basis.planned, basis.lagging, stats or {}
    ids = basis.topic_ids
    previous = current_topics(previous, ids)
    prev_offsets = previous.offsets if previous else {}
    prev_stamps = previous.max_timestamps if previous else {}
    offsets: TopicOffsets = {t: dict(ps) for t, ps in prev_offsets.items()}
    stamps: TopicOffsets = {t: dict(ps) for t, ps in prev_stamps.items()}
    for topic, parts in planned.items():
        for partition, end in parts.items():
            before = prev_offsets.get(topic, {}).get(partition)
            offsets.setdefault(topic, {})[partition] = end if before is None else max(end, before)
            seen = stats.get((topic, partition))
            candidates = [
                s
                for s in (
                    prev_stamps.get(topic, {}).get(partition),
                    seen.max_timestamp_ms if seen else None,
                )
                if s is not None
            ]
            if candidates:
                stamps.setdefault(topic, {})[partition] = max(candidates)
    return Marker(
        pipeline=pipeline,
        offsets=offsets,
        max_timestamps=stamps,
        valid_through_ms=valid_through(
            previous.valid_through_ms if previous else None,
            stamps,
            planned,
            lagging,
            basis.planned_at_ms,
            basis.slack_ms,
        ),
        batch_id=basis.batch_id,
        query_id=basis.query_id,
        after=previous.commit_id if previous is not None else NO_MARKER,
        topic_ids={**(previous.topic_ids if previous else {}), **ids},
    )
