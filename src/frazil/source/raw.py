"""The first step of every batch: raw Kafka rows into the batch's column contract."""

from __future__ import annotations

from frazil import columns as c


def to_contract(raw_columns: list[str]) -> c.Projection:
    """The contract's columns as expressions over the Kafka source's columns.

    ``headers`` exists only when the source reads them (``includeHeaders``).
    """
    from pyspark.sql import functions as F

    projection: c.Projection = {
        c.KEY: F.col("key"),
        c.VALUE: F.col("value"),
    }
    if "headers" in raw_columns:
        projection[c.HEADERS] = F.col("headers")
    projection.update(
        {
            c.TOPIC: F.col("topic"),
            c.PARTITION: F.col("partition"),
            c.OFFSET: F.col("offset"),
            c.TIMESTAMP: F.col("timestamp"),
            c.TIMESTAMP_MS: F.unix_millis(F.col("timestamp")),
            c.ERROR: F.lit(None).cast(c.ERROR_DDL),
            c.TABLE: F.lit(None).cast("array<string>"),
            c.OP: F.lit(None).cast("string"),
        }
    )
    return projection
