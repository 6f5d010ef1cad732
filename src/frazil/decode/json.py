"""JSON decoding with Spark's ``from_json``: the hot path stays in the JVM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.models import PipelineConfig
from frazil.config.types import to_spark_ddl
from frazil.decode import columns as c
from frazil.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def schema_from_config(pipeline: PipelineConfig) -> StructType:
    """The declared ``schema:`` as a Spark ``StructType`` (all fields nullable)."""
    from pyspark.sql.types import StructType

    assert pipeline.schema_ is not None
    ddl = ", ".join(f"`{name}` {to_spark_ddl(t)}" for name, t in pipeline.schema_.items())
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def infer_schema(
    spark: SparkSession, batch_options: dict[str, str], pipeline: PipelineConfig, sample: int
) -> StructType:
    """Infer a schema from up to ``sample`` records at the start of the topics.

    Raises:
        PipelineError: The topics hold no records to infer from.
    """
    reader = spark.read.format("kafka")
    for key, value in batch_options.items():
        reader = reader.option(key, value)
    raw = reader.option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
    values = [
        row[0]
        for row in raw.selectExpr("CAST(value AS STRING)")
        .where("value IS NOT NULL")
        .limit(sample)
        .collect()
    ]
    if not values:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: cannot infer a schema because its topics hold no "
            f"records yet; declare pipelines[].schema in the config"
        )
    options = {"inferTimestamp": "true", "prefersDecimal": "false"}
    if pipeline.timestamp_format:
        options["timestampFormat"] = pipeline.timestamp_format
    inferred = spark.read.options(**options).json(spark.sparkContext.parallelize(values, 1))
    schema: StructType = inferred.schema
    names = [f.name for f in schema.fields if f.name != "_corrupt_record"]
    if not names:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: the sampled records are not JSON objects; "
            "declare pipelines[].schema in the config"
        )
    from pyspark.sql.types import StructType as _StructType

    return _StructType([f for f in schema.fields if f.name != "_corrupt_record"])


def decode_json(raw: DataFrame, schema: StructType, pipeline: PipelineConfig) -> DataFrame:
    """Turn raw Kafka rows into the schema's columns plus frazil's bookkeeping columns.

    Malformed records are kept, not dropped: their raw text lands in the internal corrupt
    column so the batch handler can name their topic/partition/offset.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    with_corrupt = StructType([*schema.fields, StructField(c.CORRUPT, StringType(), True)])
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": c.CORRUPT}
    if pipeline.timestamp_format:
        options["timestampFormat"] = pipeline.timestamp_format
    parsed = F.from_json(F.col("value").cast("string"), with_corrupt, options)
    metadata = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "offset": F.col("offset"),
        "timestamp": F.col("timestamp"),
        "key": F.col("key").cast("string"),
        "headers": F.col("headers"),
    }
    return raw.select(
        *[parsed[f.name].alias(f.name) for f in schema.fields],
        *[metadata[m].alias(f"{c.METADATA_PREFIX}{m}") for m in pipeline.kafka_metadata],
        F.col("topic").alias(c.TOPIC),
        F.col("partition").alias(c.PARTITION),
        F.col("offset").alias(c.OFFSET),
        F.unix_millis(F.col("timestamp")).alias(c.TIMESTAMP_MS),
        parsed[c.CORRUPT].alias(c.CORRUPT),
        F.col("value").isNull().alias(c.TOMBSTONE),
    )
