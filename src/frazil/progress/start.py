"""Where a pipeline's run starts: the table against the checkpoint, resuming at the table's
offsets, and explicit resets (``--reset-offsets``).

The table, not the checkpoint, is the source of truth (docs/exactly-once.md): a checkpoint
ahead of the table's marker is set aside, a table holding another writer's rows is refused,
and a reset is recorded as a marker of its own. The markers these rules read and write are
:mod:`frazil.progress.markers`'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from frazil.errors import ConfigError, PipelineError
from frazil.progress.markers import EARLIEST, LATEST, Marker
from frazil.progress.table_markers import TableState
from frazil.source.offsets import TopicOffsets


def ahead_of(checkpoint: TopicOffsets, marker: Marker | None) -> list[str]:
    """Partitions where a checkpoint claims more than the table holds ("topic/partition")."""
    known = marker.offsets if marker else {}
    return [
        f"{topic}/{partition}"
        for topic, parts in sorted(checkpoint.items())
        for partition, offset in sorted(parts.items())
        if offset > max(known.get(topic, {}).get(partition, 0), 0)
    ]


@dataclass(frozen=True)
class Start:
    """Where a pipeline's query starts, decided from the table and the checkpoint.

    Attributes:
        from_table: Start a fresh checkpoint at the table's offsets (:attr:`offsets_source`).
        set_aside: Move the existing checkpoint out of the way first.
        use_starting_offsets: Start a fresh checkpoint at the pipeline's ``starting_offsets``.
        reason: One line for the log and the run report.
    """

    from_table: bool = False
    set_aside: bool = False
    use_starting_offsets: bool = False
    reason: str = ""


def decide_start(
    pipeline: str,
    table: str,
    state: TableState,
    checkpoint_committed: TopicOffsets | None,
    checkpoint_has_progress: bool,
    recreated: list[str] | None = None,
) -> Start:
    """Reconcile the checkpoint with the table; the table's offsets win.

    Args:
        state: The table's state, its marker without the offsets of topics created again
            (:func:`~frazil.progress.markers.current_topics`).
        recreated: Topics deleted and created again since the marker was recorded (another
            Kafka topic id): a checkpoint holds the old topic's offsets, which say nothing of
            the new one (Spark would skip its first records, or fail when it has fewer), so
            it is set aside and the run starts from the table, reading them from their start.

    Raises:
        PipelineError: The table holds rows but no marker of this pipeline: starting from
            ``starting_offsets`` could duplicate or skip records, so the user must choose.
    """
    marker = state.marker
    if marker is None:
        if state.retired:
            raise retired_error(pipeline, table)
        if state.total_records > 0:
            raise PipelineError(
                f"pipeline {pipeline!r}: table {table} holds {state.total_records:,} rows but "
                f"no progress marker of this pipeline in its snapshot history (the snapshot "
                "that had it was expired or rolled back, the pipeline was renamed, or another "
                "writer filled the table). Starting over could duplicate or skip records, so "
                "frazil will not guess: run once with --reset-offsets earliest, latest or "
                'a JSON map like \'{"topic": {"0": 42}}\' to say where to continue '
                "(docs/exactly-once.md)"
            )
        if checkpoint_committed and ahead_of(checkpoint_committed, None):
            return Start(
                set_aside=True,
                use_starting_offsets=True,
                reason="the checkpoint is ahead of the table, which holds nothing of this "
                "pipeline: started over from starting_offsets",
            )
        return Start(reason="new pipeline" if not checkpoint_has_progress else "")
    if recreated:
        again = (
            f"topic(s) {', '.join(recreated)} were deleted and created again: read from their start"
        )
        if checkpoint_has_progress:
            return Start(
                from_table=True,
                set_aside=True,
                reason=f"{again}; the checkpoint held the old topic's offsets: started from "
                "the table's offsets",
            )
        return Start(from_table=True, reason=f"{again}; started from the table's offsets")
    if not checkpoint_has_progress:
        return Start(
            from_table=True,
            reason="checkpoint had no progress: started from the table's offsets",
        )
    if checkpoint_committed:
        ahead = ahead_of(checkpoint_committed, marker)
        if ahead:
            return Start(
                from_table=True,
                set_aside=True,
                reason=f"the checkpoint was ahead of the tables ({', '.join(ahead[:4])}"
                f"{' …' if len(ahead) > 4 else ''}: a stop mid-batch, or a table rolled back): "
                "started from the table's offsets, which reads those records again, once",
            )
    return Start()


def resume_offsets(marker: Marker | None, current: dict[str, list[int]]) -> TopicOffsets:
    """Starting offsets for the partitions Kafka has now: the marker's, else earliest.

    Topics in the marker that no longer exist are left out (Spark refuses offsets for
    partitions it is not assigned); partitions created meanwhile start from earliest, as
    Spark starts partitions it discovers on its own.
    """
    known = marker.offsets if marker else {}
    return {
        topic: {p: known.get(topic, {}).get(p, EARLIEST) for p in partitions}
        for topic, partitions in current.items()
    }


def parse_reset(text: str) -> str | TopicOffsets:
    """Parse ``--reset-offsets``: ``earliest``, ``latest`` or ``{"topic": {"0": 42}}``.

    In the JSON form -2 means earliest and -1 latest, as in Spark's ``startingOffsets``.

    Raises:
        ConfigError: Anything else.
    """
    if text in ("earliest", "latest"):
        return text
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or not raw:
            raise ValueError("not a JSON object")
        result: TopicOffsets = {}
        for topic, parts in raw.items():
            if not isinstance(parts, dict):
                raise ValueError(f"topic {topic!r} must map partitions to offsets")
            result[str(topic)] = {int(p): int(o) for p, o in parts.items()}
            if any(o < EARLIEST for o in result[str(topic)].values()):
                raise ValueError("offsets must be >= -2 (-2 earliest, -1 latest)")
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"--reset-offsets {text!r}: expected earliest, latest or a JSON map like "
            f'\'{{"topic": {{"0": 42}}}}\' ({exc})'
        ) from None
    return result


def resolve_reset(
    spec: str | TopicOffsets,
    current: dict[str, list[int]],
    earliest: TopicOffsets,
    latest: TopicOffsets,
) -> TopicOffsets:
    """Concrete offsets for a reset, for every partition Kafka has now.

    Partitions a JSON reset does not list start from earliest.
    """
    result: TopicOffsets = {}
    for topic, partitions in current.items():
        for partition in partitions:
            first = earliest.get(topic, {}).get(partition, 0)
            last = latest.get(topic, {}).get(partition, first)
            if spec == "earliest":
                offset = first
            elif spec == "latest":
                offset = last
            else:
                assert isinstance(spec, dict)
                wanted = spec.get(topic, {}).get(partition, EARLIEST)
                offset = first if wanted == EARLIEST else last if wanted == LATEST else wanted
            result.setdefault(topic, {})[partition] = offset
    return result


def reset_marker(
    pipeline: str, spec_text: str, offsets: TopicOffsets, topic_ids: dict[str, str] | None = None
) -> Marker:
    """The marker that records a reset durably (a commit without rows carries it).

    It names only the partitions Kafka has now: the offsets of any other (topics deleted,
    or left out by a narrowed ``topic_pattern``) leave the marker here, and only here.
    """
    ids = {t: i for t, i in (topic_ids or {}).items() if t in offsets}
    return replace(Marker(pipeline=pipeline, offsets=offsets, topic_ids=ids), reset=spec_text)


#: Partitions a reset preview names one by one; beyond them it says how many more.
_SHOWN_PARTITIONS = 6


@dataclass(frozen=True)
class TableReset:
    """What ``--reset-offsets`` does to one table, before it does it.

    Attributes:
        table: The table's name, as the report names it.
        pipeline: The pipeline whose marker the reset replaces.
        spec: The reset as written (``earliest``, ``latest`` or JSON).
        rows: Live rows in the table now.
        marker: The pipeline's newest marker in the table (where it continues), or None.
        target: Where the reset makes it continue, per partition Kafka has now.
        merges: The table is written by key (upsert, CDC): records read again are merged
            again rather than appended twice.
    """

    table: str
    pipeline: str
    spec: str
    rows: int
    marker: Marker | None
    target: TopicOffsets
    merges: bool = False

    @property
    def destructive(self) -> bool:
        """Whether the table holds data the pipeline wrote (rows and a marker): a reset then
        reads records again or skips records, so it is confirmed first."""
        return self.marker is not None and self.rows > 0

    def partitions(self) -> list[tuple[str, int, int | None, int]]:
        """``(topic, partition, the marker's offset or None, the reset's)`` per partition."""
        known = self.marker.offsets if self.marker is not None else {}
        return [
            (topic, partition, known.get(topic, {}).get(partition), offset)
            for topic, parts in sorted(self.target.items())
            for partition, offset in sorted(parts.items())
        ]

    def again(self) -> int:
        """Records the table holds that the reset reads again (before the marker's offsets)."""
        return sum(max(0, was - now) for was, now in self._known())

    def skipped(self) -> int:
        """Records after the marker's offsets that the reset skips (never written)."""
        return sum(max(0, now - was) for was, now in self._known())

    def _known(self) -> list[tuple[int, int]]:
        # A partition the marker does not name, or names as "earliest", has no count to give.
        return [(was, now) for _, _, was, now in self.partitions() if was is not None and was >= 0]

    def lines(self) -> list[str]:
        """What is in the table and what the reset will do, for a person to confirm."""
        return self._lines(f"{self.table}: {self.rows:,} rows", "records")

    def _shared_key(self) -> tuple[object, ...]:
        # Tables of one routed pipeline hold one marker (the batch's offsets) and get one
        # reset: the records read again or skipped are the pipeline's, not each table's.
        known = self.marker.offsets if self.marker is not None else None
        return (self.pipeline, self.spec, repr(known), repr(self.target), self.merges)

    def _lines(self, held: str, records: str) -> list[str]:
        parts = self.partitions()
        shown = parts[:_SHOWN_PARTITIONS]
        more = f", … and {len(parts) - len(shown)} more" if len(parts) > len(shown) else ""

        where = ", ".join(f"{t}/{p} {_offset(was)}" for t, p, was, _ in shown) + more
        to = ", ".join(f"{t}/{p} {_offset(now)}" for t, p, _, now in shown) + more

        again, skipped = self.again(), self.skipped()
        if again:
            twice = "merged again by key" if self.merges else "appended again: duplicate rows"
            effect = f"{again:,} {records} read again ({twice})"
        else:
            effect = "no record read again"
        if skipped:
            effect += f", {skipped:,} {records} skipped (never written)"
        return [
            f"{held}; pipeline {self.pipeline} continues at {where}",
            f"  reset to {self.spec}: {to}; {effect}",
        ]


def table_names(names: list[str]) -> str:
    """Table names for a sentence: the first few, then how many more (a route's can be
    thousands)."""
    listed = ", ".join(names[:_SHOWN_PARTITIONS])
    if len(names) > _SHOWN_PARTITIONS:
        listed += f", … and {len(names) - _SHOWN_PARTITIONS:,} more"
    return listed


def reset_lines(resets: list[TableReset]) -> list[str]:
    """What ``--reset-offsets`` does to these tables, for a person to confirm.

    Tables one pipeline routes to, at the same marker, are one entry: the records the reset
    reads again or skips are the pipeline's, each going to the one table it routes to, so
    they are counted once and not on every table's line.
    """
    groups: dict[tuple[object, ...], list[TableReset]] = {}
    for found in resets:
        groups.setdefault(found._shared_key(), []).append(found)
    lines: list[str] = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            lines += first.lines()
            continue
        listed = table_names([m.table for m in members])
        rows = sum(m.rows for m in members)
        held = f"{len(members)} tables ({listed}): {rows:,} rows"
        lines += first._lines(held, "of the pipeline's records")
    return lines


def _offset(offset: int | None) -> str:
    if offset is None:
        return "-"
    if offset == EARLIEST:
        return "earliest"
    if offset == LATEST:
        return "latest"
    return f"{offset:,}"


def retired_error(pipeline: str, table: str) -> PipelineError:
    """The refusal to run a pipeline from markers a later reset retired in ``table``
    (:attr:`~frazil.progress.table_markers.TableState.retired`)."""
    return PipelineError(
        f"pipeline {pipeline!r}: table {table} retired this pipeline's progress markers: a "
        "later --reset-offsets of another pipeline (this one renamed?) took the table over, "
        "and what they say is no longer what the table holds of this pipeline. Running on "
        "from them would write records a second time, so frazil will not: run the pipeline "
        "that took it over, or run this one once with --reset-offsets to say where it "
        "continues (docs/exactly-once.md)"
    )
