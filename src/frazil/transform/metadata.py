"""Kafka metadata columns (``kafka_metadata``) that reach the table as ``_kafka_<name>``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import PipelineConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructField


def _sources() -> dict[str, Column]:
    from pyspark.sql import functions as F

    return {
        "topic": F.col(c.TOPIC),
        "partition": F.col(c.PARTITION),
        "offset": F.col(c.OFFSET),
        "timestamp": F.col(c.TIMESTAMP),
        "key": F.col(c.KEY).cast("string"),
        "headers": F.col(c.HEADERS),
    }


def add_metadata(frame: DataFrame, pipeline: PipelineConfig) -> DataFrame:
    """Add the pipeline's requested Kafka metadata columns from the provenance columns."""
    if not pipeline.kafka_metadata:
        return frame
    sources = _sources()
    return frame.select(
        "*", *[sources[m].alias(f"{c.METADATA_PREFIX}{m}") for m in pipeline.kafka_metadata]
    )


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
