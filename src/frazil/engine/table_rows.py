"""The rows a table's write takes, and what it observes of them as they stream by: one of
four selections (see :class:`~frazil.engine.table_write.TableWriter`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.engine import dead_capture
from frazil.engine.bad_records import failure, learnable, own_error
from frazil.engine.cached_table import CachedTable, of_table
from frazil.engine.window import BatchWindow, Partition
from frazil.jvm.classes import java_class
from frazil.sink.conform import WriteColumns
from frazil.sink.tables import Target

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation


@dataclass
class ObservedMetrics:
    """What a batch's write observes as its rows stream by: records and the largest Kafka
    timestamp per partition (column expressions built once per partition set: each costs
    py4j round trips)."""

    _cache: dict[tuple[object, ...], list[Column]] = field(default_factory=dict)
    _flags: tuple[Column, Column, tuple[Column, Column, Column]] | None = None
    _tap_partitions: tuple[tuple[Partition, ...], str] | None = None

    def tap(
        self, jvm: Any, wanted: Column, dropped: Column, partitions: tuple[Partition, ...]
    ) -> tuple[Column, TapCounts]:
        """A new tap (``dev.frazil.spark.RowTap``) of a batch's rows: the column that is
        true for a row to write, and the counts it takes of them as they stream by."""
        from pyspark.sql.classic.column import Column as ClassicColumn

        spec = self._tap_partitions
        if spec is None or spec[0] != partitions:
            joined = "\0\0".join(f"{topic}\0{number}" for topic, number in partitions)
            spec = self._tap_partitions = (partitions, joined)
        java = java_class(jvm, "dev.frazil.spark.RowTap").create(
            wanted._jc, dropped._jc, c.TOPIC, c.PARTITION, c.TIMESTAMP_MS, spec[1]
        )
        return ClassicColumn(java.column()), TapCounts(java)

    def flags(self, wanted: Column, dropped: Column) -> tuple[Column, Column, Column]:
        """``wanted`` and ``dropped`` as the flag columns, and the test of the first: built
        again only when they are other expressions than the last batch's (an offset filter)."""
        from pyspark.sql import functions as F

        last = self._flags
        if last is None or last[0] is not wanted or last[1] is not dropped:
            last = self._flags = (
                wanted,
                dropped,
                (wanted.alias(c.WANTED), dropped.alias(c.DROPPED), F.col(c.WANTED)),
            )
        return last[2]

    def columns(self, partitions: tuple[Partition, ...], *, flagged: bool = False) -> list[Column]:
        """``records`` and ``ts_<i>`` (the largest timestamp of ``partitions[i]``).

        ``flagged``: observed before the write's filter, on rows flagged
        :data:`~frazil.columns.WANTED` (written) and :data:`~frazil.columns.DROPPED` (skipped
        as configured, counted as ``dropped``).
        """
        from pyspark.sql import functions as F

        key = ("metrics", partitions, flagged)
        cached = self._cache.get(key)
        if cached is None:
            wanted = F.col(c.WANTED) if flagged else F.lit(True)
            cached = [
                F.count(F.when(wanted, F.lit(1))).alias("records"),
                *[
                    F.max(
                        F.when(
                            wanted & (F.col(c.TOPIC) == t) & (F.col(c.PARTITION) == p),
                            F.col(c.TIMESTAMP_MS),
                        )
                    ).alias(f"ts_{i}")
                    for i, (t, p) in enumerate(partitions)
                ],
            ]
            if flagged:
                cached.append(F.count(F.when(F.col(c.DROPPED), F.lit(1))).alias("dropped"))
            self._cache[key] = cached
        return list(cached)


@dataclass(frozen=True)
class TapCounts:
    """What a :class:`ObservedMetrics.tap` counted, read as an observation's ``get``:
    ``records``, ``dropped`` and ``ts_<i>`` (None: no record written from partition i)."""

    java: Any

    @property
    def get(self) -> dict[str, Any]:
        """The counts merged on the driver (read after the write's job)."""
        fields = str(self.java.values()).split(",")
        values: dict[str, Any] = {"records": int(fields[0]), "dropped": int(fields[1])}
        for i, text in enumerate(fields[2:]):
            values[f"ts_{i}"] = int(text) if text else None
        return values


@dataclass(frozen=True)
class Selection:
    """The rows a table's write takes, and what the write observes of them."""

    rows: DataFrame
    #: Counts and timestamps, observed as the rows stream by (None: the cached way's counts).
    observation: Observation | TapCounts | None = None
    #: Failing records observed in the write's pass (dead letters of a one-pass write).
    failing: Observation | None = None
    #: Failing records found in the cache before a MERGE (a MERGE with dead letters).
    failing_at: list[Any] | None = None
    #: The rows the write takes, where counted before it (a MERGE with dead letters).
    records: int | None = None


def observed(
    metrics: ObservedMetrics,
    window: BatchWindow,
    frame: DataFrame,
    wanted: Column,
    dropped: Column,
    *,
    merging: bool,
) -> Selection:
    """One table without dead letters: everything observed in the write's own pass.

    An append counts with a tap in the stage's generated code; a MERGE observes its source
    with Spark's ``observe`` (a MERGE may plan its source more than once, e.g. to find the
    files it rewrites, and the tap would count each).
    """
    from pyspark.sql import functions as F

    if not merging:
        tap, counts = metrics.tap(frame.sparkSession._jvm, wanted, dropped, window.partitions)
        rows = frame.select("*", tap.alias(c.WANTED)).where(F.col(c.WANTED))
        return Selection(rows, observation=counts)
    # Observed before the filter, so that the skipped records are counted in the same
    # pass; records and timestamps count the written ones only.
    observation = new_observation("frazil")
    flag_wanted, flag_dropped, is_wanted = metrics.flags(wanted, dropped)
    rows = (
        frame.select("*", flag_wanted, flag_dropped)
        .observe(observation, *metrics.columns(window.partitions, flagged=True))
        .where(is_wanted)
    )
    return Selection(rows, observation=observation)


def merge_with_dead_letters(
    frame: DataFrame,
    target: Target,
    counted: CachedTable | None,
    columns: WriteColumns,
    keep: Column | None,
) -> Selection:
    """A MERGE with dead letters: find the failing records in the cache first (the
    MERGE itself takes only the changes that pass)."""
    from pyspark.sql import functions as F

    error = columns.error
    own = own_error(error, True)
    written = frame.where(of_table(target.name, counted)).where(F.col(c.OP).isin(*c.WRITTEN_OPS))
    merged = error.isNull() if keep is None else error.isNull() & keep
    # The failing records and the changes the MERGE takes, counted in the same job: the
    # cached way's count of the table's changes holds the failing ones too.
    [found] = written.select(
        F.collect_list(
            F.when(
                own.isNotNull(),
                F.struct(
                    F.col(c.TOPIC), F.col(c.PARTITION), F.col(c.OFFSET), own["stage"], own["reason"]
                ),
            )
        ).alias("failing"),
        F.count(F.when(merged, F.lit(1))).alias("merged"),
    ).collect()
    failing_at = [tuple(r) for r in found["failing"]]
    return Selection(written.where(merged), failing_at=failing_at, records=int(found["merged"]))


def with_dead_letters(
    metrics: ObservedMetrics,
    window: BatchWindow,
    frame: DataFrame,
    target: Target,
    counted: CachedTable | None,
    columns: WriteColumns,
    keep: Column | None,
    dropped: Column,
    learn: bool,
    budget: Callable[[], int],
) -> Selection:
    """Failing records leave the write for the dead-letter queue; they are observed in
    the same pass, with their raw bytes where these fit (engine/dead_capture.py).

    The rows written and dropped are counted by a tap, as a single append's are: a range
    distribution (a sorted table) reads every row twice, and Spark's ``observe`` would count
    both. The failing records' observation lists each failing record once per read; they
    are told apart by position (:meth:`dead_capture.Failing.observed`).
    """
    from pyspark.sql import functions as F

    error = columns.error
    mine = frame if counted is None else frame.where(of_table(target.name, counted))
    own = own_error(error, counted is not None)
    failing = new_observation("frazil_dead")
    limit = (
        # A routed batch is cached: its failing records are read from the cache.
        0
        if counted is not None
        else dead_capture.carry_limit(
            budget(),
            # Not from the table's marker: a re-planned batch may start below it.
            dead_capture.records_upper_bound(window.planned, window.start),
        )
    )
    written_op = F.col(c.OP).isin(*c.WRITTEN_OPS)
    own_written = F.when(written_op, own)
    observed_rows = mine.observe(
        failing,
        F.count(own_written).alias("bad"),
        dead_capture.observed(own_written, limit, c.HEADERS in frame.columns).alias("at"),
    )
    good = (
        F.when(learnable(error), failure()).otherwise(error.isNull()) if learn else (error.isNull())
    )
    wanted = written_op & (good if keep is None else good & keep)
    # A routed batch's records dropped as configured are counted in its aggregation.
    tap, counts = metrics.tap(
        frame.sparkSession._jvm,
        wanted,
        dropped if counted is None else F.lit(False),
        window.partitions,
    )
    rows = observed_rows.select("*", tap.alias(c.WANTED)).where(F.col(c.WANTED))
    return Selection(rows, observation=counts, failing=failing)


def new_observation(prefix: str) -> Observation:
    """A new observation of a write (a unique name)."""
    from pyspark.sql import Observation

    return Observation(f"{prefix}_{uuid.uuid4().hex}")
