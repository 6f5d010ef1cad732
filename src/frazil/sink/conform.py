"""A batch's rows conformed for one table's write: the table's columns in its order, nested
fields matched by field id (a renamed one filled from its former name, a dropped one left
out) and added as null where the batch has none, safe casts applied, so Spark's by-name
append sees exactly the table's schema; records holding a value the table cannot take are
marked (stage ``schema``).

What the batch's columns are matched to, and whether the table must change first, is
:mod:`~frazil.sink.evolution` (:class:`~frazil.sink.evolution.Diff`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode.shapes import conform
from frazil.sink.evolution import Diff, FieldNames, TableView, table_field

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType


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

    by_table = _feeding(diff.columns.items())
    batch_types: dict[str, StructField] = {f.name: f for f in frame_schema.fields}
    out: list[Column] = []
    for f in view.schema.fields:
        names = by_table.get(f.name, [])
        inner = view.nested.get(f.name)
        values = [
            _conformed(F.col(c.quoted(n)), batch_types[n].dataType, f.dataType, inner)
            for n in names
        ]
        out.append(_first(values, f.dataType).alias(f.name))
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


def _feeding(matched: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Table field → the batch fields feeding it, from (batch field, table field) pairs.

    Several source fields may feed one field (an alias, a former name): the one named like
    the field first, then the others in batch order.
    """
    by_table: dict[str, list[str]] = {}
    for source, column in matched:
        sources = by_table.setdefault(column, [])
        if source == column:
            sources.insert(0, source)
        else:
            sources.append(source)
    return by_table


def _first(values: list[Column], data_type: DataType) -> Column:
    """The first non-null of a field's ``values``; null of its type if nothing feeds it."""
    from pyspark.sql import functions as F

    if not values:
        return F.lit(None).cast(data_type)
    return values[0] if len(values) == 1 else F.coalesce(*values)


def _conformed(
    column: Column, batch: DataType, table: DataType, names: FieldNames | None
) -> Column:
    """``column`` (of ``batch`` type) in the table's shape, as
    :func:`~frazil.decode.shapes.conform` makes it, but with its structs' fields matched by
    field id (``names``, through lists and map values): by name alone, a field a user renamed
    would stay empty and the records' field of its former name would not be written (the
    table would have been given it back as a new field), and a dropped one would come back.
    ``names`` None: by name.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if names is None or batch == table:
        # The same type has the same names, each its own current field's.
        return conform(column, batch, table)
    if isinstance(batch, StructType) and isinstance(table, StructType):
        matched = []
        for f in batch.fields:
            try:
                current = table_field(names, table, f.name)
            except KeyError:  # not in the table (its records are marked, not written)
                continue
            if current is not None:  # None: a user dropped it
                matched.append((f.name, current))
        feeding = _feeding(matched)
        types = {f.name: f.dataType for f in batch.fields}
        parts = []
        for f in table.fields:
            inner = names.nested.get(f.name)
            values = [
                _conformed(column.getField(n), types[n], f.dataType, inner)
                for n in feeding.get(f.name, [])
            ]
            parts.append(_first(values, f.dataType).alias(f.name))
        return F.when(column.isNotNull(), F.struct(*parts))
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        element_batch, element_table = batch.elementType, table.elementType
        return F.transform(column, lambda e: _conformed(e, element_batch, element_table, names))
    if isinstance(batch, MapType) and isinstance(table, MapType):
        value_batch, value_table = batch.valueType, table.valueType
        return F.transform_values(
            column, lambda _, v: _conformed(v, value_batch, value_table, names)
        )
    return conform(column, batch, table)


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
