"""Exactly-once by offsets: the marker each commit carries in its snapshot summary.

Every commit frazil makes carries a *marker* in its snapshot summary: for one pipeline, the
next Kafka offset to read of every partition the pipeline reads (cumulative), the largest Kafka
timestamp committed per partition, the valid-through mark, the batch id and a commit id.

This module holds the marker value, its summary entries, and what is read off markers alone:
several tables' markers merged into one, a table's marker behind what it had, topics created
again since a marker. Finding markers in tables and checking that no other run committed in
between is :mod:`~frazil.progress.table_markers`; the offset filter and the next marker of a
commit are :mod:`~frazil.progress.offset_rules`. At start the table, not the checkpoint, is the
source of truth (:func:`~frazil.progress.start.decide_start`). The batch handler and the
runner apply these rules.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from frazil.source.offsets import TopicOffsets, offsets_from_json, offsets_to_json

PIPELINE = "frazil.pipeline"
QUERY_ID = "frazil.query-id"
BATCH_ID = "frazil.batch-id"
COMMIT_ID = "frazil.commit-id"
OFFSETS = "frazil.offsets"
MAX_TIMESTAMPS = "frazil.max-timestamps"
VALID_THROUGH = "frazil.valid-through"
VALID_THROUGH_MS = "frazil.valid-through-ms"
RESET = "frazil.reset"
#: Snapshot summary key of a ``--reset-offsets`` commit: a JSON list of the marker names it
#: retires (pipelines not in the resetting config: a former name's, a removed pipeline's).
#: A retired marker no longer says what the table holds of its pipeline.
RETIRES = "frazil.retires"
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
            the table (see :func:`~frazil.progress.offset_rules.valid_through`).
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
