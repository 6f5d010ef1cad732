"""JSON values with Spark's ``from_json``: the hot path stays in the JVM.

The schema is declared (``schema:``), read from a JSON Schema (``schema_file`` or the
registry's ``subject``), or inferred from a sample of the topics. Values in the Schema
Registry wire format (confluent-kafka's ``JSONSerializer``: magic byte 0 and a 4-byte schema
id before the document) decode the same as plain JSON: a JSON document never starts with a
zero byte, so the header is recognised and skipped whatever the schema source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import PipelineConfig
from frazil.config.types import to_spark_ddl
from frazil.decode import wire
from frazil.decode.errors import decode_error
from frazil.decode.json_schema import json_schema_to_spark
from frazil.decode.registry import BuildContext, Decoded, Format, register
from frazil.errors import ConfigError, PipelineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: The decoder's corrupt-record field inside the parsed struct (never a column of the batch).
_CORRUPT = "__frazil_json_corrupt"
#: Characters of a bad value quoted in its error detail.
_QUOTED_CHARS = 200
#: Records sampled to infer a schema.
INFER_SAMPLE = 1000


def schema_from_fields(fields: dict[str, str]) -> StructType:
    """Declared ``name: type`` fields as a Spark ``StructType`` (all fields nullable)."""
    from pyspark.sql.types import StructType

    ddl = ", ".join(f"`{name}` {to_spark_ddl(t)}" for name, t in fields.items())
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def schema_from_config(pipeline: PipelineConfig) -> StructType:
    """The declared ``schema:`` as a Spark ``StructType`` (all fields nullable)."""
    assert pipeline.schema_ is not None
    return schema_from_fields(pipeline.schema_)


def _text(data: Column) -> Column:
    """The JSON text of a value, without a Schema Registry wire-format header."""
    from pyspark.sql import functions as F

    # startswith compares in place; substring would copy a byte array per record.
    header = F.startswith(data, F.lit(b"\x00"))
    return F.when(header, F.substring(data, 6, 2**31 - 1)).otherwise(data).cast("string")


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
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    reader = spark.read.format("kafka")
    for key, value in batch_options.items():
        reader = reader.option(key, value)
    raw = reader.option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
    values = [
        row[0]
        for row in raw.select(_text(F.col(column)))
        .where(F.col(column).isNotNull())
        .limit(sample)
        .collect()
    ]
    what = "key_schema" if column == "key" else "schema"
    if not values:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: cannot infer a schema because its topics hold no "
            f"records yet; declare pipelines[].{what} in the config"
        )
    options = {"inferTimestamp": "true", "prefersDecimal": "false"}
    if pipeline.timestamp_format:
        options["timestampFormat"] = pipeline.timestamp_format
    inferred = spark.read.options(**options).json(spark.sparkContext.parallelize(values, 1))
    fields = [f for f in inferred.schema.fields if f.name != "_corrupt_record"]
    if not fields:
        raise PipelineError(
            f"pipeline {pipeline.name!r}: the sampled records are not JSON objects; "
            f"declare pipelines[].{what} in the config"
        )
    return StructType(fields)


@dataclass(frozen=True)
class JsonDecoder:
    """Decodes JSON objects into ``schema``'s fields.

    A value that is not a JSON object (malformed, an array, a string, a number, ``null``,
    empty) or whose fields do not convert to the declared types is marked with stage
    ``decode``; a null value (a tombstone) is not an error.
    """

    schema: StructType
    timestamp_format: str | None = None

    @property
    def scalar(self) -> bool:
        """JSON objects decode into a struct."""
        return False

    def version(self) -> object:
        """The schema is fixed for the run."""
        return None

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Nothing to learn: the schema does not depend on the records."""
        del raw, column
        return False

    def decode(self, data: Column) -> Decoded:
        """The parsed struct, and the mark of records that do not decode."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        with_corrupt = StructType([*self.schema.fields, StructField(_CORRUPT, StringType())])
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
        if self.timestamp_format:
            options["timestampFormat"] = self.timestamp_format
        text = _text(data)
        parsed = F.from_json(text, with_corrupt, options)
        corrupt = parsed[_CORRUPT]
        # Only evaluated for bad records: tells a broken document from a type mismatch.
        is_object = F.from_json(text, "map<string,string>").isNotNull()
        reason = F.when(is_object, F.lit("a field does not match the schema's type")).otherwise(
            F.lit("not a JSON object (malformed JSON, an array, a string, a number or null)")
        )
        error = (
            F.when(data.isNull(), F.lit(None))
            .when(parsed.isNull(), decode_error(F.lit("empty value"), F.lit("")))
            .when(
                corrupt.isNotNull(),
                decode_error(reason, F.substring(corrupt, 1, _QUOTED_CHARS)),
            )
        )
        # A null key or value (tombstone) decodes to null, not to a struct of nulls.
        value = F.when(
            data.isNotNull(), F.struct(*[parsed[f.name].alias(f.name) for f in self.schema.fields])
        )
        fields = {f.name: parsed[f.name] for f in self.schema.fields}
        return Decoded(value=value, error=error.cast(c.ERROR_DDL), fields=fields)


def _build(context: BuildContext) -> JsonDecoder:
    pipeline = context.pipeline
    declared = context.option("schema")
    schema_file = context.option("schema_file")
    timestamp_format = pipeline.timestamp_format if context.part == "value" else None
    if declared is not None:
        assert isinstance(declared, dict)
        return JsonDecoder(schema_from_fields(declared), timestamp_format)
    if schema_file is not None:
        assert isinstance(schema_file, str)
        try:
            document = json.loads(Path(schema_file).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{context.config_key('schema_file')}: cannot read JSON Schema {schema_file}: {exc}"
            ) from None
        return JsonDecoder(json_schema_to_spark(document, schema_file), timestamp_format)
    source = pipeline.key_source() if context.part == "key" else pipeline.value_source()
    if source == "registry":
        found = wire.subject_schemas(context, "JSON", "a JSON Schema")
        subject, latest = found.subject, found.latest
        where = f"subject {subject!r} version {latest.version} (id {latest.schema_id})"
        return JsonDecoder(json_schema_to_spark(json.loads(latest.text), where), timestamp_format)
    # Inferred: the existing table's shape keeps the decoded columns stable across restarts.
    if context.table_schema is not None:
        return JsonDecoder(context.table_schema, timestamp_format)
    assert context.batch_options is not None
    schema = infer_schema(
        context.spark, context.batch_options, pipeline, INFER_SAMPLE, column=context.part
    )
    return JsonDecoder(schema, timestamp_format)


register(Format(name="json", build=_build))
