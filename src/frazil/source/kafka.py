"""Reading Kafka topics with Spark's Kafka source: the stream, a batch read and samples."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_topics(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """The topics' records as they are now, from the earliest offsets to the latest, as one
    batch read (``options``: the source's, without a start or a rate limit)."""
    reader = spark.read.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame: DataFrame = (
        reader.option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
    )
    return frame


def sample_topics(
    spark: SparkSession, options: dict[str, str], column: str, total: int, minimum: int
) -> list[bytes]:
    """Non-null ``column`` values (``key``, ``value``) from the start of every partition of
    the topics, in one Spark job: ``total`` spread over the partitions, at least ``minimum``
    from each. A pipeline over a topic per source table (Debezium's layout) meets each
    table's shape; a ``limit`` would take them all from the first partition read."""
    from pyspark.sql import DataFrame

    from frazil.jvm.classes import java_class

    raw = read_topics(spark, options)
    frame = raw.where(raw[column].isNotNull()).select(column)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    sampled = java_class(jvm, "dev.frazil.spark.Samples").perPartition(frame._jdf, total, minimum)
    return [bytes(row[0]) for row in DataFrame(sampled, spark).collect()]


def read_stream(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """The raw Kafka stream (key, value, topic, partition, offset, timestamp, ...)."""
    reader = spark.readStream.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame: DataFrame = reader.load()
    return frame
