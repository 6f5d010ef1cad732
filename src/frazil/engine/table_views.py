"""The existing tables as a pipeline's shape and ``frazil plan`` see them, read through Spark's
catalog or through Iceberg's catalog API without it.

``frazil plan`` reads through the API (a Spark without the catalog and its extensions starts
about a second sooner, and opening the embedded catalog through Spark SQL costs another half);
``frazil run`` has Spark's catalog open anyway and reads through it.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from frazil.config.models import FrazilConfig
from frazil.jvm.classes import java_class
from frazil.sink.evolution import TableView
from frazil.sink.iceberg import IcebergTable
from frazil.sink.table import qualified, table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class TableViews(Protocol):
    """Existing tables by name (as the config spells it: ``db.table``)."""

    def view(self, name: str) -> TableView | None:
        """The table's current columns and field ids, or None if it does not exist."""
        ...

    def table(self, name: str) -> IcebergTable | None:
        """The table itself (its spec, properties and snapshots), or None if it does not
        exist."""
        ...


@dataclass(frozen=True)
class CatalogViews:
    """Tables read through the session's Iceberg catalog."""

    spark: SparkSession
    catalog: str

    def view(self, name: str) -> TableView | None:
        """The table through Spark's catalog, or None if it does not exist."""
        found = self.table(name)
        return None if found is None else TableView.read(self.spark, found.java)

    def table(self, name: str) -> IcebergTable | None:
        """The table through Spark's catalog, or None if it does not exist."""
        full = qualified(self.catalog, name)
        if not table_exists(self.spark, full):
            return None
        return IcebergTable(self.spark, full)


class JavaCatalogViews:
    """Tables read (each once) through Iceberg's catalog API in the session's JVM, built from
    the config as Spark's catalog is (same properties, same Java tables and type conversion),
    in a session without Spark's catalog (:func:`~frazil.engine.spark_start.build_analysis_spark`).
    An embedded catalog whose file does not exist yet has no tables (and is not created)."""

    def __init__(self, spark: SparkSession, config: FrazilConfig) -> None:
        from frazil.engine.catalog_conf import (
            SQLITE_URI,
            embedded_catalog_lock,
            iceberg_catalog_properties,
            is_embedded,
        )

        self._spark = spark
        self._catalog: Any = None
        self._read: dict[str, TableView | None] = {}
        self._tables: dict[str, IcebergTable | None] = {}
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        uri = config.catalog.resolved_uri()
        if uri.startswith(SQLITE_URI) and not Path(uri[len(SQLITE_URI) :]).exists():
            return
        properties = java_class(jvm, "java.util.HashMap")()
        for key, value in iceberg_catalog_properties(config).items():
            properties.put(key, value)
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        with embedded_catalog_lock(config) if is_embedded(config) else nullcontext():
            self._catalog = java_class(jvm, "org.apache.iceberg.CatalogUtil").buildIcebergCatalog(
                config.catalog.name, properties, hadoop
            )
        self._identifier = java_class(jvm, "org.apache.iceberg.catalog.TableIdentifier")

    def view(self, name: str) -> TableView | None:
        """The table through the catalog (read once), or None if it does not exist."""
        if name not in self._read:
            table = self.table(name)
            self._read[name] = None if table is None else TableView.read(self._spark, table.java)
        return self._read[name]

    def table(self, name: str) -> IcebergTable | None:
        """The table through the catalog (loaded once), or None if it does not exist."""
        if self._catalog is None:
            return None
        if name not in self._tables:
            identifier = self._identifier.parse(name)
            exists = self._catalog.tableExists(identifier)
            self._tables[name] = (
                IcebergTable.loaded(self._spark, name, self._catalog.loadTable(identifier))
                if exists
                else None
            )
        return self._tables[name]
