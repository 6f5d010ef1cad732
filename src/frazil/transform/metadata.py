"""Kafka metadata columns (``kafka_metadata``) that reach the table as ``_kafka_<name>``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructField


def _source(batch: c.Projection, name: str) -> Column:
    if name == "key":
        # A key that is not UTF-8 (a binary or Avro key) is quoted in hex: the column is a
        # string every reader must be able to read, and distinct keys stay distinct.
        return c.utf8_text(batch[c.KEY])
    column = {
        "topic": c.TOPIC,
        "partition": c.PARTITION,
        "offset": c.OFFSET,
        "timestamp": c.TIMESTAMP,
        "headers": c.HEADERS,
    }[name]
    return batch[column]


def add_metadata(batch: c.Projection, pipeline: PipelineConfig) -> c.Projection:
    """Add the pipeline's requested Kafka metadata columns from the provenance columns."""
    result = dict(batch)
    for name in pipeline.kafka_metadata:
        result[f"{c.METADATA_PREFIX}{name}"] = _source(batch, name)
    return result


def metadata_fields(pipeline: PipelineConfig) -> list[StructField]:
    """The table columns :func:`add_metadata` produces, for table creation."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructType,
        TimestampType,
    )
    from pyspark.sql.types import StructField as Field

    types = {
        "topic": StringType(),
        "partition": IntegerType(),
        "offset": LongType(),
        "timestamp": TimestampType(),
        "key": StringType(),
        "headers": ArrayType(
            StructType([Field("key", StringType()), Field("value", BinaryType())])
        ),
    }
    return [Field(f"{c.METADATA_PREFIX}{m}", types[m]) for m in pipeline.kafka_metadata]
