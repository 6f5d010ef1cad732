"""A batch's rows conformed for one table's write: the table's columns in its order, nested
fields added as null where the batch has none, safe casts applied, so Spark's by-name append
sees exactly the table's schema; records holding a value the table cannot take are marked
(stage ``schema``).

What the batch's columns are matched to, and whether the table must change first, is
:mod:`~frazil.sink.evolution` (:class:`~frazil.sink.evolution.Diff`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode.shapes import conform
from frazil.sink.evolution import Diff, TableView

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructField, StructType


@dataclass(frozen=True)
class WriteColumns:
    """The columns of one table's write.

    Attributes:
        table: The table's columns in its order, conformed (aliased to the table's names).
        internal: The batch's internal columns (provenance), for naming bad records.
        error: The record's error, with the marks of values the table cannot take.
    """

    table: tuple[Column, ...]
    internal: tuple[Column, ...]
    error: Column
    #: The table's column names, in order (those of :attr:`table`).
    names: tuple[str, ...] = ()

    def rows(self) -> list[Column]:
        """Everything: table columns, internal columns and the error column."""
        return [*self.table, *self.internal, self.error.alias(c.ERROR)]

    def guarded(self, failure: Column) -> list[Column]:
        """The table's columns only, failing (``failure``) on a record marked bad.

        The check rides on the first column's expression, so it costs nothing extra per
        record and runs inside the write's own job.
        """
        from pyspark.sql import functions as F

        first, *rest = self.table
        checked = F.when(self.error.isNotNull(), failure).otherwise(first)
        return [checked.alias(self.names[0]), *rest]


def write_columns(
    frame_schema: StructType, view: TableView, diff: Diff, table_name: str
) -> WriteColumns:
    """The columns of a write: the table's columns in its order, conformed, plus the
    internal columns, with records holding a value the table cannot take marked."""
    from pyspark.sql import functions as F

    by_table: dict[str, list[str]] = {}
    for source, column in diff.columns.items():
        # Several source fields may feed one column (an alias, a former name): the one
        # named like the column first, then the others in batch order.
        sources = by_table.setdefault(column, [])
        if source == column:
            sources.insert(0, source)
        else:
            sources.append(source)
    batch_types: dict[str, StructField] = {f.name: f for f in frame_schema.fields}
    out: list[Column] = []
    for f in view.schema.fields:
        names = by_table.get(f.name, [])
        values = [conform(F.col(c.quoted(n)), batch_types[n].dataType, f.dataType) for n in names]
        if not values:
            out.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif len(values) == 1:
            out.append(values[0].alias(f.name))
        else:
            out.append(F.coalesce(*values).alias(f.name))
    error = F.col(c.ERROR)
    for m in diff.mismatches:
        root = m.column
        if root not in batch_types:
            continue
        reason = m.describe(table_name)
        error = F.coalesce(
            error, F.when(F.col(c.quoted(root)).isNotNull(), _error_struct(reason, root))
        )
    for name in view.required:
        feeding = by_table.get(name) or []
        value = F.coalesce(*[F.col(c.quoted(n)) for n in feeding]) if feeding else F.lit(None)
        why = "an identifier field" if name in view.identifiers else "NOT NULL"
        error = F.coalesce(
            error,
            F.when(
                value.isNull(),
                _schema_error(
                    f"field {name} is null but required in table {table_name} ({why})",
                    # What the record does hold, as the table would get it (nulls left out).
                    F.to_json(F.struct(*out)),
                ),
            ),
        )
    internal = [F.col(n) for n in frame_schema.fieldNames() if c.is_internal(n) and n != c.ERROR]
    return WriteColumns(tuple(out), tuple(internal), error, tuple(view.schema.fieldNames()))


def _error_struct(reason: str, column: str) -> Column:
    """A schema-stage error quoting the failing ``column`` as JSON, by its name."""
    from pyspark.sql import functions as F

    return _schema_error(reason, F.to_json(F.struct(F.col(c.quoted(column)).alias(column))))


def _schema_error(reason: str, detail: Column) -> Column:
    """A schema-stage error; its detail ``detail`` (JSON text, cut at 200 characters)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_SCHEMA).alias("stage"),
        F.lit(reason).alias("reason"),
        F.substring(detail, 1, 200).alias("detail"),
    ).cast(c.ERROR_DDL)
