"""JSON values with Spark's ``from_json``: the hot path stays in the JVM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import PipelineConfig
from frazil.config.types import to_spark_ddl
from frazil.decode.registry import Capabilities, Format, register
from frazil.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: The decoder's corrupt-record field inside the parsed struct (never a column of the batch).
_CORRUPT = "__frazil_json_corrupt"
#: Characters of a bad value quoted in its error detail.
_QUOTED_CHARS = 200


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
    from pyspark.sql.types import StructType

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
    fields = [f for f in inferred.schema.fields if f.name != "_corrupt_record"]
    if not fields:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: the sampled records are not JSON objects; "
            "declare pipelines[].schema in the config"
        )
    return StructType(fields)


@dataclass(frozen=True)
class JsonDecoder:
    """Decodes JSON objects into ``schema``'s columns.

    A value that is not a JSON object (malformed, an array, a string, a number, ``null``,
    empty) or whose fields do not convert to the declared types is marked with stage
    ``decode``; a null value (a tombstone) is not an error.
    """

    schema: StructType
    timestamp_format: str | None = None

    def decode(self, batch: c.Projection) -> c.Projection:
        """Add the schema's columns; mark records that do not decode."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        with_corrupt = StructType([*self.schema.fields, StructField(_CORRUPT, StringType())])
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
        if self.timestamp_format:
            options["timestampFormat"] = self.timestamp_format
        value = batch[c.VALUE]
        text = value.cast("string")
        # The parsed struct is referenced by every field, all in the plan's one select: Spark
        # evaluates it once (subexpression elimination).
        parsed = F.from_json(text, with_corrupt, options)
        corrupt = parsed[_CORRUPT]
        # Only evaluated for bad records: tells a broken document from a type mismatch.
        is_object = F.from_json(text, "map<string,string>").isNotNull()
        reason = F.when(is_object, F.lit("a field does not match the schema's type")).otherwise(
            F.lit("not a JSON object (malformed JSON, an array, a string, a number or null)")
        )
        error = (
            F.when(value.isNull(), F.lit(None))
            .when(
                parsed.isNull(),
                F.struct(
                    F.lit(c.STAGE_DECODE).alias("stage"),
                    F.lit("empty value").alias("reason"),
                    F.lit("").alias("detail"),
                ),
            )
            .when(
                corrupt.isNotNull(),
                F.struct(
                    F.lit(c.STAGE_DECODE).alias("stage"),
                    reason.alias("reason"),
                    F.substring(corrupt, 1, _QUOTED_CHARS).alias("detail"),
                ),
            )
        )
        result = dict(batch)
        for f in self.schema.fields:
            result[f.name] = parsed[f.name]
        result[c.ERROR] = F.coalesce(batch[c.ERROR], error.cast(c.ERROR_DDL))
        return result


register(
    Format(
        name="json",
        capabilities=Capabilities(
            declared_schema=True, inferred_schema=True, schema_per_record=False, keys=False
        ),
        build=lambda pipeline, schema: JsonDecoder(schema, pipeline.timestamp_format),
    )
)
