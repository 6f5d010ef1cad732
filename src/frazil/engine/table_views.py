"""The existing tables as a pipeline's shape and ``frazil plan`` see them, read through Spark's
catalog or from the tables' metadata with PyIceberg.

``frazil plan`` reads the metadata (a Spark without the catalog starts about a second sooner,
and opening the embedded catalog through Spark costs another half); ``frazil run`` has the
catalog open anyway and reads through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

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


@dataclass(frozen=True)
class CatalogViews:
    """Tables read through the session's Iceberg catalog."""

    spark: SparkSession
    catalog: str

    def view(self, name: str) -> TableView | None:
        """The table through Spark's catalog, or None if it does not exist."""
        full = qualified(self.catalog, name)
        if not table_exists(self.spark, full):
            return None
        return TableView.read(self.spark, IcebergTable(self.spark, full).java)


@dataclass(frozen=True)
class MetadataViews:
    """Tables read from their metadata with PyIceberg's ``catalog``, once each; their schemas
    are converted to Spark's types by Iceberg's own code in the session's JVM (no catalog
    there)."""

    spark: SparkSession
    catalog: Any
    _read: dict[str, TableView | None] = field(default_factory=dict)

    def view(self, name: str) -> TableView | None:
        """The table from its metadata, or None if it does not exist."""
        from frazil.observe.catalog import load

        if name not in self._read:
            table = load(self.catalog, name)
            self._read[name] = (
                None
                if table is None
                else TableView.from_metadata(
                    self.spark, table.schema().model_dump_json(by_alias=True), table.properties
                )
            )
        return self._read[name]
