"""Markers as tables hold them: a pipeline's newest marker found in a table's history, the
commit that took a batch, and the check that no other run of the pipeline committed in between.

The marker of a table is found by walking the current snapshot's ancestry, newest first
(:func:`find_marker`); rolled-back snapshots are not in it and no clock is trusted. The marker
itself is :class:`~frazil.progress.markers.Marker`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from frazil.errors import CommitError
from frazil.progress.markers import (
    COMMIT_ID,
    OFFSETS,
    PIPELINE,
    RETIRES,
    Marker,
    current_topics,
)
from frazil.progress.offset_rules import covered
from frazil.source.offsets import TopicOffsets


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


#: How far back :func:`find_marker` walks before giving up (snapshots of other writers).
_MAX_WALK = 100_000


@dataclass(frozen=True)
class TableState:
    """What a table says about one pipeline, read in one walk of its ancestry.

    Attributes:
        marker: The pipeline's newest marker, or None.
        snapshot_id: The current snapshot when read (the base of the next commit).
        total_records: Live rows in the table.
        retired: A newer ``--reset-offsets`` of another pipeline retired the pipeline's
            markers (:data:`~frazil.progress.markers.RETIRES`) and took over topics its newest
            marker reads (a rename): ``marker`` is None, whatever the older snapshots say. A
            retirement by a pipeline of other topics (another config writing the same table)
            leaves the marker as it is.
    """

    marker: Marker | None
    snapshot_id: int | None
    total_records: int
    retired: bool = False


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
    retired: bool = False


def find_markers(tables: MarkedTables, pipeline: str) -> list[TableState]:
    """:func:`find_marker` for several tables at once (same rules, same order)."""
    return [
        TableState(
            None if raw.marker_summary is None else Marker.from_summary(raw.marker_summary.get),
            raw.snapshot_id,
            raw.total_records,
            raw.retired,
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
    does not cover it (:func:`~frazil.progress.markers.current_topics`)."""
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
    # Topics that newer resets retiring the pipeline took over (their markers' topics).
    taken: set[str] = set()
    for steps, view in enumerate(table.ancestry()):
        if steps >= _MAX_WALK:
            break
        if retires(view.get(RETIRES), pipeline):
            taken |= _topics(view.get(OFFSETS))
        if view.get(PIPELINE) == pipeline:
            marker = Marker.from_summary(view.get)
            if marker is not None:
                if taken and taken & set(marker.offsets):
                    return TableState(None, snapshot_id, table.total_records(), retired=True)
                break
    return TableState(marker, snapshot_id, table.total_records())


def _topics(offsets: str | None) -> set[str]:
    """The topics of a marker's offsets (JSON), none if there are none or they do not read."""
    if offsets is None:
        return set()
    try:
        found = json.loads(offsets)
    except ValueError:
        return set()
    return {str(t) for t in found} if isinstance(found, dict) else set()


def retires(retired: str | None, pipeline: str) -> bool:
    """Whether a reset's list of retired markers (:data:`~frazil.progress.markers.RETIRES`,
    JSON) names ``pipeline``."""
    if retired is None:
        return False
    try:
        names = json.loads(retired)
    except ValueError:
        return False
    return isinstance(names, list) and pipeline in names


def current_state(state: TableState, ids: dict[str, str]) -> TableState:
    """A table's state with its marker as :func:`~frazil.progress.markers.current_topics`
    leaves it."""
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
