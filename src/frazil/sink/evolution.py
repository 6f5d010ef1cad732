"""A batch's columns against a live table: follow renames, evolve the schema, conform the rows.

Before each write, the batch's user columns are matched to the table's columns:

* **by field id, not position or current name.** A source field keeps its column when a user
  renames it (``ALTER TABLE … RENAME COLUMN``): frazil gives its tables Iceberg's default
  name mapping (``schema.name-mapping.default``), which keeps every former name of a field id
  as an alias. ``aliases`` in the config add source names of their own. A column a user
  dropped stays dropped: its source field is no longer written.
* **types**: the table's type is kept when the batch's type fits in it (int into long);
  Iceberg's promotions (int → long, float → double, wider decimal precision) and new fields
  (top level, in structs, in list elements, in map values) change the table under the
  ``evolve`` policy, in one commit made before the batch's write, recorded in a table
  property ``frazil.schema-evolution.<schema id>`` (what changed, pipeline, batch).
* **what cannot change** (string → int, struct → string, a promotion under ``freeze``, a new
  field under ``freeze``) never touches the table: the records holding a value in that field
  are marked (stage ``schema``) with the field and both types; the rest are written.

The rows are then *conformed* to the table's shape: columns in the table's order, nested
fields added as null where the batch has none, safe casts applied, so Spark's by-name append
sees exactly the table's schema.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.table_settings import ResolvedTable
from frazil.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

log = logging.getLogger(__name__)

#: Iceberg's table property holding the name mapping (field id → names, former ones too).
NAME_MAPPING = "schema.name-mapping.default"
#: Prefix of the table properties recording each evolution frazil made.
EVOLUTION_PROPERTY = "frazil.schema-evolution."


@dataclass(frozen=True)
class Mismatch:
    """A field whose batch type the table cannot take."""

    path: str
    batch_type: str
    table_type: str
    reason: str

    def describe(self, table_name: str) -> str:
        """The reason each record holding a value in the field is marked with (stage
        ``schema``); ``frazil plan`` warns in the same words."""
        return f"field {self.path} is {self.batch_type} in the records but " + (
            f"{self.table_type} in table {table_name}: {self.reason}"
            if self.table_type != "-"
            else f"not in table {table_name} (schema_evolution: freeze)"
        )


@dataclass
class Diff:
    """What a batch needs from a table.

    Attributes:
        columns: Batch column → table column, for the columns written.
        dropped: Batch columns whose field a user dropped from the table (not written).
        additions: Human-readable changes the batch needs (new fields, promotions).
        desired: The table's schema with those changes, in the table's names.
        mismatches: Fields the table cannot take (their records are marked).
    """

    columns: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    additions: list[str] = field(default_factory=list)
    desired: StructType | None = None
    mismatches: list[Mismatch] = field(default_factory=list)


def spark_schema(spark: SparkSession, iceberg_schema: Any) -> StructType:
    """An Iceberg schema (Java) as a PySpark ``StructType``, through Iceberg's own conversion."""
    from pyspark.sql.types import StructType

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    converted = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(iceberg_schema)
    result = StructType.fromJson(json.loads(converted.json()))
    return result


def iceberg_schema(spark: SparkSession, schema: StructType) -> Any:
    """A PySpark ``StructType`` as an Iceberg schema (Java, fresh field ids)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java_type = spark._jsparkSession.parseDataType(schema.json())
    return jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(java_type)


def name_mapping_json(spark: SparkSession, schema: Any) -> str:
    """Iceberg's default name mapping of a schema, as the table property's JSON."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    mapping = jvm.org.apache.iceberg.mapping.MappingUtil.create(schema)
    return str(jvm.org.apache.iceberg.mapping.NameMappingParser.toJson(mapping))


@dataclass
class TableView:
    """The parts of a table's current metadata that matching needs, read once per schema id.

    Attributes:
        schema_id: The Iceberg schema id read.
        schema: The table's columns as Spark types.
        ids: Top-level column name → field id.
        names: Every name the name mapping knows for a top-level field id → that id.
        required: Top-level columns the table requires (identifier fields, NOT NULL).
        identifiers: The table's identifier fields (required by Iceberg).
    """

    schema_id: int
    schema: StructType
    ids: dict[str, int]
    names: dict[str, int]
    required: list[str]
    mapping_text: str | None = None
    identifiers: frozenset[str] = frozenset()

    @classmethod
    def read(cls, spark: SparkSession, table: Any, schema: Any = None) -> TableView:
        """Read the view of a Java ``Table`` (refreshed by the caller): of its current schema,
        or of ``schema``, one of its former ones (a Java ``Schema``)."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        schema = table.schema() if schema is None else schema
        # One JSON document rather than a py4j round trip per column.
        parsed = json.loads(str(jvm.org.apache.iceberg.SchemaParser.toJson(schema)))
        ids = {str(f["name"]): int(f["id"]) for f in parsed["fields"]}
        required = [str(f["name"]) for f in parsed["fields"] if f["required"]]
        identifiers = (
            frozenset(str(n) for n in schema.identifierFieldNames())
            if parsed.get("identifier-field-ids")
            else frozenset()
        )
        names: dict[str, int] = {}
        mapping = table.properties().get(NAME_MAPPING)
        if mapping is not None:
            for entry in json.loads(str(mapping)):
                if "field-id" in entry:
                    for name in entry.get("names", []):
                        names[str(name)] = int(entry["field-id"])
        for name, fid in ids.items():
            names.setdefault(name, fid)
        return cls(
            int(parsed.get("schema-id", schema.schemaId())),
            spark_schema(spark, schema),
            ids,
            names,
            required,
            None if mapping is None else str(mapping),
            identifiers,
        )

    def column_for(self, name: str) -> str | None:
        """The current column of a source name, or None if its field was dropped.

        Raises:
            KeyError: The name is new to the table.
        """
        if name in self.ids:
            return name
        fid = self.names.get(name)
        if fid is None:
            lowered = {n.lower(): n for n in self.ids}
            if name.lower() in lowered:
                return lowered[name.lower()]
            raise KeyError(name)
        current = {v: k for k, v in self.ids.items()}
        return current.get(fid)


def compare(
    batch: StructType,
    view: TableView,
    settings: ResolvedTable,
    *,
    with_values: set[str] | None = None,
) -> Diff:
    """Match a batch's user columns to a table's columns.

    Args:
        batch: The batch's user columns.
        view: The table.
        settings: The table's settings (evolution policy, aliases).
        with_values: Batch columns that hold a value in this table's rows; new columns
            without any are not added (a routed table gets the columns its records have).
            None: every new column is added.
    """
    from pyspark.sql.types import StructField, StructType

    diff = Diff()
    evolve = settings.schema_evolution == "evolve"
    table_fields = {f.name: f for f in view.schema.fields}
    wanted: dict[str, StructField] = {f.name: f for f in view.schema.fields}
    new_fields: list[StructField] = []
    for f in batch.fields:
        source = settings.aliases.get(f.name, f.name)
        try:
            column = view.column_for(source)
        except KeyError:
            if with_values is not None and f.name not in with_values:
                continue
            if not evolve:
                diff.mismatches.append(
                    Mismatch(f.name, f.dataType.simpleString(), "-", "not in the table")
                )
                continue
            diff.columns[f.name] = source
            if all(n.name.lower() != source.lower() for n in new_fields):
                new_fields.append(StructField(source, f.dataType, True))
                diff.additions.append(f"add column {source} {f.dataType.simpleString()}")
            continue
        if column is None:
            diff.dropped.append(f.name)
            continue
        target = table_fields[column]
        merged, changes, problems = _merge(column, f.dataType, target.dataType, evolve)
        if problems:
            diff.mismatches.extend(problems)
            continue
        diff.columns[f.name] = column
        if evolve and column in view.required and column not in view.identifiers:
            # A NOT NULL column the records may leave null: Iceberg may relax it.
            changes = [*changes, f"make {column} optional"]
        if changes:
            diff.additions.extend(changes)
            # Identifier fields stay required (Iceberg refuses optional ones).
            wanted[column] = StructField(column, merged, column not in view.identifiers)
    if evolve:
        written = set(diff.columns.values())
        for name in view.required:
            if name not in written and name not in view.identifiers:
                # The batch never fills it: a NOT NULL column would fail every record.
                diff.additions.append(f"make {name} optional")
                wanted[name] = StructField(name, wanted[name].dataType, True)
    if diff.additions:
        diff.desired = StructType([*wanted.values(), *new_fields])
    return diff


def _merge(
    path: str, batch: DataType, table: DataType, evolve: bool
) -> tuple[DataType, list[str], list[Mismatch]]:
    """The table type that takes both (table-first), the changes it needs, or mismatches."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(batch, StructType) and isinstance(table, StructType):
        fields = {f.name: f for f in table.fields}
        merged_fields = list(table.fields)
        changes: list[str] = []
        problems: list[Mismatch] = []
        lowered = {n.lower(): n for n in fields}
        for f in batch.fields:
            name = f.name if f.name in fields else lowered.get(f.name.lower())
            if name is None:
                if evolve:
                    merged_fields.append(StructField(f.name, f.dataType, True))
                    changes.append(f"add field {path}.{f.name} {f.dataType.simpleString()}")
                else:
                    problems.append(
                        Mismatch(
                            f"{path}.{f.name}", f.dataType.simpleString(), "-", "not in the table"
                        )
                    )
                continue
            sub, sub_changes, sub_problems = _merge(
                f"{path}.{name}", f.dataType, fields[name].dataType, evolve
            )
            problems.extend(sub_problems)
            changes.extend(sub_changes)
            index = next(i for i, g in enumerate(merged_fields) if g.name == name)
            # Nullability stays the table's: a merge must not relax a field silently.
            merged_fields[index] = StructField(name, sub, fields[name].nullable)
        return StructType(merged_fields), changes, problems
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        sub, changes, problems = _merge(
            f"{path}.element", batch.elementType, table.elementType, evolve
        )
        return ArrayType(sub, table.containsNull), changes, problems
    if isinstance(batch, MapType) and isinstance(table, MapType):
        if not _fits(batch.keyType, table.keyType):
            return table, [], [_mismatch(path, batch, table)]
        sub, changes, problems = _merge(f"{path}.value", batch.valueType, table.valueType, evolve)
        return MapType(table.keyType, sub, table.valueContainsNull), changes, problems
    if _fits(batch, table):
        return table, [], []
    if _promotable(table, batch):
        if not evolve:
            return table, [], [_mismatch(path, batch, table, "schema_evolution is freeze")]
        change = f"widen {path} {table.simpleString()} to {batch.simpleString()}"
        return batch, [change], []
    return table, [], [_mismatch(path, batch, table)]


def _mismatch(path: str, batch: DataType, table: DataType, why: str = "") -> Mismatch:
    reason = why or (
        f"Iceberg cannot change a {table.simpleString()} column to {batch.simpleString()}"
    )
    return Mismatch(path, batch.simpleString(), table.simpleString(), reason)


def _fits(batch: DataType, table: DataType) -> bool:
    """Whether values of ``batch`` type go into a ``table`` column without loss."""
    from pyspark.sql.types import (
        ByteType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        NullType,
        ShortType,
    )

    if isinstance(batch, NullType) or batch == table:
        return True
    integral = (ByteType, ShortType, IntegerType, LongType)
    if isinstance(batch, integral) and isinstance(table, integral):
        return integral.index(type(batch)) <= integral.index(type(table))
    if isinstance(batch, FloatType) and isinstance(table, DoubleType):
        return True
    if isinstance(batch, DecimalType) and isinstance(table, DecimalType):
        return (
            batch.scale <= table.scale
            and batch.precision - batch.scale <= table.precision - table.scale
        )
    return False


def _promotable(table: DataType, batch: DataType) -> bool:
    """Iceberg's type promotions: int → long, float → double, decimal precision widening."""
    from pyspark.sql.types import (
        ByteType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
    )

    if isinstance(table, (ByteType, ShortType, IntegerType)) and isinstance(batch, LongType):
        return True
    if isinstance(table, FloatType) and isinstance(batch, DoubleType):
        return True
    if isinstance(table, DecimalType) and isinstance(batch, DecimalType):
        return batch.scale == table.scale and batch.precision > table.precision
    return False


def evolve(
    spark: SparkSession,
    table: Any,
    desired: StructType,
    changes: list[str],
    *,
    pipeline: str,
    batch_id: int,
    name: str,
) -> None:
    """Apply ``desired`` to a Java ``Table`` by name, recording the change, in one commit.

    Raises:
        PipelineError: Iceberg refused the change.
    """
    import time

    record = json.dumps(
        {
            "pipeline": pipeline,
            "batch": batch_id,
            "changes": changes,
            "at_ms": int(time.time() * 1000),
        },
        separators=(",", ":"),
    )
    try:
        tx = table.newTransaction()
        tx.updateSchema().unionByNameWith(iceberg_schema(spark, desired)).commit()
        schema_id = int(tx.table().schema().schemaId())
        tx.updateProperties().set(f"{EVOLUTION_PROPERTY}{schema_id}", record).commit()
        tx.commitTransaction()
    except Exception as exc:  # py4j wraps Iceberg's validation and commit exceptions
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PipelineError(
            f"pipeline {pipeline!r}: evolving table {name} ({'; '.join(changes)}) failed: {first}"
        ) from None
    log.warning(
        "%s: table %s evolved in batch %d: %s", pipeline, name, batch_id, "; ".join(changes)
    )


def conform(column: Column, batch: DataType, table: DataType) -> Column:
    """``column`` (of ``batch`` type) in the table's shape: nested fields by name, in the
    table's order, null where the batch has none; safe casts for narrower primitives."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if batch == table:
        return column
    if isinstance(batch, StructType) and isinstance(table, StructType):
        lowered = {f.name.lower(): f for f in batch.fields}
        parts = []
        for f in table.fields:
            source = lowered.get(f.name.lower())
            if source is None:
                parts.append(F.lit(None).cast(f.dataType).alias(f.name))
            else:
                parts.append(
                    conform(column.getField(source.name), source.dataType, f.dataType).alias(f.name)
                )
        return F.when(column.isNotNull(), F.struct(*parts))
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        element_batch, element_table = batch.elementType, table.elementType
        return F.transform(column, lambda e: conform(e, element_batch, element_table))
    if isinstance(batch, MapType) and isinstance(table, MapType):
        value_batch, value_table = batch.valueType, table.valueType
        return F.transform_values(column, lambda _, v: conform(v, value_batch, value_table))
    return column.cast(table)


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
        values = [conform(F.col(n), batch_types[n].dataType, f.dataType) for n in names]
        if not values:
            out.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif len(values) == 1:
            out.append(values[0].alias(f.name))
        else:
            out.append(F.coalesce(*values).alias(f.name))
    error = F.col(c.ERROR)
    for m in diff.mismatches:
        root = m.path.split(".")[0]
        if root not in batch_types:
            continue
        reason = m.describe(table_name)
        error = F.coalesce(
            error, F.when(F.col(root).isNotNull(), _error_struct(reason, F.col(root)))
        )
    for name in view.required:
        feeding = by_table.get(name) or []
        value = F.coalesce(*[F.col(n) for n in feeding]) if feeding else F.lit(None)
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


def _error_struct(reason: str, value: Column) -> Column:
    """A schema-stage error quoting the failing ``value`` as JSON."""
    from pyspark.sql import functions as F

    return _schema_error(reason, F.to_json(F.struct(value.alias("value"))))


def _schema_error(reason: str, detail: Column) -> Column:
    """A schema-stage error; its detail ``detail`` (JSON text, cut at 200 characters)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_SCHEMA).alias("stage"),
        F.lit(reason).alias("reason"),
        F.substring(detail, 1, 200).alias("detail"),
    ).cast(c.ERROR_DDL)
