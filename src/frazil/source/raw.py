"""The first step of every batch: raw Kafka rows into the batch's column contract."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def to_contract(raw: DataFrame) -> DataFrame:
    """Rename the Kafka source's columns to the contract and add the empty contract columns.

    ``headers`` exists only when the source reads them (``includeHeaders``).
    """
    from pyspark.sql import functions as F

    headers = [F.col("headers").alias(c.HEADERS)] if "headers" in raw.columns else []
    return raw.select(
        F.col("key").alias(c.KEY),
        F.col("value").alias(c.VALUE),
        *headers,
        F.col("topic").alias(c.TOPIC),
        F.col("partition").alias(c.PARTITION),
        F.col("offset").alias(c.OFFSET),
        F.col("timestamp").alias(c.TIMESTAMP),
        F.unix_millis(F.col("timestamp")).alias(c.TIMESTAMP_MS),
        F.lit(None).cast(c.ERROR_DDL).alias(c.ERROR),
        F.lit(None).cast("string").alias(c.TABLE),
        F.lit(None).cast("string").alias(c.OP),
    )
