"""A batch's columns against a live table: follow renames, evolve the schema.

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

The rows are then *conformed* to the table's shape, and those records marked, by
:mod:`~frazil.sink.conform`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil.config.table_settings import ResolvedTable
from frazil.decode.shapes import promotes
from frazil.errors import PipelineError
from frazil.jvm.classes import java_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
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
    #: The batch's top-level column holding the value (``path`` names the table's field,
    #: which an alias names otherwise, and a column's name may hold a dot).
    source: str = field(default="", compare=False)

    @property
    def column(self) -> str:
        """The batch's column whose records hold the value."""
        return self.source or self.path

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
    converted = java_class(jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(iceberg_schema)
    result = StructType.fromJson(json.loads(converted.json()))
    return result


def iceberg_schema(spark: SparkSession, schema: StructType) -> Any:
    """A PySpark ``StructType`` as an Iceberg schema (Java, fresh field ids)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java_type = spark._jsparkSession.parseDataType(schema.json())
    return java_class(jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(java_type)


def name_mapping_json(spark: SparkSession, schema: Any) -> str:
    """Iceberg's default name mapping of a schema, as the table property's JSON."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    mapping = java_class(jvm, "org.apache.iceberg.mapping.MappingUtil").create(schema)
    return str(java_class(jvm, "org.apache.iceberg.mapping.NameMappingParser").toJson(mapping))


@dataclass
class TableView:
    """The parts of a table's current metadata that matching needs, read once per schema id.

    Attributes:
        schema_id: The Iceberg schema id read.
        schema: The table's columns as Spark types (views of the same columns may share one
            object: not to be changed in place).
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
        parsed = json.loads(str(java_class(jvm, "org.apache.iceberg.SchemaParser").toJson(schema)))
        identifiers = (
            [str(n) for n in schema.identifierFieldNames()]
            if parsed.get("identifier-field-ids")
            else []
        )
        mapping = table.properties().get(NAME_MAPPING)
        return cls.parse(
            int(parsed.get("schema-id", schema.schemaId())),
            parsed,
            spark_schema(spark, schema),
            identifiers,
            None if mapping is None else str(mapping),
        )

    @classmethod
    def parse(
        cls,
        schema_id: int,
        parsed: dict[str, Any],
        schema: StructType,
        identifiers: list[str],
        mapping_text: str | None,
    ) -> TableView:
        """The view of a schema read as Iceberg's JSON (``parsed``), with its Spark type, its
        identifier fields' names and the table's name mapping (the property's text)."""
        ids = {str(f["name"]): int(f["id"]) for f in parsed["fields"]}
        required = [str(f["name"]) for f in parsed["fields"] if f["required"]]
        names: dict[str, int] = {}
        if mapping_text is not None:
            for entry in json.loads(mapping_text):
                if "field-id" in entry:
                    for name in entry.get("names", []):
                        names[str(name)] = int(entry["field-id"])
        for name, fid in ids.items():
            names.setdefault(name, fid)
        return cls(schema_id, schema, ids, names, required, mapping_text, frozenset(identifiers))

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
            diff.mismatches.extend(dataclasses.replace(p, source=f.name) for p in problems)
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
    if promotes(table, batch):
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
