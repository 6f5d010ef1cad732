"""Creating Iceberg tables from a pipeline's decoded schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frazil.config.models import PipelineConfig
from frazil.config.partitioning import PartitionField
from frazil.errors import PipelineError
from frazil.sink.iceberg import iceberg_catalog, identifier, namespace

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
    spark: SparkSession, catalog: str, pipeline: PipelineConfig, schema: StructType
) -> tuple[str, bool]:
    """Create the pipeline's table (and its namespace) if missing.

    Goes through Iceberg's catalog API in the driver JVM, as Spark's ``CREATE TABLE`` would
    (same schema conversion, partition spec and properties), without Spark SQL.

    Returns:
        The table's qualified name, and whether this call created it.

    Raises:
        PipelineError: The table exists but lacks columns the pipeline writes.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    name = qualified(catalog, pipeline.table)
    parts = pipeline.table.split(".")
    ice = iceberg_catalog(spark, catalog)
    table_id = identifier(spark, parts)
    ns = namespace(spark, parts[:-1])
    if not ice.namespaceExists(ns):
        try:
            ice.createNamespace(ns)
        except Exception as exc:  # another run created it meanwhile
            if "AlreadyExists" not in str(exc):
                raise
    # Columns are nullable, as in a CREATE TABLE without NOT NULL.
    java_type = spark._jsparkSession.parseDataType(_nullable(schema).json())
    iceberg_schema = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(java_type)
    if ice.tableExists(table_id):
        table = ice.loadTable(table_id)
        existing = {str(f.name()) for f in table.schema().columns()}
        missing = [f.name for f in schema.fields if f.name not in existing]
        if missing:
            # New optional columns (a newer registry schema, a new transform): added by name,
            # as Iceberg's union-by-name does; existing columns and their ids stay.
            try:
                table.updateSchema().unionByNameWith(iceberg_schema).commit()
            except Exception as exc:
                raise PipelineError(
                    f"pipeline {pipeline.name!r}: table {pipeline.table} lacks column(s) "
                    f"{', '.join(missing)} and adding them failed: "
                    f"{str(exc).splitlines()[0]}"
                ) from None
        return name, False
    spec = jvm.org.apache.iceberg.PartitionSpec.builderFor(iceberg_schema)
    for field in pipeline.partition_fields():
        spec = _add_partition(spec, field)
    properties = jvm.java.util.HashMap()
    for key, value in {**DEFAULT_TABLE_PROPERTIES, **pipeline.table_properties}.items():
        properties.put(key, value)
    try:
        ice.createTable(table_id, iceberg_schema, spec.build(), properties)
    except Exception as exc:  # created by another run between the check and here
        if "AlreadyExists" not in str(exc):
            raise
        return name, False
    return name, True


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
