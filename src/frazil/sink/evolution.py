"""A batch's columns against a live table: follow renames, evolve the schema.

Before each write, the batch's user columns are matched to the table's columns:

* **by field id, not position or current name**, at every depth (top-level columns, fields
  of structs, of list elements and of map values). A source field keeps its column when a
  user renames it (``ALTER TABLE … RENAME COLUMN``, ``… RENAME COLUMN payload.a TO alpha``):
  frazil gives its tables Iceberg's default name mapping (``schema.name-mapping.default``),
  which keeps every former name of a field id as an alias. ``aliases`` in the config add
  source names of their own (top-level columns). A field a user dropped stays dropped: its
  source field is no longer written.
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
import functools
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
        dropped: Batch columns whose field a user dropped from the table (not written), and
            nested fields so dropped, by path (``payload.c``, ``items.element.c``).
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


@dataclass(frozen=True)
class FieldNames:
    """The names of one struct's fields by field id, and of the structs nested in them.

    The batch's fields carry the names the records have, which may be former names of the
    table's fields (a user renamed them) or names of fields a user dropped: matching them by
    name alone would add them back as new fields, with new ids, and leave the renamed ones
    empty.

    Attributes:
        ids: Current field name → field id.
        names: Every name the name mapping knows for a field id of this struct (former names,
            and those of dropped fields, too) → that id.
        nested: Current field name → the names of the struct it holds, itself or as the
            element of a list or the value of a map (at any depth of lists and maps).
    """

    ids: dict[str, int]
    names: dict[str, int]
    nested: dict[str, FieldNames] = field(default_factory=dict)

    @classmethod
    def parse(cls, fields: list[dict[str, Any]], mapping: list[dict[str, Any]]) -> FieldNames:
        """The names of a struct's fields (``fields``: Iceberg's JSON of them) with the name
        mapping's entries for them (``mapping``: empty without a name mapping)."""
        ids = {str(f["name"]): int(f["id"]) for f in fields}
        names: dict[str, int] = {}
        entries: dict[int, list[dict[str, Any]]] = {}
        for entry in mapping:
            if "field-id" in entry:
                entries[int(entry["field-id"])] = entry.get("fields") or []
                for name in entry.get("names", []):
                    names[str(name)] = int(entry["field-id"])
        for name, fid in ids.items():
            names.setdefault(name, fid)
        nested: dict[str, FieldNames] = {}
        for f in fields:
            inner = _struct_names(f["type"], entries.get(int(f["id"]), []))
            if inner is not None:
                nested[str(f["name"])] = inner
        return cls(ids, names, nested)

    def field_for(self, name: str) -> str | None:
        """The current field of a source name, or None if its field was dropped.

        Raises:
            KeyError: The name is new to the struct.
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

    def former(
        self, path: tuple[str, ...] = ()
    ) -> frozenset[tuple[tuple[str, ...], str, str | None]]:
        """The names known besides the current ones, at every depth: (the current names of
        the fields leading to their struct, ``()`` at the top; the name; its field's current
        name, None if dropped)."""
        current = {v: k for k, v in self.ids.items()}
        out = {(path, n, current.get(fid)) for n, fid in self.names.items() if n not in self.ids}
        for name, inner in self.nested.items():
            out |= inner.former((*path, name))
        return frozenset(out)


def _struct_names(kind: Any, mapping: list[dict[str, Any]]) -> FieldNames | None:
    """The names of the struct a field of Iceberg type ``kind`` (its JSON) holds, through
    lists and map values, with the name mapping's entries nested in the field's; None if it
    holds none (a primitive, a map's key is never evolved)."""
    if not isinstance(kind, dict):
        return None
    if kind["type"] == "struct":
        return FieldNames.parse(kind["fields"], mapping)
    entries = {int(e["field-id"]): e.get("fields") or [] for e in mapping if "field-id" in e}
    if kind["type"] == "list":
        return _struct_names(kind["element"], entries.get(int(kind["element-id"]), []))
    if kind["type"] == "map":
        return _struct_names(kind["value"], entries.get(int(kind["value-id"]), []))
    return None


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
        nested: Top-level column name → the names of the struct it holds, by field id
            (:attr:`FieldNames.nested`); a column missing here matches its fields by name.
    """

    schema_id: int
    schema: StructType
    ids: dict[str, int]
    names: dict[str, int]
    required: list[str]
    mapping_text: str | None = None
    identifiers: frozenset[str] = frozenset()
    nested: dict[str, FieldNames] = field(default_factory=dict)

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
        required = [str(f["name"]) for f in parsed["fields"] if f["required"]]
        mapping = [] if mapping_text is None else json.loads(mapping_text)
        top = FieldNames.parse(parsed["fields"], mapping)
        return cls(
            schema_id,
            schema,
            top.ids,
            top.names,
            required,
            mapping_text,
            frozenset(identifiers),
            top.nested,
        )

    @functools.cached_property
    def former(self) -> frozenset[tuple[tuple[str, ...], str, str | None]]:
        """The names the name mapping knows besides the current ones, at every depth
        (:meth:`FieldNames.former`): views of the same columns and the same former names
        match any batch alike."""
        return FieldNames(self.ids, self.names, self.nested).former()

    def column_for(self, name: str) -> str | None:
        """The current column of a source name, or None if its field was dropped.

        Raises:
            KeyError: The name is new to the table.
        """
        return FieldNames(self.ids, self.names).field_for(name)


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
        merged, changes, problems = _merge(
            column,
            f.dataType,
            target.dataType,
            evolve,
            view.nested.get(column),
            dropped=diff.dropped,
        )
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
    path: str,
    batch: DataType,
    table: DataType,
    evolve: bool,
    names: FieldNames | None = None,
    *,
    dropped: list[str] | None = None,
) -> tuple[DataType, list[str], list[Mismatch]]:
    """The table type that takes both (table-first), the changes it needs, or mismatches.

    ``names``: the table's struct fields by field id (a field a user renamed takes the batch's
    field of its former name, one a user dropped is not added back; its path goes to
    ``dropped``); None: matched by name.
    """
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(batch, StructType) and isinstance(table, StructType):
        fields = {f.name: f for f in table.fields}
        merged_fields = list(table.fields)
        changes: list[str] = []
        problems: list[Mismatch] = []
        for f in batch.fields:
            try:
                name = table_field(names, table, f.name)
            except KeyError:  # new to the table's struct
                added = _added(merged_fields, f.name)
                if added is None:
                    if evolve:
                        merged_fields.append(StructField(f.name, f.dataType, True))
                        changes.append(f"add field {path}.{f.name} {f.dataType.simpleString()}")
                    else:
                        problems.append(
                            Mismatch(
                                f"{path}.{f.name}",
                                f.dataType.simpleString(),
                                "-",
                                "not in the table",
                            )
                        )
                    continue
                name = added  # another batch field added it just now (another case)
            if name is None:  # a user dropped it: never added back
                if dropped is not None:
                    dropped.append(f"{path}.{f.name}")
                continue
            index = next(i for i, g in enumerate(merged_fields) if g.name == name)
            # Several batch fields may feed one (a former and a current name, two cases):
            # each merges into what the ones before it made, so none undoes another's change.
            sub, sub_changes, sub_problems = _merge(
                f"{path}.{name}",
                f.dataType,
                merged_fields[index].dataType,
                evolve,
                None if names is None or name not in fields else names.nested.get(name),
                dropped=dropped,
            )
            problems.extend(sub_problems)
            changes.extend(sub_changes)
            # Nullability stays the table's: a merge must not relax a field silently.
            merged_fields[index] = StructField(name, sub, merged_fields[index].nullable)
        return StructType(merged_fields), changes, problems
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        # The element's struct (if any) is the one ``names`` describes.
        sub, changes, problems = _merge(
            f"{path}.element",
            batch.elementType,
            table.elementType,
            evolve,
            names,
            dropped=dropped,
        )
        return ArrayType(sub, table.containsNull), changes, problems
    if isinstance(batch, MapType) and isinstance(table, MapType):
        if not _fits(batch.keyType, table.keyType):
            return table, [], [_mismatch(path, batch, table)]
        sub, changes, problems = _merge(
            f"{path}.value", batch.valueType, table.valueType, evolve, names, dropped=dropped
        )
        return MapType(table.keyType, sub, table.valueContainsNull), changes, problems
    if _fits(batch, table):
        return table, [], []
    if promotes(table, batch):
        if not evolve:
            return table, [], [_mismatch(path, batch, table, "schema_evolution is freeze")]
        change = f"widen {path} {table.simpleString()} to {batch.simpleString()}"
        return batch, [change], []
    return table, [], [_mismatch(path, batch, table)]


def _added(merged: list[StructField], name: str) -> str | None:
    """The field of ``merged`` (a struct's fields as a merge goes) that an earlier batch field
    added under ``name`` (case-insensitively, as the table's fields match), or None. Called
    for a name the table's struct does not know, so a match is a field added in this merge."""
    lowered = name.lower()
    return next((f.name for f in merged if f.name.lower() == lowered), None)


def table_field(names: FieldNames | None, table: StructType, name: str) -> str | None:
    """The field of a table's struct (``table``) a batch's field ``name`` goes to: by field id
    through ``names`` (:meth:`FieldNames.field_for`), or by name (case-insensitively) when
    they are not known; None if a user dropped it.

    Raises:
        KeyError: The field is new to the struct.
    """
    if names is not None:
        return names.field_for(name)
    current = table.fieldNames()
    if name in current:
        return name
    lowered = {n.lower(): n for n in current}
    if name.lower() in lowered:
        return lowered[name.lower()]
    raise KeyError(name)


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
