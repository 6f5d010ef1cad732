"""Column adaptation: a batch's columns matched to a table's by field id, the table evolved
first if the batch needs it (:mod:`frazil.sink.evolution`), the rows conformed to its shape
(:mod:`frazil.sink.conform`)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.engine.ledger import TableLedger
from frazil.sink.conform import WriteColumns
from frazil.sink.conform import write_columns as conformed_columns
from frazil.sink.evolution import NAME_MAPPING, TableView, compare, evolve
from frazil.sink.tables import Target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")


@dataclass
class ColumnAdapter:
    """Fits batches to their tables, evolving a table in a commit of its own when a batch
    brings new fields or wider types.

    Attributes:
        spark: The session.
        ledger: Records each schema change (stats and events).
        quiet: Whether :meth:`adapt` leaves unsaid the batch columns a table no longer takes
            (a run logs them with each batch; a replay reports its counts only).
    """

    spark: SparkSession
    ledger: TableLedger
    quiet: bool = False
    #: Write columns by table, batch shape and table schema (building them costs py4j round
    #: trips).
    _writes: dict[tuple[object, ...], WriteColumns] = field(default_factory=dict)

    def as_committed(
        self, schema: StructType, target: Target, view: TableView, with_values: set[str] | None
    ) -> WriteColumns:
        """The batch's columns matched to a former schema of the table (``view``: the one a
        commit of the batch was checked against), without evolving anything: what that
        commit left out is what their error marks."""
        diff = compare(c.user_schema(schema), view, target.settings, with_values=with_values)
        return conformed_columns(schema, view, diff, target.name)

    def view(self, target: Target) -> TableView:
        """The table's columns, re-read only when its schema changed."""
        java = target.table.java
        return self._current(target, int(java.schema().schemaId()), _mapping_text(java))

    def views(self) -> dict[str, TableView]:
        """:meth:`view` of each of the ledger's tables, their schema ids and name mappings
        read in one round trip (a few per table otherwise: 100 routed tables cost ~500 a
        batch), and the columns of those whose schema changed in one more (ten or so each
        through :meth:`TableView.read`)."""
        targets = self.ledger.targets
        if not targets:
            return {}
        handles = self.ledger.handles()
        versions = handles.column_versions(NAME_MAPPING)
        stale = [
            index
            for index, (target, (schema_id, mapping_text)) in enumerate(
                zip(targets.values(), versions, strict=True)
            )
            if not _reads_as(target.view, schema_id, mapping_text)
        ]
        if stale:
            from pyspark.sql.types import StructType

            items = list(targets.values())
            types: dict[str, StructType] = {}  # Spark's JSON → type: tables often share one
            for index, raw in zip(stale, handles.column_views(stale, NAME_MAPPING), strict=True):
                spark_json = str(raw["spark"])
                if spark_json not in types:
                    types[spark_json] = StructType.fromJson(json.loads(spark_json))
                items[index].view = TableView.parse(
                    int(raw["schema_id"]),
                    json.loads(str(raw["schema"])),
                    types[spark_json],
                    [str(n) for n in raw["identifiers"]],
                    None if raw["mapping"] is None else str(raw["mapping"]),
                )
        return {
            name: self._current(target, schema_id, mapping_text)
            for (name, target), (schema_id, mapping_text) in zip(
                targets.items(), versions, strict=True
            )
        }

    def _current(self, target: Target, schema_id: int, mapping_text: str | None) -> TableView:
        """The target's columns, read again when the table's schema id or name mapping is not
        the one they were read at."""
        view = target.view
        if view is None or not _reads_as(view, schema_id, mapping_text):
            target.view = view = TableView.read(self.spark, target.table.java)
        return view

    def adapt(
        self,
        schema: StructType,
        target: Target,
        batch_id: int,
        with_values: set[str] | None,
    ) -> WriteColumns:
        """The batch's columns in the table's shape, after evolving the table if needed.

        Args:
            schema: The planned batch's schema.
            target: The table.
            batch_id: The batch (recorded with a schema change).
            with_values: The user columns holding a value in at least one of the table's
                records (a routed table gets new columns only where its records fill them);
                None: all of them.
        """
        user = c.user_schema(schema)
        view = self.view(target)
        diff = compare(user, view, target.settings, with_values=with_values)
        if diff.desired is not None:
            changes = tuple(diff.additions)
            evolve(
                self.spark,
                target.table.java,
                diff.desired,
                diff.additions,
                pipeline=self.ledger.pipeline,
                batch_id=batch_id,
                name=target.name,
            )
            target.table.refresh()
            view = self.view(target)
            diff = compare(user, view, target.settings, with_values=with_values)
            self.ledger.evolved(target.name, batch_id, changes)
        if diff.dropped and not self.quiet:
            log.info(
                "%s: column(s) %s were dropped from %s; not writing them",
                self.ledger.pipeline,
                ", ".join(diff.dropped),
                target.name,
            )
        key = (
            target.qualified,
            schema.json(),
            view.schema_id,
            view.mapping_text,
            tuple(sorted(diff.columns.items())),
            tuple((m.path, m.column) for m in diff.mismatches),
        )
        columns = self._writes.get(key)
        if columns is None:
            columns = conformed_columns(schema, view, diff, target.name)
            self._writes[key] = columns
        return columns


def _mapping_text(java_table: Any) -> str | None:
    value = java_table.properties().get(NAME_MAPPING)
    return None if value is None else str(value)


def _reads_as(view: TableView | None, schema_id: int, mapping_text: str | None) -> bool:
    """Whether ``view`` was read at this schema id and name mapping."""
    return view is not None and view.schema_id == schema_id and view.mapping_text == mapping_text
