"""One Iceberg table seen from the driver: snapshot ancestry, appends, marker-only commits.

The handle uses Iceberg's Java API in the Spark driver JVM (through the session's catalog), so
it reads exactly the metadata Spark writes, whatever the catalog (JDBC, REST, Hadoop).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil.errors import StaleMarker

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
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        plugin = manager.catalog(catalog)
    return plugin.icebergCatalog()


def identifier(spark: SparkSession, parts: list[str]) -> Any:
    """An Iceberg ``TableIdentifier`` for ``namespace..., table``."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.org.apache.iceberg.catalog.TableIdentifier.of(
        namespace(spark, parts[:-1]), parts[-1]
    )


def namespace(spark: SparkSession, parts: list[str]) -> Any:
    """An Iceberg ``Namespace`` of ``parts``."""
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    levels = gateway.new_array(jvm.java.lang.String, len(parts))
    for i, part in enumerate(parts):
        levels[i] = part
    return jvm.org.apache.iceberg.catalog.Namespace.of(levels)


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
        self._table: Any = iceberg_catalog(spark, catalog).loadTable(identifier(spark, parts))

    @property
    def java(self) -> Any:
        """The Java ``Table`` (for schema and property updates)."""
        return self._table

    def refresh(self) -> None:
        """Pick up commits made since the last look (by Spark, other runs, maintenance)."""
        self._table.refresh()

    def current_snapshot_id(self) -> int | None:
        """The id of the table's current snapshot, or None for a table without any."""
        snapshot = self._table.currentSnapshot()
        return None if snapshot is None else int(snapshot.snapshotId())

    def ancestry(self) -> Iterator[SnapshotView]:
        """The current snapshot and its ancestors, newest first, as far as they are kept.

        This is the table's real history: snapshots rolled back or left on other branches are
        not in it, and no clock is trusted to order it.
        """
        snapshot = self._table.currentSnapshot()
        while snapshot is not None:
            yield SnapshotView(
                int(snapshot.snapshotId()), int(snapshot.timestampMillis()), snapshot.summary()
            )
            parent = snapshot.parentId()
            snapshot = None if parent is None else self._table.snapshot(parent)

    def total_records(self) -> int:
        """Live rows in the current snapshot, from its summary (0 for an empty table)."""
        return self.current_total("total-records")

    def current_total(self, key: str) -> int:
        """A number of the current snapshot's summary (``total-records``, ``added-files-size``
        …; 0 for an empty table or a missing entry)."""
        snapshot = self._table.currentSnapshot()
        if snapshot is None:
            return 0
        value = snapshot.summary().get(key)
        return int(value) if value is not None else 0

    def snapshot_count(self) -> int:
        """Snapshots kept in the table's metadata (all branches, rolled back ones too)."""
        return len(list(self._table.snapshots()))

    def commit_summary_only(self, summary: dict[str, str]) -> None:
        """Commit a snapshot that adds no data and carries ``summary`` (progress without rows)."""
        append = self._table.newFastAppend()
        for key, value in summary.items():
            append = append.set(key, value)
        try:
            append.commit()
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
