"""The dead-letter format: a dead letter's columns, and the dead-letter table's schema,
partitioning and properties (:mod:`frazil.sink.dead_letters`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.table_settings import ResolvedTable
from frazil.jvm.classes import java_class
from frazil.jvm.literals import string_map

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructType

#: The dead-letter table's columns, as Spark DDL.
DLQ_SCHEMA_DDL = (
    "key binary, value binary, headers array<struct<key:string,value:binary>>, "
    "topic string, partition int, offset bigint, timestamp timestamp, "
    "stage string, reason string, detail string, error_class string, "
    "pipeline string, failed_at timestamp, target_table string"
)
#: The dead-letter table's string columns added since its first version, as Iceberg adds them
#: to an existing table (at the end, optional).
DLQ_ADDED_COLUMNS = ("target_table",)
#: The column naming the table a dead letter failed for (null: it failed before routing).
TARGET_TABLE = "target_table"
#: Dead-letter tables are partitioned by day of failure.
DLQ_PARTITIONING = ["days(failed_at)"]

#: The error class named for each stage (what failed, in frazil's terms).
ERROR_CLASSES = {
    c.STAGE_DECODE: "DecodeError",
    c.STAGE_TRANSFORM: "TransformError",
    c.STAGE_ROUTE: "RouteError",
    c.STAGE_SCHEMA: "SchemaError",
}


def dlq_schema() -> StructType:
    """The dead-letter table's schema."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(DLQ_SCHEMA_DDL)
    assert isinstance(schema, StructType)
    return schema


#: A dead-letter table's own properties. A replay deletes exactly the rows it read (their
#: position and failure time); the live run appends every batch meanwhile. Under Iceberg's
#: default (serializable) isolation each of those appends fails the delete's MERGE ("found
#: conflicting files"), and a busy pipeline would make every replay give up. Snapshot
#: isolation checks the delete against concurrent deletes only, which is exact here: rows
#: appended meanwhile are never among those it matches.
DLQ_PROPERTIES = {
    "write.merge.isolation-level": "snapshot",
    "write.delete.isolation-level": "snapshot",
}


def dlq_settings(name: str) -> ResolvedTable:
    """How a dead-letter table is created: partitioned by day of failure."""
    return ResolvedTable(
        name=name, partition_by=list(DLQ_PARTITIONING), table_properties=dict(DLQ_PROPERTIES)
    )


def upgrade_dlq_table(spark: SparkSession, table: Any) -> None:
    """Add the columns of :data:`DLQ_ADDED_COLUMNS` that a dead-letter table (a Java Iceberg
    ``Table``) was created without, in one schema change (rows written before read null), and
    set the :data:`DLQ_PROPERTIES` it lacks."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    current = table.properties()
    lacking = {k: v for k, v in DLQ_PROPERTIES.items() if current.get(k) != v}
    if lacking:
        update_props = table.updateProperties()
        for key, value in lacking.items():
            update_props = update_props.set(key, value)
        update_props.commit()
    names = {str(f.name()) for f in table.schema().columns()}
    missing = [name for name in DLQ_ADDED_COLUMNS if name not in names]
    if not missing:
        return
    update = table.updateSchema()
    for name in missing:
        update = update.addColumn(
            name, java_class(jvm, "org.apache.iceberg.types.Types").StringType.get()
        )
    update.commit()


def dead_letter_columns(
    pipeline: str, error: Column, has_headers: bool, table: str | Column | None = None
) -> list[Column]:
    """The dead-letter row of a batch row whose error is ``error`` (raw columns kept).

    Args:
        table: The table the record failed for (its config name, or a column holding it);
            None: it failed before routing (decode, transform, route), for every table it
            would go to.
    """
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import functions as F

    classes = string_map(ERROR_CLASSES)
    headers = (
        F.col(c.HEADERS)
        if has_headers
        else F.lit(None).cast("array<struct<key:string,value:binary>>")
    )
    return [
        F.col(c.KEY).alias("key"),
        F.col(c.VALUE).alias("value"),
        headers.alias("headers"),
        F.col(c.TOPIC).alias("topic"),
        F.col(c.PARTITION).cast("int").alias("partition"),
        F.col(c.OFFSET).cast("long").alias("offset"),
        F.timestamp_millis(F.col(c.TIMESTAMP_MS)).alias("timestamp"),
        error["stage"].alias("stage"),
        c.quoted_text(error["reason"]).alias("reason"),
        c.quoted_text(error["detail"]).alias("detail"),
        F.coalesce(classes[error["stage"]], F.lit("FrazilError")).alias("error_class"),
        F.lit(pipeline).alias("pipeline"),
        F.current_timestamp().alias("failed_at"),
        (table if isinstance(table, SparkColumn) else F.lit(table))
        .cast("string")
        .alias("target_table"),
    ]
