"""Write modes: set each record's operation (append today; upsert and delete later)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def append_mode(frame: DataFrame) -> DataFrame:
    """Append every record; tombstones (null values) mean nothing to an append table: skip."""
    from pyspark.sql import functions as F

    op = F.when(F.col(c.VALUE).isNull(), F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
    return frame.withColumn(c.OP, op)
