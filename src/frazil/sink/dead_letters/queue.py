"""A pipeline's dead-letter queue during a run: its table, its topic, and what they got.

The batch handler hands over each batch's failing records as a DataFrame of dead-letter rows
(:func:`frazil.sink.dead_letters.format.dead_letter_columns`). They go to the topic first (at least
once), then to the table in one commit carrying the pipeline's marker; rows below the table's
marker are dropped first, so a batch replayed after a crash adds each record once.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import PipelineError, StaleMarker
from frazil.jvm.classes import java_class
from frazil.progress import markers, offset_rules, table_markers
from frazil.reasons import reason_kind
from frazil.sink.dead_letters.format import (
    ERROR_CLASSES,
    dead_letter_columns,
    dlq_schema,
    dlq_settings,
    upgrade_dlq_table,
)
from frazil.sink.dead_letters.topic import DeadLetterTopic, carried_topic_rows
from frazil.sink.iceberg import IcebergTable, append_rows, stale_marker
from frazil.sink.table import ensure_table, qualified
from frazil.source.clients import admin_config
from frazil.source.offsets import TopicOffsets


def marker_name(pipeline: str, source: str = "") -> str:
    """The name of a pipeline's markers in a dead-letter table.

    Not the pipeline's own name: a dead-letter table must never look like one of the
    pipeline's tables (a dynamic route finds its tables by their markers).
    """
    return f"{pipeline}/dlq" + (f"/{source}" if source else "")


if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# The logger name users filter on for the run's dead-letter counts (docs/first-hour.md shows
# it), whichever module holds the queue.
log = logging.getLogger("frazil.engine.deadletters")
#: Dead letters a task of the dead-letter table's write takes (a file each, per day).
ROWS_PER_FILE = 250_000


@dataclass
class DeadLetters:
    """Where one pipeline's failing records go, and how many went, by stage and reason."""

    pipeline: str
    table: IcebergTable | None
    topic: DeadLetterTopic | None
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Commits to the dead-letter table one at a time (concurrent ones would retry).
    _commits: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(
        cls, spark: SparkSession, config: FrazilConfig, pipeline: PipelineConfig
    ) -> DeadLetters | None:
        """The pipeline's dead-letter queue (its table created if missing), or None."""
        errors = pipeline.errors
        if not errors.dead_letters:
            return None
        table = None
        if errors.dlq_table is not None:
            catalog = config.catalog.name
            ensure_table(
                spark, catalog, dlq_settings(errors.dlq_table), dlq_schema(), pipeline.name
            )
            table = IcebergTable(spark, qualified(catalog, errors.dlq_table))
            upgrade_dlq_table(spark, table.java)
        topic = None
        if errors.dlq_topic is not None:
            topic = DeadLetterTopic(admin_config(config)[0], errors.dlq_topic)
        return cls(pipeline.name, table, topic)

    @property
    def total(self) -> int:
        """Records sent to the dead-letter queue in this run."""
        return sum(self.counts.values())

    def write(
        self,
        bad: DataFrame,
        error: Column,
        *,
        basis: offset_rules.Basis,
        seen: list[tuple[str, int, int, str, str]] | None = None,
        source: str = "",
        table: str | Column | None = None,
    ) -> None:
        """Send one batch's failing rows ``bad`` (with frazil's internal columns, ``error``
        set) to the topic, then to the table.

        Args:
            seen: The failing records as the write observed them (topic, partition, offset,
                stage, reason), when known: they are counted from it, and the table is not
                written when it has them all already. None: counted with a Spark job.
            source: Which write of the batch sends them, when a batch sends dead letters
                more than once (a routed batch: its records failing before routing, then
                each table's): each source keeps its own marker in the dead-letter table,
                so one source's commit never hides another's records of the same batch.
            table: The table the records failed for (``target_table``: a replay writes them
                there only); None: they failed before routing; a column: each record's (a
                routed batch's records failing before or at its mode, sent as one source).
        """
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from frazil import columns as c

        rows = bad.select(
            *dead_letter_columns(self.pipeline, error, c.HEADERS in bad.columns, table),
            F.col(c.TOPIC),
            F.col(c.PARTITION),
            F.col(c.OFFSET),
        )
        rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if seen is not None:
                found_rows = rows.count()
                if found_rows != len(seen):
                    # Read again, the batch's records failed otherwise (a transform that is
                    # not deterministic, a compacted topic): send nothing rather than lose.
                    raise PipelineError(
                        f"pipeline {self.pipeline!r}: batch {basis.batch_id} had {len(seen)} "
                        "failing "
                        f"record(s), but reading them again found {found_rows}; nothing was "
                        "sent to the dead-letter queue (the batch is replayed at the next start)"
                    )
            elif rows.isEmpty():
                return
            dlq = rows.drop(c.TOPIC, c.PARTITION, c.OFFSET)
            if self.topic is not None:
                self.topic.send(dlq.toLocalIterator())
            if self.table is not None:
                batch = _Batch(
                    marker_name(self.pipeline, source),
                    basis,
                    table if isinstance(table, str) else None,
                    per_record=table is not None and not isinstance(table, str),
                )
                with self._commits:  # a routed batch's tables send from several threads
                    # What this run's commit added: a replayed batch's records that the
                    # table has already (another run's, or this one's before a restart) are
                    # not this run's dead letters.
                    found = _replanned(lambda first: self._append(rows, batch, seen, first))
            elif seen is None:
                found = _by_reason(dlq)
            else:
                found = dict(Counter((str(s[3]), str(s[4])) for s in seen))
        finally:
            rows.unpersist()
        self._counted(found)

    def write_carried(
        self,
        records: Any,
        rows: Callable[[], list[Any]],
        has_headers: bool,
        *,
        basis: offset_rules.Basis,
        seen: list[tuple[str, int, int, str, str]],
        source: str = "",
        table: str | None = None,
    ) -> None:
        """Send failing records carried out of the write's own pass (no Spark job): to the
        topic from ``rows``, then to the table from ``records`` in one commit with the
        marker, its data files written in the driver (:class:`dev.frazil.spark.DeadLetterFiles`).

        Args:
            records: The observed records, a JVM ``List<Row>``
                (:func:`frazil.engine.dead_capture.observed`), every one carried.
            rows: The same records in Python (asked for only when the topic needs them).
            seen: Their positions, stages and reasons.
        """
        if self.topic is not None:
            self.topic.send(carried_topic_rows(rows(), self.pipeline, has_headers, table))
        found = dict(Counter((str(s[3]), str(s[4])) for s in seen))
        if self.table is not None:
            batch = _Batch(marker_name(self.pipeline, source), basis, table)
            with self._commits:
                found = _replanned(
                    lambda first: self._append_carried(records, has_headers, batch, seen, first)
                )
        self._counted(found)

    def _append_carried(
        self,
        records: Any,
        has_headers: bool,
        batch: _Batch,
        seen: list[Position],
        first: TopicOffsets | None,
    ) -> dict[tuple[str, str], int]:
        """Commit the records of ``seen`` the table does not hold yet; their count by stage
        and reason. ``first``: see :meth:`_contested`."""
        assert self.table is not None
        state, marker = self._next_marker(batch)
        covered = state.marker.offsets if state.marker is not None else {}
        present = self._contested(batch, covered, first, seen)
        fresh = [
            s for s in _uncovered(covered if first is None else first, seen) if s[:3] not in present
        ]
        if not fresh:
            return {}
        jvm = self.table.spark.sparkContext._jvm
        assert jvm is not None
        below = first if first is not None else covered
        try:
            java_class(jvm, "dev.frazil.spark.DeadLetterFiles").append(
                self.table.java,
                records,
                has_headers,
                self.pipeline,
                batch.table,
                dict(ERROR_CLASSES),
                {f"{t}\u0000{p}": o for t, parts in below.items() for p, o in parts.items()},
                [f"{t}\u0000{p}\u0000{o}" for t, p, o in present],
                marker.to_summary(),
            )
        except Exception as exc:
            stale = stale_marker(exc)
            if stale is None:
                raise
            stale.planned_on = below
            raise stale from None
        return dict(Counter((str(s[3]), str(s[4])) for s in fresh))

    def _counted(self, found: dict[tuple[str, str], int]) -> None:
        # By the reason's kind: a reason quoting each bad value would make a count and a log
        # line per value (the table keeps each record's full reason).
        kinds: Counter[tuple[str, str]] = Counter()
        first: dict[tuple[str, str], str] = {}
        for (stage, reason), n in found.items():
            key = (stage, reason_kind(reason))
            kinds[key] += n
            first.setdefault(key, reason)
        with self._lock:
            self.counts.update(kinds)
        for (stage, kind), n in sorted(kinds.items()):
            value = first[(stage, kind)][len(kind) :]
            log.warning(
                "%s: %d record(s) to the dead-letter queue: %s: %s%s",
                self.pipeline,
                n,
                stage,
                kind,
                f" (the first{value})" if value else "",
            )

    def _append(
        self,
        rows: DataFrame,
        batch: _Batch,
        seen: list[Position] | None,
        first: TopicOffsets | None,
    ) -> dict[tuple[str, str], int]:
        """Commit the rows the table does not hold yet; their count by stage and reason (from
        ``seen`` when given, else counted). ``first``: see :meth:`_contested`."""
        from frazil import columns as c

        assert self.table is not None
        state, marker = self._next_marker(batch)
        covered = state.marker.offsets if state.marker is not None else {}
        at: list[Position] | None = None
        if seen is None and first is not None:
            at = [tuple(r) for r in rows.select(c.TOPIC, c.PARTITION, c.OFFSET).collect()]
        present = self._contested(batch, covered, first, seen if seen is not None else at or [])
        if seen is not None:
            seen = [
                s
                for s in _uncovered(covered if first is None else first, seen)
                if s[:3] not in present
            ]
            if not seen:
                return {}  # a replayed batch whose dead letters the table has
        below = markers.Marker(pipeline=batch.name, offsets=first) if first is not None else None
        keep = offset_rules.offset_filter(below if first is not None else state.marker)
        kept = rows if keep is None else rows.where(keep)
        if present:
            held = self.table.spark.createDataFrame(
                sorted(present), f"`{c.TOPIC}` string, `{c.PARTITION}` int, `{c.OFFSET}` bigint"
            )
            kept = kept.join(held, [c.TOPIC, c.PARTITION, c.OFFSET], "left_anti")
        fresh = kept.drop(c.TOPIC, c.PARTITION, c.OFFSET)
        found = _by_reason(fresh) if seen is None else dict(Counter((s[3], s[4]) for s in seen))
        # The batch's tasks are its Kafka partitions: a few dead letters from each would be a
        # file each, a table of small files. Few tasks, as many as the rows need.
        fresh = fresh.coalesce(max(1, -(-sum(found.values()) // ROWS_PER_FILE)))
        try:
            append_rows(fresh, self.table.name, marker.to_summary())
        except StaleMarker as stale:
            stale.planned_on = first if first is not None else covered
            raise
        return found

    def _contested(
        self,
        batch: _Batch,
        covered: TopicOffsets,
        first: TopicOffsets | None,
        candidates: list[Position],
    ) -> set[tuple[str, int, int]]:
        """Of ``candidates``, those the dead-letter table holds, among the records between
        the marker the commit was first planned on (``first``) and the marker now
        (``covered``): another run's dead-letter commit came in between, and its marker
        claims them, but it may not hold them (that run sent a later batch first). Only what
        it holds is left out; the rest is this commit's to add. None at a first attempt."""
        if first is None or not candidates or self.table is None:
            return set()
        contested = [
            s for s in candidates
            if s[2] >= first.get(s[0], {}).get(s[1], 0)
            and s[2] < covered.get(s[0], {}).get(s[1], 0)
        ]  # fmt: skip
        if not contested:
            return set()
        from pyspark.sql import functions as F

        from frazil import columns as c

        spark = self.table.spark
        wanted = spark.createDataFrame(
            [(str(t), int(p), int(o)) for t, p, o, *_ in contested],
            "topic string, partition int, offset bigint",
        )
        # A source's records: those of its table, or of a routed batch's records failing
        # before or at its mode, which name a table only for the mode's.
        of_source = F.col("target_table").eqNullSafe(F.lit(batch.table).cast("string"))
        if batch.per_record:
            of_source = of_source | (F.col("stage") == F.lit(c.STAGE_MODE))
        held = spark.table(self.table.name).where((F.col("pipeline") == self.pipeline) & of_source)
        found = held.join(wanted, ["topic", "partition", "offset"], "left_semi")
        present = {(str(r[0]), int(r[1]), int(r[2])) for r in found.select(
            "topic", "partition", "offset").collect()}  # fmt: skip
        log.warning(
            "%s: another run's dead letters of %s came in between; of %d record(s) its marker "
            "claims, %d are in the dead-letter table, the rest are written now",
            self.pipeline,
            batch.name,
            len(contested),
            len(present),
        )
        return present

    def _next_marker(self, batch: _Batch) -> tuple[table_markers.TableState, markers.Marker]:
        """The dead-letter table's marker of ``batch.name`` now (without the offsets of topics
        created again since, see :func:`~frazil.progress.markers.current_topics`), and the one
        this batch commits."""
        assert self.table is not None
        self.table.refresh()
        state = table_markers.find_marker(self.table, batch.name)
        state = replace(state, marker=markers.current_topics(state.marker, batch.basis.topic_ids))
        dead = replace(batch.basis, planned_at_ms=None, slack_ms=offset_rules.CAUGHT_UP_SLACK_MS)
        return state, offset_rules.next_marker(state.marker, batch.name, dead)


#: A failing record's position, stage and reason.
Position = tuple[str, int, int, str, str]


@dataclass(frozen=True)
class _Batch:
    """One dead-letter commit's batch: the marker name (per source), what the window knows
    (its markers' basis), and the table the records failed for."""

    name: str
    basis: offset_rules.Basis
    table: str | None
    #: The records name their table each (a routed batch's failing before or at its mode).
    per_record: bool = False


_T = TypeVar("_T")

#: Attempts of one dead-letter commit that another run's dead letters keep overtaking.
DEAD_LETTER_ATTEMPTS = 5


def _replanned(commit: Callable[[TopicOffsets | None], _T]) -> _T:
    """Run a dead-letter commit, planned again (marker read, offset filter) as long as another
    run's dead letters of the same source come in between (bounded); what the commit that
    went in returns. ``commit`` gets the offsets the first attempt was planned on (None at
    the first attempt), so that a later one can tell what the other run's marker claims."""
    first: TopicOffsets | None = None
    for attempt in range(1, DEAD_LETTER_ATTEMPTS + 1):
        try:
            return commit(first)
        except StaleMarker as stale:
            if first is None:
                first = stale.planned_on

            if attempt == DEAD_LETTER_ATTEMPTS:
                raise
            log.warning("dead-letter table: %s; planning the commit again", stale)

    raise AssertionError("unreachable")


def _uncovered(
    covered: TopicOffsets, seen: list[tuple[str, int, int, str, str]]
) -> list[tuple[str, int, int, str, str]]:
    """The records of ``seen`` at or above the offsets ``covered`` (not written yet), as
    :func:`frazil.progress.offset_rules.offset_filter` keeps them."""
    return [s for s in seen if s[2] >= covered.get(s[0], {}).get(s[1], 0)]


def _by_reason(rows: DataFrame) -> dict[tuple[str, str], int]:
    """Dead-letter rows counted by stage and reason (one Spark job)."""
    from pyspark.sql import functions as F

    counted = rows.groupBy("stage", "reason").agg(F.count(F.lit(1)).alias("n"))
    return {(str(r[0]), str(r[1])): int(r[2]) for r in counted.collect()}
