"""A JSON pipeline's schema when no JSON Schema states it: its declared ``name: type``
fields, or one inferred from a sample of its topics' values.

The sample is read as text (:func:`json_text`: without a Schema Registry wire-format header),
as :mod:`frazil.decode.json`'s decoders read each record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.config.types import to_spark_ddl
from frazil.decode.shapes import in_record_order
from frazil.errors import PipelineError
from frazil.source.kafka import sample_topics

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructType

#: Records sampled to infer a schema.
INFER_SAMPLE = 1000
#: Records sampled at least from each partition (a topic per source table: each one's fields).
SAMPLE_MINIMUM = 20


def schema_from_fields(fields: dict[str, str]) -> StructType:
    """Declared ``name: type`` fields as a Spark ``StructType`` (all fields nullable)."""
    from pyspark.sql.types import StructType

    ddl = ", ".join(f"`{name}` {to_spark_ddl(t)}" for name, t in fields.items())
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def schema_from_config(pipeline: PipelineConfig) -> StructType:
    """The declared ``schema:`` as a Spark ``StructType`` (all fields nullable)."""
    assert pipeline.value.schema_ is not None
    return schema_from_fields(pipeline.value.schema_)


def json_text(data: Column) -> Column:
    """The JSON text of a value, without a Schema Registry wire-format header."""
    from pyspark.sql import functions as F

    # startswith compares in place; substring would copy a byte array per record.
    header = F.startswith(data, F.lit(b"\x00"))
    return F.when(header, F.substring(data, 6, 2**31 - 1)).otherwise(data).cast("string")


def sample_values(
    spark: SparkSession, batch_options: dict[str, str], sample: int, column: str = "value"
) -> list[str]:
    """The JSON text of about ``sample`` non-null records at the start of the topics, taken
    from every partition (:func:`~frazil.source.kafka.sample_topics`)."""
    values = sample_topics(spark, batch_options, column, sample, SAMPLE_MINIMUM)
    return [_text(value) for value in values]


def _text(value: bytes) -> str:
    # As json_text reads a record: without a wire-format header, undecodable bytes replaced.
    return (value[5:] if value[:1] == b"\x00" else value).decode("utf-8", "replace")


def infer_schema(
    spark: SparkSession,
    batch_options: dict[str, str],
    pipeline: PipelineConfig,
    sample: int = INFER_SAMPLE,
    column: str = "value",
) -> StructType:
    """Infer a schema from up to ``sample`` records at the start of the topics.

    Raises:
        PipelineError: The topics hold no records to infer from.
    """
    from pyspark.sql.types import StructType

    values = sample_values(spark, batch_options, sample, column)
    what = "key_schema" if column == "key" else "schema"
    if not values:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: cannot infer a schema because its topics hold no "
            f"records yet; declare pipelines[].{what} in the config"
        )
    # Only objects: Spark's reader takes a top-level array's elements as rows, and would
    # infer a schema that no record of arrays fits (each one a dead letter).
    objects = [v for v in values if v.lstrip(" \t\r\n")[:1] == "{"]
    instead = f"declare pipelines[].{what}, or land each value whole with variant: <column>"
    if not objects:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: cannot infer a schema: none of the {len(values)} "
            f"sampled records is a JSON object ({_kinds(values)}), and a JSON object's fields "
            f"are what become columns; {instead}"
        )
    options = {"inferTimestamp": "true", "prefersDecimal": "false"}
    if pipeline.value.timestamp_format:
        options["timestampFormat"] = pipeline.value.timestamp_format
    inferred = spark.read.options(**options).json(spark.sparkContext.parallelize(objects, 1))
    fields = [f for f in inferred.schema.fields if f.name != "_corrupt_record"]
    if not fields:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: cannot infer a schema: the {len(objects)} sampled "
            "JSON objects hold no field to make a column of (empty, {}, or malformed); "
            f"{instead}"
        )
    return in_record_order(StructType(fields), objects)


def _kinds(values: list[str]) -> str:
    """What sampled records are instead of objects: ``12 arrays, 3 other``."""
    arrays = sum(1 for v in values if v.lstrip(" \t\r\n")[:1] == "[")
    parts = [f"{arrays} array{'s' if arrays != 1 else ''}"] if arrays else []
    if len(values) - arrays:
        parts.append(f"{len(values) - arrays} other (a string, a number, null or malformed)")
    return ", ".join(parts)
