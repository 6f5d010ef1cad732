"""Creating Iceberg tables from a pipeline's decoded schema."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from frazil.config.partitioning import PartitionField
from frazil.config.table_settings import ResolvedTable
from frazil.config.writes import MERGE_ON_READ_PROPERTIES
from frazil.errors import PipelineError
from frazil.jvm.classes import java_class
from frazil.sink.iceberg import iceberg_catalog, identifier, namespace

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

#: Properties of tables frazil creates; ``table_properties`` in the config override them.
DEFAULT_TABLE_PROPERTIES: dict[str, str] = {
    "format-version": "2",
    # Streaming batches are small and already spread over tasks by Kafka partition: skip the
    # per-batch shuffle (hash distribution) and the local sort, write each partition's rows
    # through fan-out writers instead.
    "write.distribution-mode": "none",
    "write.spark.fanout.enabled": "true",
    # One commit per trigger adds a metadata.json each time: keep the folder bounded.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
}


def qualified(catalog: str, table: str) -> str:
    """``catalog.namespace.table``, backquoted part by part."""
    return ".".join(f"`{part}`" for part in [catalog, *table.split(".")])


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the fully qualified table exists."""
    return bool(spark.catalog.tableExists(name.replace("`", "")))


def ensure_table(
    spark: SparkSession,
    catalog: str,
    settings: ResolvedTable,
    schema: StructType,
    pipeline: str,
) -> tuple[str, bool]:
    """Create a table (and its namespace) if missing, with the table's settings.

    Goes through Iceberg's catalog API in the driver JVM, as Spark's ``CREATE TABLE`` would
    (same schema conversion, partition spec, sort order and properties), without Spark SQL.
    Columns are optional, except identifier fields, which Iceberg requires to be required.
    Tables get Iceberg's default name mapping, so that renamed columns keep their former
    names as aliases (see :mod:`frazil.sink.evolution`); an existing table without one is
    given one.

    Returns:
        The table's qualified name, and whether this call created it.

    Raises:
        PipelineError: A partition, sort or identifier column is not in the schema.
    """
    from frazil.sink.evolution import NAME_MAPPING, name_mapping_json

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    name = qualified(catalog, settings.name)
    parts = settings.name.split(".")
    ice = iceberg_catalog(spark, catalog)
    table_id = identifier(spark, parts)
    if ice.tableExists(table_id):
        table = ice.loadTable(table_id)
        if table.properties().get(NAME_MAPPING) is None:
            mapping = name_mapping_json(spark, table.schema())
            table.updateProperties().set(NAME_MAPPING, mapping).commit()
        warn_if_laid_out_otherwise(table, settings)
        return name, False
    ensure_namespace(spark, catalog, parts[:-1])
    iceberg_schema, built_spec, built_order, properties = table_layout(
        spark, settings, schema, pipeline
    )
    try:
        created = (
            ice.buildTable(table_id, iceberg_schema)
            .withPartitionSpec(built_spec)
            .withSortOrder(built_order)
            .withProperties(properties)
            .create()
        )
    except Exception as exc:  # created by another run between the check and here
        if "AlreadyExists" not in str(exc):
            raise PipelineError(
                f"pipeline {pipeline!r}: cannot create table {settings.name}: {_first_line(exc)}"
            ) from None
        return name, False
    # The catalog gives the columns fresh ids on creation: the mapping is made from those.
    mapping = name_mapping_json(spark, created.schema())
    created.updateProperties().set(NAME_MAPPING, mapping).commit()
    log.info("%s: created table %s", pipeline, settings.name)
    return name, True


def ensure_namespace(spark: SparkSession, catalog: str, parts: list[str]) -> None:
    """Create the namespace if missing (one another run creates meanwhile is fine)."""
    ice = iceberg_catalog(spark, catalog)
    ns = namespace(spark, parts)
    if not ice.namespaceExists(ns):
        try:
            ice.createNamespace(ns)
        except Exception as exc:  # another run created it meanwhile
            if "AlreadyExists" not in str(exc):
                raise


def table_layout(
    spark: SparkSession, settings: ResolvedTable, schema: StructType, pipeline: str
) -> tuple[Any, Any, Any, Any]:
    """What a new table is created with (Java objects): its Iceberg schema (optional columns,
    identifier fields required), partition spec, sort order and properties (a map).

    Raises:
        PipelineError: A partition, sort or identifier column is not in the schema.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    iceberg_schema = _iceberg_schema(spark, _aliased(schema, settings.aliases), settings, pipeline)
    try:
        spec = java_class(jvm, "org.apache.iceberg.PartitionSpec").builderFor(iceberg_schema)
        for field in settings.partition_fields():
            spec = _add_partition(spec, field)
        order = java_class(jvm, "org.apache.iceberg.SortOrder").builderFor(iceberg_schema)
        nulls = java_class(jvm, "org.apache.iceberg.NullOrder")
        for sort in settings.sort_fields():
            null_order = nulls.NULLS_FIRST if sort.nulls_first else nulls.NULLS_LAST
            order = (
                order.desc(sort.column, null_order)
                if sort.descending
                else order.asc(sort.column, null_order)
            )
        built_spec, built_order = spec.build(), order.build()
    except Exception as exc:  # py4j wraps Iceberg's ValidationException
        raise PipelineError(
            f"pipeline {pipeline!r}: cannot create table {settings.name}: "
            f"{_first_line(exc)} (columns: {', '.join(f.name for f in schema.fields)})"
        ) from None
    properties = java_class(jvm, "java.util.HashMap")()
    defaults = dict(DEFAULT_TABLE_PROPERTIES)
    if has_variant(schema):
        # Iceberg's variant type came with format version 3.
        defaults["format-version"] = VARIANT_FORMAT_VERSION
    for key, value in {**defaults, **settings.table_properties}.items():
        properties.put(key, value)
    return iceberg_schema, built_spec, built_order, properties


#: The format version of a new table with a ``variant`` column (the first that has the type).
VARIANT_FORMAT_VERSION = "3"


def has_variant(data_type: DataType) -> bool:
    """Whether ``data_type`` is or holds a ``variant`` (in a struct, an array, a map)."""
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    if isinstance(data_type, VariantType):
        return True
    if isinstance(data_type, StructType):
        return any(has_variant(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return has_variant(data_type.elementType)
    if isinstance(data_type, MapType):
        return has_variant(data_type.valueType)
    return False


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    # py4j: "An error occurred while calling o123.create.\n: java...Exception: message"
    for candidate in text.splitlines():
        if candidate.startswith(": ") or "Exception: " in candidate:
            return candidate.split("Exception: ", 1)[-1].strip()
    return line


def _aliased(schema: StructType, aliases: dict[str, str]) -> StructType:
    """The columns a new table gets: source fields under their ``aliases`` column names,
    several fields of one column once."""
    from pyspark.sql.types import StructField, StructType

    fields: dict[str, StructField] = {}
    for f in schema.fields:
        name = aliases.get(f.name, f.name)
        if name.lower() not in {n.lower() for n in fields}:
            fields[name] = StructField(name, f.dataType, f.nullable, f.metadata)
    return StructType(list(fields.values()))


def _iceberg_schema(
    spark: SparkSession, schema: StructType, settings: ResolvedTable, pipeline: str
) -> Any:
    """The Iceberg schema of a new table: optional columns, identifier fields required."""
    from pyspark.sql.types import StructField, StructType

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    identifiers = settings.identifier_fields
    columns = {f.name for f in schema.fields}
    for ident in identifiers:
        if ident.split(".")[0] not in columns:
            raise PipelineError(
                f"pipeline {pipeline!r}: identifier field {ident!r} of table {settings.name} "
                f"is not a column (columns: {', '.join(sorted(columns))})"
            )
    top = {i for i in identifiers if "." not in i}
    shaped = StructType(
        [StructField(f.name, _nullable(f.dataType), f.name not in top) for f in schema.fields]
    )
    java_type = spark._jsparkSession.parseDataType(shaped.json())
    converted = java_class(jvm, "org.apache.iceberg.spark.SparkSchemaUtil").convert(java_type)
    if not identifiers:
        return converted
    ids = java_class(jvm, "java.util.HashSet")()
    for ident in identifiers:
        ids.add(converted.findField(ident).fieldId())
    return java_class(jvm, "org.apache.iceberg.Schema")(converted.columns(), ids)


#: Iceberg's names of the time transforms (``PartitionField.transform().toString()``) and
#: the config's.
_TIME_TRANSFORMS = {"year": "years", "month": "months", "day": "days", "hour": "hours"}


def _table_spec(table: Any) -> list[tuple[str, str]]:
    """A Java table's current partition spec as ``(Iceberg's transform, source column)``
    pairs, the void fields a dropped partition field leaves in a v1 table apart."""
    schema = table.schema()
    found = []
    for field in table.spec().fields():
        transform = str(field.transform().toString())
        if transform != "void":
            found.append((transform, str(schema.findColumnName(field.sourceId()))))
    return found


def warn_if_laid_out_otherwise(table: Any, settings: ResolvedTable, *, spec: bool = True) -> None:
    """Warn of each way an existing table (Java) is laid out otherwise than the config would
    create it (:func:`layout_differences`)."""
    for differs in layout_differences(table, settings, spec=spec):
        log.warning("table %s: %s", settings.name, differs)


def layout_differences(table: Any, settings: ResolvedTable, *, spec: bool = True) -> list[str]:
    """How an existing table (Java) is laid out otherwise than the config would create it:
    partitioned otherwise than its ``partition_by`` (:func:`spec_difference`; ``spec``: look
    at it), or, written by key, without frazil's merge-on-read properties or identifier
    fields (:func:`merge_difference`). ``frazil run`` warns of them, ``frazil plan`` shows
    them."""
    found = [spec_difference(_table_spec(table), settings.partition_fields()) if spec else None]
    if settings.write.merges:
        # Only the properties compared: a table's map holds its name mapping (large).
        java = table.properties()
        have = {k: str(v) for k in MERGE_ON_READ_PROPERTIES if (v := java.get(k)) is not None}
        identifiers = [str(n) for n in table.schema().identifierFieldNames()]
        # The format version matters only to a table told to turn merge-on-read.
        turns = any(have.get(k, "").lower() != "merge-on-read" for k in MERGE_ON_READ_PROPERTIES)
        version = int(table.operations().current().formatVersion()) if turns else 2
        found.append(merge_difference(have, identifiers, settings, version))
    return [differs for differs in found if differs is not None]


#: Iceberg's row-level write mode when a table does not set one.
_DEFAULT_ROW_LEVEL_MODE = "copy-on-write"


def merge_difference(
    properties: dict[str, str],
    identifiers: list[str],
    settings: ResolvedTable,
    format_version: int = 2,
) -> str | None:
    """Why an existing table written by key (upsert, CDC) is not laid out as frazil would
    create it for that (``settings``: merge-on-read modes, its identifier fields), or None
    when it is. A table created for appends and then written by key keeps its own: Iceberg's
    copy-on-write, where a batch's MERGE rewrites the data files it touches.

    Args:
        properties: The table's row-level mode properties (those it sets).
        identifiers: The table's identifier fields.
        format_version: The table's format version (merge-on-read needs 2 or more).
    """
    wanted = sorted(
        k
        for k in MERGE_ON_READ_PROPERTIES
        if settings.table_properties.get(k, "").lower() == "merge-on-read"
        and properties.get(k, _DEFAULT_ROW_LEVEL_MODE).lower() != "merge-on-read"
    )
    missing_ids = sorted(set(settings.identifier_fields) - set(identifiers))
    if not wanted and not missing_ids:
        return None
    said = []
    if wanted:
        modes = sorted({properties.get(k, _DEFAULT_ROW_LEVEL_MODE).lower() for k in wanted})
        said.append(
            f"its {', '.join(wanted)} {'is' if len(wanted) == 1 else 'are'} {', '.join(modes)}"
            + (
                " (each batch's MERGE rewrites the data files it touches, where a table frazil "
                "creates for upsert/CDC writes deletes)"
                if "write.merge.mode" in wanted
                else ""
            )
        )
    if missing_ids:
        # Not offered as a step: Iceberg takes only required columns as identifier fields,
        # and an existing optional column cannot be made required.
        said.append(
            f"its identifier fields are {', '.join(identifiers) or 'none'}, the config's "
            f"{', '.join(settings.identifier_fields)} (frazil merges by the config's key; "
            "readers that go by identifier fields do not see it)"
        )
    found = (
        f"written by key ({settings.write.mode}) but not created for it: "
        + "; ".join(said)
        + ". The rows are right either way: table properties and identifier fields apply when "
        "frazil creates a table, and the table keeps its own"
    )
    if wanted:
        # Row-level deletes need format version 2: merge-on-read on a version 1 table fails.
        upgrade = ["'format-version'='2'"] if format_version < 2 else []
        listed = ", ".join(upgrade + [f"'{k}'='merge-on-read'" for k in wanted])
        found += (
            ". To write deletes as frazil's tables do (e.g. through frazil sql): "
            f"ALTER TABLE {settings.name} SET TBLPROPERTIES ({listed})"
        )
    return found


def spec_difference(have: list[tuple[str, str]], want: list[PartitionField]) -> str | None:
    """Why an existing table's partitioning (``have``: Iceberg's transform names, ``day``,
    ``bucket[16]``) is not the config's ``partition_by`` (``want``), or None when it is.
    ``partition_by`` applies when frazil creates a table: an edit later would otherwise go
    unnoticed, the table and the config disagreeing."""

    def iceberg(field: PartitionField) -> str:
        for name, configured in _TIME_TRANSFORMS.items():
            if field.transform == configured:
                return name
        return field.transform if field.width is None else f"{field.transform}[{field.width}]"

    def sql(transform: str, column: str) -> str:
        if transform == "identity":
            return column
        head, _, width = transform.partition("[")
        head = _TIME_TRANSFORMS.get(head, head)
        return f"{head}({width.rstrip(']')}, {column})" if width else f"{head}({column})"

    wanted = [(iceberg(f), f.column) for f in want]
    if wanted == have:
        return None
    shown_have = ", ".join(sql(t, c) for t, c in have) or "nothing (unpartitioned)"
    shown_want = ", ".join(sql(t, c) for t, c in wanted) or "nothing"
    return (
        f"it is partitioned by {shown_have}, the config's partition_by says {shown_want}: "
        "partition_by applies when frazil creates a table, and the table keeps its own. To "
        "change it, use Iceberg's ALTER TABLE … ADD / DROP / REPLACE PARTITION FIELD (e.g. "
        "through frazil sql): new data is then written by the new spec"
    )


def _add_partition(spec: Any, field: PartitionField) -> Any:
    """Add one transform to a Java ``PartitionSpec.Builder`` (Spark's own field names)."""
    if field.transform == "identity":
        return spec.identity(field.column)
    if field.transform == "bucket":
        return spec.bucket(field.column, field.width)
    if field.transform == "truncate":
        return spec.truncate(field.column, field.width)
    method = {"years": "year", "months": "month", "days": "day", "hours": "hour"}[field.transform]
    return getattr(spec, method)(field.column)


def _nullable(data_type: DataType) -> Any:
    """``data_type`` with every field, element and value nullable."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in data_type])
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type
