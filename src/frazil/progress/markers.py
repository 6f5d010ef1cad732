"""Exactly-once by offsets: the marker in each snapshot, the offset filter, resuming, resetting.

Every commit frazil makes carries a *marker* in its snapshot summary: for one pipeline, the
next Kafka offset to read of every partition the pipeline reads (cumulative), the largest Kafka
timestamp committed per partition, the valid-through mark, the batch id and a commit id.

* The marker of a table is found by walking the current snapshot's ancestry, newest first
  (:func:`find_marker`); rolled-back snapshots are not in it and no clock is trusted.
* Before a table is written, rows below its marker for their partition are dropped
  (:func:`offset_filter`), so a replayed batch, a re-planned range, an old checkpoint or a
  second run can never add a record twice.
* At start the table, not the checkpoint, is the source of truth (:func:`decide_start`).

This module holds the rules; the batch handler and the runner apply them.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from frazil.errors import CommitError
from frazil.source.kafka import TopicOffsets, offsets_from_json, offsets_to_json

if TYPE_CHECKING:
    from pyspark.sql import Column


class SummaryView(Protocol):
    """One snapshot of a table's history, as the rules read it."""

    @property
    def snapshot_id(self) -> int:
        """The snapshot's id."""

    def get(self, key: str) -> str | None:
        """One entry of the snapshot's summary."""


class MarkedTable(Protocol):
    """What the rules read of a table: its history and size. The sink's
    :class:`~frazil.sink.iceberg.IcebergTable` is one (the rules stay below the stages that
    write tables)."""

    @property
    def name(self) -> str:
        """The table's qualified name."""

    def refresh(self) -> None:
        """Pick up commits made since the last look."""

    def current_snapshot_id(self) -> int | None:
        """The current snapshot's id, or None."""

    def ancestry(self) -> Iterator[SummaryView]:
        """The current snapshot and its ancestors, newest first."""

    def total_records(self) -> int:
        """Live rows in the current snapshot."""


PIPELINE = "frazil.pipeline"
QUERY_ID = "frazil.query-id"
BATCH_ID = "frazil.batch-id"
COMMIT_ID = "frazil.commit-id"
OFFSETS = "frazil.offsets"
MAX_TIMESTAMPS = "frazil.max-timestamps"
VALID_THROUGH = "frazil.valid-through"
VALID_THROUGH_MS = "frazil.valid-through-ms"
RESET = "frazil.reset"
#: The commit id of the pipeline's marker a batch was planned after (:data:`NO_MARKER`: none);
#: the catalog refuses the commit if that is no longer the table's newest marker of the
#: pipeline (``dev.frazil.iceberg.MarkedOperations``).
AFTER = "frazil.after"
NO_MARKER = "-"
#: Which run made the commit (host and process), to name it when two runs meet.
RUN_BY = "frazil.run-by"
TOPIC_IDS = "frazil.topic-ids"

#: Spark's codes for "earliest" and "latest" in ``startingOffsets`` JSON.
EARLIEST = -2
LATEST = -1

#: This process, as markers name it.
RUN = f"{socket.gethostname()} pid {os.getpid()}"

#: How far back :func:`find_marker` walks before giving up (snapshots of other writers).
_MAX_WALK = 100_000


@dataclass(frozen=True)
class Marker:
    """One pipeline's progress as recorded in one snapshot summary.

    Attributes:
        offsets: Next offset to read per topic-partition, for every partition the pipeline
            has read, including those its last batches did not plan (a topic a narrowed
            ``topic_pattern`` leaves out, a deleted one); only ``--reset-offsets`` removes
            them.
        max_timestamps: Largest Kafka timestamp (epoch ms) committed per partition.
        valid_through_ms: Every record whose Kafka timestamp is at or before this mark is in
            the table (see :func:`valid_through`).
        reset: Set on the marker an explicit ``--reset-offsets`` recorded (its argument).
        after: The commit id of the marker this one was planned after (:data:`NO_MARKER`:
            the table had none); None: the commit is not checked (a reset).
        run_by: The run that made the commit (host and process id).
        topic_ids: Kafka's id (a UUID) of each topic whose offsets these are, where known: a
            topic deleted and created again under the same name has another id, and its
            offsets here say nothing of the new topic (:func:`current_topics`).
    """

    pipeline: str
    offsets: TopicOffsets
    max_timestamps: TopicOffsets = field(default_factory=dict)
    valid_through_ms: int | None = None
    batch_id: int = -1
    query_id: str = ""
    commit_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    reset: str | None = None
    after: str | None = None
    run_by: str = field(default_factory=lambda: RUN)
    topic_ids: dict[str, str] = field(default_factory=dict)

    def to_summary(self) -> dict[str, str]:
        """The snapshot-summary entries for this marker."""
        summary = {
            PIPELINE: self.pipeline,
            QUERY_ID: self.query_id,
            BATCH_ID: str(self.batch_id),
            COMMIT_ID: self.commit_id,
            OFFSETS: offsets_to_json(self.offsets),
            MAX_TIMESTAMPS: offsets_to_json(self.max_timestamps),
        }
        if self.valid_through_ms is not None:
            summary[VALID_THROUGH_MS] = str(self.valid_through_ms)
            summary[VALID_THROUGH] = format_ms(self.valid_through_ms)
        if self.reset is not None:
            summary[RESET] = self.reset
        if self.after is not None:
            summary[AFTER] = self.after
        if self.run_by:
            summary[RUN_BY] = self.run_by
        if self.topic_ids:
            summary[TOPIC_IDS] = json.dumps(self.topic_ids, sort_keys=True, separators=(",", ":"))
        return summary

    @classmethod
    def from_summary(cls, get: Callable[[str], str | None]) -> Marker | None:
        """Read a marker back through ``get(key)``; None if the snapshot has none."""
        pipeline = get(PIPELINE)
        if pipeline is None or get(OFFSETS) is None:
            return None
        valid = get(VALID_THROUGH_MS)
        return cls(
            pipeline=pipeline,
            offsets=offsets_from_json(get(OFFSETS) or "{}"),
            max_timestamps=offsets_from_json(get(MAX_TIMESTAMPS) or "{}"),
            valid_through_ms=int(valid) if valid else None,
            batch_id=int(get(BATCH_ID) or -1),
            query_id=get(QUERY_ID) or "",
            commit_id=get(COMMIT_ID) or "",
            reset=get(RESET),
            after=get(AFTER),
            run_by=get(RUN_BY) or "",
            topic_ids=json.loads(get(TOPIC_IDS) or "{}"),
        )


def format_ms(epoch_ms: int) -> str:
    """An epoch-milliseconds instant as ISO-8601 UTC, e.g. ``2026-11-22T01:02:03.456Z``."""
    import datetime as dt

    instant = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.timezone.utc)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


@dataclass(frozen=True)
class TableState:
    """What a table says about one pipeline, read in one walk of its ancestry.

    Attributes:
        marker: The pipeline's newest marker, or None.
        snapshot_id: The current snapshot when read (the base of the next commit).
        total_records: Live rows in the table.
    """

    marker: Marker | None
    snapshot_id: int | None
    total_records: int


class MarkedTables(Protocol):
    """Several tables read at once, as :func:`find_markers` and :func:`check_no_interleavings`
    read them (the sink's :class:`~frazil.sink.iceberg.IcebergTables`: one round trip to the
    JVM for all of them)."""

    def states(self, pipeline: str, max_walk: int) -> list[RawState]:
        """Each table refreshed, and its state: see :class:`RawState`."""

    def interleaved(
        self,
        tables: Sequence[MarkedTable],
        bases: list[int | None],
        pipeline: str,
        commit_ids: list[str],
        max_walk: int,
    ) -> list[int | None]:
        """Each of ``tables`` (some of these) refreshed, and the newest snapshot of its current
        ancestry after ``bases[i]`` (at most ``max_walk``) with a marker of ``pipeline`` under
        another commit id than ``commit_ids[i]``, or None."""


@dataclass(frozen=True)
class RawState:
    """A table's state as read in one look: its current snapshot, live rows, and the summary
    entries of the newest snapshot in its ancestry holding a marker of the pipeline (None:
    none)."""

    snapshot_id: int | None
    total_records: int
    marker_summary: dict[str, str] | None


def find_markers(tables: MarkedTables, pipeline: str) -> list[TableState]:
    """:func:`find_marker` for several tables at once (same rules, same order)."""
    return [
        TableState(
            None if raw.marker_summary is None else Marker.from_summary(raw.marker_summary.get),
            raw.snapshot_id,
            raw.total_records,
        )
        for raw in tables.states(pipeline, _MAX_WALK)
    ]


def check_no_interleavings(
    tables: MarkedTables,
    which: Sequence[MarkedTable],
    states: list[TableState],
    made: list[Marker],
) -> list[CommitError | None]:
    """:func:`check_no_interleaving` for several of ``tables`` at once (``which``, one
    pipeline's): each table's error, or None."""
    if not made:
        return []
    found = tables.interleaved(
        which,
        [s.snapshot_id for s in states],
        made[0].pipeline,
        [m.commit_id for m in made],
        _MAX_WALK,
    )
    return [
        None if snapshot is None else _interleaving(table.name, snapshot, marker)
        for table, snapshot, marker in zip(which, found, made, strict=True)
    ]


def committed_in(
    table: MarkedTable, pipeline: str, planned: TopicOffsets, topic_ids: dict[str, str]
) -> int | None:
    """The snapshot whose commit took a batch planned up to ``planned``: the oldest of the
    pipeline's markers in the table's current ancestry that cover it (walked newest first,
    down to the first that does not); None if none does. Its schema is the one the batch's
    records were checked against when it was committed. Offsets of a topic created again
    since a marker (``topic_ids``: the topics' ids now) are not the batch's: such a marker
    does not cover it (:func:`current_topics`)."""
    found = None
    for steps, view in enumerate(table.ancestry()):
        if steps >= _MAX_WALK:
            break
        if view.get(PIPELINE) != pipeline:
            continue
        marker = current_topics(Marker.from_summary(view.get), topic_ids)
        if marker is None:
            continue
        if not covered(marker, planned):
            break
        found = view.snapshot_id
    return found


def find_marker(table: MarkedTable, pipeline: str) -> TableState:
    """The pipeline's newest marker in the table's current ancestry (newest first)."""
    table.refresh()
    snapshot_id = table.current_snapshot_id()
    marker = None
    for steps, view in enumerate(table.ancestry()):
        if steps >= _MAX_WALK:
            break
        if view.get(PIPELINE) == pipeline:
            marker = Marker.from_summary(view.get)
            if marker is not None:
                break
    return TableState(marker, snapshot_id, table.total_records())


def merge_markers(markers: list[Marker | None], *, lowest: bool) -> Marker | None:
    """One marker standing for several tables' markers of a pipeline.

    ``lowest``: per partition the smallest offset (where every table is complete: a restart
    from the tables starts there, and each table's offset filter drops what it holds);
    otherwise the largest (how far any table got: a checkpoint beyond it is ahead of all of
    them). A partition missing from a marker counts as not read at all.
    """
    present = [m for m in markers if m is not None]
    if not present:
        return None
    partitions = {(t, p) for m in present for t, parts in m.offsets.items() for p in parts}
    offsets: TopicOffsets = {}
    for topic, partition in sorted(partitions):
        values = [m.offsets.get(topic, {}).get(partition) for m in present]
        if lowest:
            if any(v is None for v in values):
                continue  # some table has nothing of it: read it from its start
            value = min(v for v in values if v is not None)
        else:
            value = max(v for v in values if v is not None)
        offsets.setdefault(topic, {})[partition] = value
    valid = [m.valid_through_ms for m in present]
    topic_ids: dict[str, str] = {}
    for m in present:
        topic_ids.update(m.topic_ids)
    return Marker(
        pipeline=present[0].pipeline,
        offsets=offsets,
        topic_ids=topic_ids,
        valid_through_ms=(
            min(v for v in valid if v is not None)
            if lowest and all(v is not None for v in valid)
            else None
        ),
        batch_id=max(m.batch_id for m in present),
    )


def recreated_topics(marker: Marker | None, ids: dict[str, str]) -> list[tuple[str, str, str]]:
    """Topics the marker recorded under another Kafka topic id than ``ids`` (Kafka's now):
    deleted and created again under the same name. Each as ``(topic, old id, new id)``.

    A topic without a recorded id (a marker written before ids were recorded) or without a
    current one (not in Kafka now) is not named: nothing tells it changed.
    """
    if marker is None:
        return []
    return sorted(
        (topic, old, ids[topic])
        for topic, old in marker.topic_ids.items()
        if topic in ids and ids[topic] != old
    )


def current_topics(marker: Marker | None, ids: dict[str, str]) -> Marker | None:
    """The marker as it stands for the topics Kafka has under ``ids``.

    The offsets, largest timestamps and id of a topic deleted and created again since (see
    :func:`recreated_topics`) are left out: they are the old topic's, so the new topic is read
    from its start and the offset filter does not drop its records.
    """
    gone = {topic for topic, _, _ in recreated_topics(marker, ids)}
    if marker is None or not gone:
        return marker
    return replace(
        marker,
        offsets={t: dict(ps) for t, ps in marker.offsets.items() if t not in gone},
        max_timestamps={t: dict(ps) for t, ps in marker.max_timestamps.items() if t not in gone},
        topic_ids={t: i for t, i in marker.topic_ids.items() if t not in gone},
    )


def current_state(state: TableState, ids: dict[str, str]) -> TableState:
    """A table's state with its marker as :func:`current_topics` leaves it."""
    marker = current_topics(state.marker, ids)
    return state if marker is state.marker else replace(state, marker=marker)


def check_no_interleaving(table: MarkedTable, state: TableState, marker: Marker) -> None:
    """After a commit: fail if another run of this pipeline committed between ``state`` (the
    base the batch was planned on) and our commit.

    The offset filter makes a second run harmless once the first has committed; two runs
    writing the same offsets at the same moment are what the run fence prevents. Should both
    ever happen (a fence bypassed by a second state_dir), this names it instead of going on.

    Raises:
        CommitError: Another commit of the same pipeline sits between the base and ours.
    """
    table.refresh()
    # Commits above our own came after it (another run that took over): not interleaving.
    # Only one between ours and the base is; without ours in the ancestry nothing is named.
    past_ours = False
    for steps, view in enumerate(table.ancestry()):
        if view.snapshot_id == state.snapshot_id or steps >= _MAX_WALK:
            return
        if view.get(PIPELINE) != marker.pipeline:
            continue
        if view.get(COMMIT_ID) == marker.commit_id:
            past_ours = True
        elif past_ours:
            raise _interleaving(table.name, view.snapshot_id, marker)


def _interleaving(table: str, snapshot_id: int, marker: Marker) -> CommitError:
    return CommitError(
        f"pipeline {marker.pipeline!r}: table {table} got a commit of the same "
        f"pipeline from another run (snapshot {snapshot_id}) while batch "
        f"{marker.batch_id} was written; two runs of one pipeline must not share a "
        "table at once (give each its own state_dir only if they read other topics)"
    )


def behind(found: Marker | None, seen: Marker | None) -> bool:
    """Whether a table's marker ``found`` lost progress the table had at ``seen`` (an earlier
    look): some partition of ``seen`` is lower or missing in it, or the table has no marker
    any more. A table is only ever behind what it had after a rollback (``rollback_to_snapshot``,
    ``set_current_snapshot``, a cherry-pick of an older snapshot) or an expiry of its markers.
    """
    if seen is None:
        return False
    if found is None:
        return True
    return any(
        found.offsets.get(topic, {}).get(partition, EARLIEST) < offset
        for topic, parts in seen.offsets.items()
        for partition, offset in parts.items()
    )


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
    entries = []
    for topic, parts in sorted(marker.offsets.items()):
        for partition, offset in sorted(parts.items()):
            if planned is not None and partition not in planned.get(topic, {}):
                continue
            entries += [F.lit(f"{topic}\x00{partition}"), F.lit(offset)]
    if not entries:
        return None
    bounds = F.create_map(*entries)
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
            (:func:`current_topics`).
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
