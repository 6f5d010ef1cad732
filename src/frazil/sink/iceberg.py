"""One Iceberg table seen from the driver: snapshot ancestry, appends, marker-only commits.

The handle uses Iceberg's Java API in the Spark driver JVM (through the session's catalog), so
it reads exactly the metadata Spark writes, whatever the catalog (JDBC, REST, Hadoop).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil.errors import StaleMarker
from frazil.jvm.classes import java_class
from frazil.progress import table_markers
from frazil.progress.rows import TOTAL_POSITION_DELETES, TOTAL_RECORDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The Java exception of a commit refused on a stale marker (dev.frazil.iceberg).
STALE_MARKER = "StaleMarkerException"


def stale_marker(exc: BaseException) -> StaleMarker | None:
    """The :class:`StaleMarker` an exception from the JVM stands for, or None.

    The catalog's message (the table, the pipeline, the marker planned after and the one
    found, with the run that committed it) is kept.
    """
    text = str(exc)
    at = text.find(STALE_MARKER)
    if at < 0:
        return None
    line = text[at:].splitlines()[0]
    return StaleMarker(line.partition(":")[2].strip() or line)


def split_name(name: str) -> list[str]:
    """``catalog.namespace.table`` into its parts (backquotes, as :func:`qualified` writes
    them, removed; frazil's names are identifiers, so no part holds a dot)."""
    return [part.strip("`") for part in name.split(".")]


def iceberg_catalog(spark: SparkSession, catalog: str) -> Any:
    """The Iceberg catalog behind Spark catalog ``catalog`` (a Java ``Catalog``).

    Tables are looked up and created through it directly rather than through Spark SQL: that
    keeps the SQL parser and analyser out of every start (docs/benchmarks.md).
    """
    manager = spark._jsparkSession.sessionState().catalogManager()
    try:
        plugin = manager.catalog(catalog)
    except Exception:
        # Spark loads a catalog with the thread's active session's settings: a thread of
        # its own (a run started from a thread) has none until it is set.
        activate(spark)
        plugin = manager.catalog(catalog)
    return plugin.icebergCatalog()


def commits_tables_at_once(spark: SparkSession, catalog: str) -> bool:
    """Whether Spark catalog ``catalog`` commits several tables in one transaction (REST and
    JDBC, unless ``catalog.atomic_commits`` is off: ``MarkedCatalog.commitsTablesAtOnce``)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return bool(
        java_class(jvm, "dev.frazil.iceberg.MarkedCatalog").commitsTablesAtOnce(
            iceberg_catalog(spark, catalog)
        )
    )


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread's JVM thread (PySpark pins
    one to each Python thread). Spark looks catalogs up, and Iceberg's actions register
    theirs (a compaction's ``default_rewrite_catalog``), on the thread's active session: a
    thread of frazil's own has none until it is set, and its Spark actions then fail."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java_class(jvm, "org.apache.spark.sql.SparkSession").setActiveSession(spark._jsparkSession)


def identifier(spark: SparkSession, parts: list[str]) -> Any:
    """An Iceberg ``TableIdentifier`` for ``namespace..., table``."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    identifiers = java_class(jvm, "org.apache.iceberg.catalog.TableIdentifier")
    if not any("." in part for part in parts):
        # One round trip: parse splits at the dots, into these very parts.
        return identifiers.parse(".".join(parts))
    return identifiers.of(namespace(spark, parts[:-1]), parts[-1])


def namespace(spark: SparkSession, parts: list[str]) -> Any:
    """An Iceberg ``Namespace`` of ``parts``."""
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    levels = gateway.new_array(java_class(jvm, "java.lang.String"), len(parts))
    for i, part in enumerate(parts):
        levels[i] = part
    return java_class(jvm, "org.apache.iceberg.catalog.Namespace").of(levels)


@dataclass(frozen=True)
class SnapshotView:
    """One snapshot of a table's history; summary entries are read on demand."""

    snapshot_id: int
    timestamp_ms: int
    _summary: Any

    def get(self, key: str) -> str | None:
        """One snapshot-summary entry, or None."""
        value = self._summary.get(key)
        return None if value is None else str(value)


class IcebergTable:
    """A live handle on one table, refreshed on demand.

    Args:
        spark: The running session.
        name: The table's qualified name (``catalog.namespace.table``, parts may be backquoted).
    """

    def __init__(self, spark: SparkSession, name: str) -> None:
        catalog, *parts = split_name(name)
        self.spark = spark
        self.name = name
        self._java: Any = iceberg_catalog(spark, catalog).loadTable(identifier(spark, parts))
        #: A Java list holding the table, and its index there (see
        #: :meth:`IcebergTables.java_tables`); None: in none.
        self.held_in: tuple[Any, int] | None = None

    @classmethod
    def loaded(cls, spark: SparkSession, name: str, java: Any) -> IcebergTable:
        """A handle on a Java ``Table`` already loaded (through a catalog of its own, as
        ``frazil plan`` reads tables without Spark's catalog)."""
        handle = cls.__new__(cls)
        handle.spark = spark
        handle.name = name
        handle._java = java
        handle.held_in = None
        return handle

    @classmethod
    def in_list(cls, spark: SparkSession, name: str, tables: Any, index: int) -> IcebergTable:
        """A handle on the Java ``Table`` at ``index`` of the Java list ``tables`` (loaded by
        the call that made the list), fetched from the list only when first used: a routed
        batch's new tables are read all at once through the list, not one by one."""
        handle = cls.__new__(cls)
        handle.spark = spark
        handle.name = name
        handle._java = None
        handle.held_in = (tables, index)
        return handle

    @property
    def java(self) -> Any:
        """The Java ``Table`` (for schema and property updates)."""
        if self._java is None:
            assert self.held_in is not None
            tables, index = self.held_in
            self._java = tables.get(index)
        return self._java

    def refresh(self) -> None:
        """Pick up commits made since the last look (by Spark, other runs, maintenance)."""
        self.java.refresh()

    def current_snapshot_id(self) -> int | None:
        """The id of the table's current snapshot, or None for a table without any."""
        snapshot = self.java.currentSnapshot()
        return None if snapshot is None else int(snapshot.snapshotId())

    def ancestry(self) -> Iterator[SnapshotView]:
        """The current snapshot and its ancestors, newest first, as far as they are kept.

        This is the table's real history: snapshots rolled back or left on other branches are
        not in it, and no clock is trusted to order it.
        """
        snapshot = self.java.currentSnapshot()
        while snapshot is not None:
            yield SnapshotView(
                int(snapshot.snapshotId()), int(snapshot.timestampMillis()), snapshot.summary()
            )
            parent = snapshot.parentId()
            snapshot = None if parent is None else self.java.snapshot(parent)

    def total_records(self) -> int:
        """Live rows in the current snapshot, from its summary (0 for an empty table): its
        ``total-records`` less its position deletes (:func:`frazil.progress.rows.live_rows`)."""
        return max(
            0, self.current_total(TOTAL_RECORDS) - self.current_total(TOTAL_POSITION_DELETES)
        )

    def current_total(self, key: str) -> int:
        """A number of the current snapshot's summary (``total-records``, ``added-files-size``
        …; 0 for an empty table or a missing entry)."""
        snapshot = self.java.currentSnapshot()
        if snapshot is None:
            return 0
        value = snapshot.summary().get(key)
        return int(value) if value is not None else 0

    def snapshot_count(self) -> int:
        """Snapshots kept in the table's metadata (all branches, rolled back ones too)."""
        return len(list(self.java.snapshots()))

    def commit_summary_only(self, summary: dict[str, str]) -> None:
        """Commit a snapshot that adds no data and carries ``summary`` (progress without rows)."""
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        try:
            # One round trip: the append's setters cost one per entry.
            java_class(jvm, "dev.frazil.spark.RoutedCommits").mark(self.java, json.dumps(summary))
        except Exception as exc:
            stale = stale_marker(exc)
            if stale is None:
                raise
            raise stale from None


def append_rows(
    rows: DataFrame, table: str, summary: dict[str, str], options: dict[str, str] | None = None
) -> None:
    """Append ``rows`` to ``table`` in one Iceberg commit whose snapshot summary has ``summary``.

    ``options`` are Iceberg write options (``check-nullability``).
    """
    writer = rows.writeTo(table)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    for key, value in summary.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    try:
        writer.append()
    except Exception as exc:
        stale = stale_marker(exc)
        if stale is None:
            raise
        raise stale from None


@dataclass(frozen=True)
class ReportFacts:
    """What a run's report reads of a table (:meth:`IcebergTables.report_facts`)."""

    #: Snapshots kept in the table's metadata (all branches, rolled back ones too).
    snapshots: int
    #: The current snapshot's time (epoch ms), None for a table without one.
    last_commit_ms: int | None
    #: The newest snapshot of the current ancestry that names the pipeline and added rows.
    pipeline_commit_ms: int | None
    data_files: int
    #: Live rows of the current snapshot (:meth:`IcebergTable.total_records`).
    rows: int


class IcebergTables:
    """Several tables' handles read at once in the JVM (``dev.frazil.iceberg.TableStates``):
    a routed pipeline's per-batch looks at its tables cost one py4j round trip for all of
    them, not some twenty per table, and the tables refresh concurrently.

    Args:
        spark: The running session.
        tables: The tables (their handles are shared, not copied; the Java list of them is
            built once).
    """

    def __init__(self, spark: SparkSession, tables: Sequence[IcebergTable]) -> None:
        self.spark = spark
        self.tables = list(tables)
        self._index = {id(t): i for i, t in enumerate(self.tables)}
        self._java: Any = None

    def _jvm(self) -> Any:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm

    def index(self, table: object) -> int:
        """The table's position in :meth:`java_tables`."""
        return self._index[id(table)]

    def java_tables(self) -> Any:
        """The tables' Java ``Table`` objects, as a Java list (built once).

        Tables that stand in a row of another Java list (``IcebergTable.held_in``: a list
        built before, or the one their creation returned) are copied a row at a time, the
        others added one by one: a py4j round trip each. The list then holds each of its
        tables for the next lists: a routed pipeline's 100 tables and the new ones of a batch
        make a list in a few round trips, not one per table.
        """
        if self._java is None:
            java = java_class(self._jvm(), "java.util.ArrayList")(len(self.tables))
            for first, count, source, start in _rows(self.tables):
                if source is None or count == 1:
                    java.add(self.tables[first].java)
                else:
                    java.addAll(source.subList(start, start + count))
            for index, table in enumerate(self.tables):
                table.held_in = (java, index)
            self._java = java
        return self._java

    def states(self, pipeline: str, max_walk: int) -> list[table_markers.RawState]:
        """Each table refreshed, and its state (see
        :class:`frazil.progress.table_markers.RawState`)."""
        if not self.tables:
            return []
        raw = json.loads(
            str(
                java_class(self._jvm(), "dev.frazil.iceberg.TableStates").read(
                    self.java_tables(), pipeline, max_walk
                )
            )
        )
        return [
            table_markers.RawState(
                None if r["snapshot_id"] is None else int(r["snapshot_id"]),
                int(r["total_records"]),
                None if r["marker"] is None else {str(k): str(v) for k, v in r["marker"].items()},
                bool(r.get("retired", False)),
            )
            for r in raw
        ]

    def report_facts(self, pipeline: str) -> list[ReportFacts]:
        """Each table refreshed, and what a run's report reads of it (one round trip)."""
        if not self.tables:
            return []
        raw = json.loads(
            str(
                java_class(self._jvm(), "dev.frazil.iceberg.TableStates").reports(
                    self.java_tables(), pipeline
                )
            )
        )
        return [
            ReportFacts(
                snapshots=int(r["snapshots"]),
                last_commit_ms=None if r["last_commit_ms"] is None else int(r["last_commit_ms"]),
                pipeline_commit_ms=(
                    None if r["pipeline_commit_ms"] is None else int(r["pipeline_commit_ms"])
                ),
                data_files=int(r["data_files"]),
                rows=int(r["rows"]),
            )
            for r in raw
        ]

    def mark_all(self, catalog: Any, marks: list[tuple[str, IcebergTable, dict[str, str]]]) -> None:
        """Markers without data for some of these tables (``(name, table, summary)``, the name
        as the catalog knows it: ``namespace.table``) in one transaction of ``catalog`` (a
        catalog for which :func:`commits_tables_at_once` holds): all of them, or none."""
        commits = [[self.index(table), name, summary] for name, table, summary in marks]
        java_class(self._jvm(), "dev.frazil.spark.TablesTransaction").markAll(
            catalog, self.java_tables(), json.dumps(commits)
        )

    def column_versions(self, property_name: str) -> list[tuple[int, str | None]]:
        """Each table's schema id and the value of ``property_name`` (its name mapping), all
        read in one round trip (as the tables stand: :meth:`states` refreshes them)."""
        if not self.tables:
            return []
        raw = json.loads(
            str(
                java_class(self._jvm(), "dev.frazil.iceberg.TableStates").columnVersions(
                    self.java_tables(), property_name
                )
            )
        )
        return [(int(schema_id), None if text is None else str(text)) for schema_id, text in raw]

    def plain_writes(self) -> list[bool]:
        """Whether each table is unsorted and written in Parquet (``write.format.default``),
        all read in one round trip."""
        if not self.tables:
            return []
        raw = java_class(self._jvm(), "dev.frazil.iceberg.TableStates").plainWrites(
            self.java_tables()
        )
        return [bool(plain) for plain in json.loads(str(raw))]

    def column_views(self, indexes: list[int], property_name: str) -> list[dict[str, Any]]:
        """The columns of the tables at ``indexes``: each one's schema id, Iceberg schema
        (JSON), Spark type (JSON), identifier fields and value of ``property_name`` (its name
        mapping), all read in one round trip (``TableStates.columnViews``)."""
        if not indexes:
            return []
        raw = java_class(self._jvm(), "dev.frazil.iceberg.TableStates").columnViews(
            self.java_tables(), json.dumps(indexes), property_name
        )
        views: list[dict[str, Any]] = json.loads(str(raw))
        return views

    def interleaved(
        self,
        tables: Sequence[table_markers.MarkedTable],
        bases: list[int | None],
        pipeline: str,
        commit_ids: list[str],
        max_walk: int,
    ) -> list[int | None]:
        """See :meth:`frazil.progress.table_markers.MarkedTables.interleaved` (``tables``: some of
        these tables)."""
        if not tables:
            return []
        checks = [
            [self.index(t), base, commit]
            for t, base, commit in zip(tables, bases, commit_ids, strict=True)
        ]
        found = json.loads(
            str(
                java_class(self._jvm(), "dev.frazil.iceberg.TableStates").interleaved(
                    self.java_tables(), json.dumps(checks), pipeline, max_walk
                )
            )
        )
        return [None if f is None else int(f) for f in found]


def _rows(tables: Sequence[IcebergTable]) -> Iterator[tuple[int, int, Any, int]]:
    """``tables`` in runs held in a row by one Java list: ``(first, count, list, start)``,
    ``tables[first:first + count]`` being ``list[start:start + count]``; a table held in no
    list is a run of its own, of list None."""
    first = 0
    while first < len(tables):
        held = tables[first].held_in
        count = 1
        if held is not None:
            source, start = held
            while first + count < len(tables):
                after = tables[first + count].held_in
                if after is None or after[0] is not source or after[1] != start + count:
                    break
                count += 1
            yield first, count, source, start
        else:
            yield first, 1, None, 0
        first += count
