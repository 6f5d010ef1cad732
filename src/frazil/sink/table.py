"""Creating Iceberg tables from a pipeline's decoded schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.models import PipelineConfig
from frazil.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

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

    Returns:
        The table's qualified name, and whether this call created it.

    Raises:
        PipelineError: The table exists but lacks columns the pipeline writes.
    """
    name = qualified(catalog, pipeline.table)
    namespace = qualified(catalog, pipeline.table.rsplit(".", 1)[0])
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    if table_exists(spark, name):
        existing = {f.name for f in spark.table(name).schema.fields}
        missing = [f.name for f in schema.fields if f.name not in existing]
        if missing:
            raise PipelineError(
                f"pipeline {pipeline.name!r}: table {pipeline.table} has no column(s) "
                f"{', '.join(missing)}; schema evolution is not enabled for it"
            )
        return name, False
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    partitioning = ", ".join(p.to_spark_sql() for p in pipeline.partition_fields())
    properties = {**DEFAULT_TABLE_PROPERTIES, **pipeline.table_properties}
    props_sql = ", ".join(
        f"'{k}' = '{v.replace(chr(39), chr(39) * 2)}'" for k, v in sorted(properties.items())
    )
    ddl = f"CREATE TABLE IF NOT EXISTS {name} ({columns}) USING iceberg"
    if partitioning:
        ddl += f" PARTITIONED BY ({partitioning})"
    ddl += f" TBLPROPERTIES ({props_sql})"
    spark.sql(ddl)
    return name, True
